#include "speed_test.hpp"

#include "model.hpp"
#include "random.hpp"

#include <chrono>
#include <vector>

namespace tandem::core {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Expected<SpeedTestResult> measureTrainingSpeed(Backend& backend, const ModelConfig& model, int B,
                                               int T, const SpeedTestOptions& options) {
    if (B <= 0 || T <= 0 || T > model.maxSeqLen)
        return Error{"a speed test needs 1 <= B and 1 <= T <= " + std::to_string(model.maxSeqLen) +
                     ", found B " + std::to_string(B) + ", T " + std::to_string(T)};
    if (auto st = backend.canRun(model, B, T); !st)
        return st.error();
    SpeedTestResult out;
    const auto setupStart = std::chrono::steady_clock::now();
    if (auto st = backend.allocate(model, B, T); !st)
        return st.error();
    const ParameterLayout layout(model);
    std::vector<float> parameters(static_cast<size_t>(layout.parameterCount()));
    initParameters(layout, parameters, options.seed);
    if (auto st = backend.loadParameters(parameters); !st)
        return st.error();
    out.setupSeconds = secondsSince(setupStart);

    Rng rng(options.seed ^ 0x5eedull);
    const size_t n = static_cast<size_t>(B) * T;
    std::vector<int32_t> inputs(n), targets(n);
    const AdamWConfig adamw;
    auto step = [&]() -> Status {
        for (size_t i = 0; i < n; ++i) {
            inputs[i] = static_cast<int32_t>(rng.below(uint64_t(model.vocabSize)));
            targets[i] = static_cast<int32_t>(rng.below(uint64_t(model.vocabSize)));
        }
        if (auto loss = backend.forward(inputs, targets, B, T); !loss)
            return loss.error();
        if (auto st = backend.backward(); !st)
            return st;
        if (auto stats = backend.adamwStep(adamw, 1e-4f); !stats)
            return stats.error();
        return {};
    };
    if (auto st = step(); !st)  // warm-up: first-touch pages, caches, thread start-up
        return st.error();
    const auto start = std::chrono::steady_clock::now();
    while (out.timedSteps < std::max(1, options.maxSteps)) {
        if (auto st = step(); !st)
            return st.error();
        ++out.timedSteps;
        if (secondsSince(start) >= options.minSeconds)
            break;
    }
    out.timedSeconds = secondsSince(start);
    out.tokensPerSecond = static_cast<double>(n) * out.timedSteps / out.timedSeconds;
    return out;
}

}  // namespace tandem::core
