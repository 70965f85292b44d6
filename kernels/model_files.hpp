// Exporting a model's weights for other tools and importing them back: the folder that
// `tandem-coordinator export` writes and the file that `--init` reads. The formats themselves
// are in safetensors.hpp, llmc_checkpoint.hpp and gpt2_names.hpp.
//
// Dimensions: P parameters; V vocabulary; wte rows at or above V are padding.
#pragma once

#include "expected.hpp"
#include "gpt2_names.hpp"
#include "model.hpp"

#include <filesystem>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tandem {

enum class ModelFormat { Safetensors, Llmc };

// "safetensors" or "llmc".
Expected<ModelFormat> parseModelFormat(std::string_view text);
const char* modelFormatName(ModelFormat format);

inline constexpr const char* kSafetensorsFileName = "model.safetensors";
inline constexpr const char* kGpt2ConfigFileName = "config.json";
inline constexpr const char* kLlmcFileName = "model.bin";

struct ExportOptions {
    ModelFormat format = ModelFormat::Safetensors;
    std::filesystem::path outDir;  // must not exist yet; its parent must
    // Copied beside the weights under its own file name (e.g. the run's SentencePiece model).
    std::optional<std::filesystem::path> tokenizer;
    SpecialTokens special;  // for config.json
};

// Writes outDir: model.safetensors + config.json (Hugging Face GPT-2, wte rows [0, V)) or
// model.bin (llm.c, every stored wte row), and the tokenizer. The files are made in a
// temporary sibling folder that is renamed to outDir only when complete, so a failed export
// leaves nothing behind. parameters: (P) of layout.
Status exportModel(const ParameterLayout& layout, std::span<const float> parameters,
                   const ExportOptions& options);

// The parameters (P) for layout's model from a safetensors file (Hugging Face GPT-2 names, with
// or without the "transformer." prefix), an llm.c checkpoint, or a folder holding
// model.safetensors or model.bin. The format is told by the content. Every tensor's shape is
// checked before any value is used; wte rows at or above V are zero.
Expected<std::vector<float>> importModel(const std::filesystem::path& path,
                                         const ParameterLayout& layout);

// The same from bytes already read; `what` names the source in errors.
Expected<std::vector<float>> importModelBytes(std::span<const uint8_t> bytes,
                                              const ParameterLayout& layout,
                                              const std::string& what);

// The Hugging Face tensors of a model (wte rows [0, V)), as written to model.safetensors.
std::vector<uint8_t> serializeGpt2Safetensors(const ParameterLayout& layout,
                                              std::span<const float> parameters);

}  // namespace tandem
