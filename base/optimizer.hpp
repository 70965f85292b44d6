// Optimizer settings as values: the inner AdamW and its learning-rate schedule (every backend,
// and the manifest of a work unit), and the outer Nesterov step the coordinator applies
// (kernels/outer.hpp).
#pragma once

#include <cstdint>

namespace tandem {

struct AdamWConfig {
    float beta1 = 0.9f;
    float beta2 = 0.95f;
    float eps = 1e-8f;
    float weightDecay = 0.1f;  // on matrices only (TensorInfo::decays)
    float clipNorm = 1.0f;     // global gradient norm; <= 0 disables clipping
};

// Linear warmup from 0 to peakLr over warmupSteps, then cosine decay to minLr at totalSteps,
// then minLr. Steps are 0-based: at(0) is the rate of the first update.
struct LrSchedule {
    float peakLr = 6e-4f;
    float minLr = 6e-5f;
    int64_t warmupSteps = 0;
    int64_t totalSteps = 1;

    float at(int64_t step) const;
};

struct OuterConfig {
    float lr = 0.7f;
    float momentum = 0.9f;
};

}  // namespace tandem
