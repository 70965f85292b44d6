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

// lr 0.35, not the DiLoCo paper's 0.7: with the worker's upload overlap nearly every result lands
// one version late, and re-based late results diverge past an outer lr of about 0.68 at momentum
// 0.9 (docs/benchmarks.md, "Long runs with late results").
struct OuterConfig {
    float lr = 0.35f;
    float momentum = 0.9f;
};

}  // namespace tandem
