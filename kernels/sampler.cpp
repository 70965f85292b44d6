#include "sampler.hpp"

#include "random.hpp"

#include <algorithm>
#include <numeric>

namespace tandem {

int32_t drawTopK(std::span<const float> probabilities, int k, float u) {
    const int n = static_cast<int>(probabilities.size());
    k = std::clamp(k, 1, n);
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    auto higher = [&](int32_t a, int32_t b) {
        return probabilities[a] > probabilities[b] ||
               (probabilities[a] == probabilities[b] && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), higher);
    double mass = 0;
    for (int i = 0; i < k; ++i)
        mass += std::max(0.0f, probabilities[order[i]]);
    if (!(mass > 0))
        return order[0];
    double target = static_cast<double>(u) * mass, seen = 0;
    for (int i = 0; i < k; ++i) {
        seen += std::max(0.0f, probabilities[order[i]]);
        if (target < seen)
            return order[i];
    }
    return order[k - 1];
}

Expected<std::vector<int32_t>> sampleContinuation(Backend& backend, const ModelConfig& model,
                                                  std::span<const int32_t> prompt,
                                                  const SampleSettings& settings) {
    if (prompt.empty())
        return makeError("sampling needs a prompt of at least one token");
    for (int32_t id : prompt)
        if (id < 0 || id >= model.vocabSize)
            return makeError("the prompt holds token " + std::to_string(id) +
                             ", outside the vocabulary of " + std::to_string(model.vocabSize));
    const int T = model.maxSeqLen;
    std::vector<int32_t> context(prompt.begin(), prompt.end());
    std::vector<int32_t> written, targets(static_cast<size_t>(T), 0);
    std::vector<float> probabilities(static_cast<size_t>(model.vocabSize));
    Rng rng(settings.seed);
    for (int n = 0; n < settings.newTokens; ++n) {
        const size_t t = std::min(context.size(), static_cast<size_t>(T));
        std::span<const int32_t> window(context.data() + context.size() - t, t);
        const int len = static_cast<int>(t);
        if (auto loss = backend.forward(window, std::span(targets.data(), t), 1, len); !loss)
            return loss.error();
        if (auto st = backend.storeProbabilities(0, len - 1, probabilities); !st)
            return st.error();
        const int32_t next = drawTopK(probabilities, settings.topK, rng.uniform());
        written.push_back(next);
        context.push_back(next);
    }
    return written;
}

}  // namespace tandem
