// llm.c's GPT-2 checkpoint (train_gpt2.c, gpt2_build_from_checkpoint; train_gpt2.py,
// write_model): a header of 256 int32 (magic 20240326, version 3 = fp32, maxT, V, L, NH, C,
// padded V, the rest 0), then 16 fp32 tensors in the order wte (Vp, C), wpe (maxT, C), ln1w,
// ln1b, qkvw (3C, C), qkvb, attprojw (C, C), attprojb, ln2w, ln2b, fcw (4C, C), fcb,
// fcprojw (C, 4C), fcprojb (each of those with the layer dimension L outermost), lnfw, lnfb.
// Matrices are Linear (out, in), as in Tandem.
//
// Dimensions: L layers, NH heads, C channels, maxT positions, V vocabulary, Vp padded vocabulary.
#pragma once

#include "expected.hpp"
#include "model.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace tandem {

inline constexpr int32_t kLlmcMagic = 20240326;
inline constexpr int32_t kLlmcVersionFp32 = 3;
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

struct LlmcHeader {
    int32_t maxT = 0, vocab = 0, layers = 0, heads = 0, channels = 0, paddedVocab = 0;
};

// True when the file starts with llm.c's model magic.
bool looksLikeLlmc(std::span<const uint8_t> bytes);

// The header; refuses a wrong magic, a version other than 3 (llm.c's 5 is bf16) and sizes
// that are not positive.
Expected<LlmcHeader> parseLlmcHeader(std::span<const uint8_t> file);

// Writes every stored wte row (Vp = the layout's wte rows, padding rows as stored).
std::vector<uint8_t> serializeLlmc(const ParameterLayout& layout,
                                   std::span<const float> parameters);

// The flat parameters (P) for `layout`'s model. Every tensor's shape from the header is checked
// against the model first (the error names the tensor, the expected and the found shape), then
// the file's size; wte rows at or above V are set to zero.
Expected<std::vector<float>> parseLlmc(std::span<const uint8_t> file,
                                       const ParameterLayout& layout);

}  // namespace tandem
