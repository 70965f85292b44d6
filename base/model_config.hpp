// The GPT model's shape as a value: layers, heads, channels, sequence length and vocabulary,
// parsed from a name ("tiny") or numbers and validated. The wire protocol, the coordinator and the
// kernels share it; the parameter layout that follows from it lives in kernels/model.hpp.
//
// Dimensions: L layers, NH heads, C channels, T sequence length (maxSeqLen), V vocabulary (256).
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

    // "tiny", "small", "medium", or numbers as "L=2,NH=4,C=128,T=64".
    static Expected<ModelConfig> parse(std::string_view text);
    // Refuses sizes that make no sense (zero, C not divisible by NH, absurdly large).
    Status validate() const;
    std::string describe() const;  // "L=2 NH=4 C=128 T=64 V=256"
    int64_t parameterCount() const;

    bool operator==(const ModelConfig&) const = default;
};

}  // namespace tandem
