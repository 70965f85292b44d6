// The GPT model's shape as a value: layers, heads, channels, sequence length and vocabulary,
// parsed from a name ("tiny") or numbers and validated. The wire protocol, the coordinator and the
// kernels share it; the parameter layout that follows from it lives in kernels/model.hpp.
//
// Dimensions: L layers, NH heads, C channels, T sequence length (maxSeqLen), V vocabulary (the
// run's, e.g. 256 for bytes or 50257 for GPT-2's BPE), Vp = V rounded up to a multiple of 64: the
// rows that wte and the logits are stored with, so that the matrix products stay aligned. Padded
// rows are zero, never inputs and never predicted (docs/architecture.md, "Vocabulary padding").
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

struct ModelConfig {
    int layers = 0;     // L
    int heads = 0;      // NH
    int channels = 0;   // C
    int maxSeqLen = 0;  // T: positions the model has embeddings for
    int vocabSize = 256;

    static constexpr int kVocabAlignment = 64;  // llm.c pads 50257 to 50304
    static constexpr int kMinVocab = 2;
    static constexpr int kMaxVocab = 1 << 20;

    // "tiny", "small", "medium", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", or numbers as
    // "L=2,NH=4,C=128,T=64[,V=50257]".
    static Expected<ModelConfig> parse(std::string_view text);
    // The preset names parse() accepts, for help texts.
    static std::string presetNames();
    // Refuses sizes that make no sense (zero, C not divisible by NH, absurdly large).
    Status validate() const;
    std::string describe() const;  // "L=2 NH=4 C=128 T=64 V=256"
    // V rounded up to a multiple of kVocabAlignment: the rows of wte and of the logits.
    int paddedVocab() const;
    // The floats stored for the model: wte has paddedVocab() rows. Every buffer, checkpoint and
    // pseudo-gradient has this many values.
    int64_t parameterCount() const;
    // The model's parameters without the padded rows (124,439,808 for gpt2): the count papers
    // and Hugging Face give.
    int64_t unpaddedParameterCount() const;

    bool operator==(const ModelConfig&) const = default;
};

}  // namespace tandem
