// What the model writes: a continuation of a prompt drawn token by token from the model's
// top-k next-token probabilities, deterministic in the seed.
//
// Dimensions: V vocabulary, T the model's maxSeqLen.
#pragma once

#include "backend.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace tandem {

struct SampleSettings {
    int newTokens = 64;
    int topK = 40;
    uint64_t seed = 1;
};

// backend: allocated for at least 1 x T, weights loaded. The context is the last T tokens of
// prompt + what was written so far (no cache: one forward per token). Returns only the new
// tokens, each in [0, V).
Expected<std::vector<int32_t>> sampleContinuation(Backend& backend, const ModelConfig& model,
                                                  std::span<const int32_t> prompt,
                                                  const SampleSettings& settings);

// The index drawn from the k largest of probabilities (ties: the lower index first), their
// mass renormalised; u in [0, 1). Exposed for its test.
int32_t drawTopK(std::span<const float> probabilities, int k, float u);

}  // namespace tandem
