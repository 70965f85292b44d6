// What the model writes now (the real-runs issue, item 6): after a new global version, a short
// continuation of each of a few prompts, written with the run's tokenizer on the coordinator's
// CPU, kept with the version and served at GET /v1/runs/{run}/samples. Only while the model is
// small enough: the time a sample would take is predicted from the validation pass's speed.
// The validator thread's part lives in Coordinator::Impl (samples.cpp).
#pragma once

#include "model.hpp"
#include "sampler.hpp"
#include "tokenizer.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tandem::coord {

inline const std::vector<std::string> kDefaultPrompts = {"The ", "Once upon a time",
                                                         "Q: What is the meaning of life?\nA:"};

struct SampleConfig {
    std::vector<std::string> prompts;  // empty: kDefaultPrompts
    int tokens = 64;                   // new tokens per prompt
    int topK = 40;
    uint64_t seed = 1;
    double maxSeconds = 10;  // skip sampling when all prompts would take longer; 0: never sample

    const std::vector<std::string>& promptsToWrite() const {
        return prompts.empty() ? kDefaultPrompts : prompts;
    }
};

struct ModelSample {
    int64_t version = 0;
    std::string prompt;
    std::string text;  // the continuation alone, valid UTF-8
    double seconds = 0;
};

// Forward positions that sampling every prompt takes (one forward per new token over a context
// of at most T tokens): what the time prediction multiplies by the measured rate.
int64_t samplingPositions(const ModelConfig& model, std::span<const int64_t> promptTokens,
                          int newTokens);

// One continuation per prompt, on the CPU backend with `threads` threads.
Expected<std::vector<ModelSample>> writeSamples(const ModelConfig& model,
                                                std::span<const float> weights,
                                                const Tokenizer& tokenizer,
                                                const SampleConfig& config, int64_t version,
                                                int threads);

}  // namespace tandem::coord
