// The outer optimizer of DiLoCo, applied by the coordinator when a round closes:
//   d = deltaScale * deltaSum     (deltaSum = sum w_i delta_i, deltaScale = 1 / sum w_i)
//   v = mu v + d
//   theta = theta - lr (d + mu v)          (Nesterov momentum)
//
// Dimensions: P parameters.
#pragma once

#include "optimizer.hpp"

#include <span>

namespace tandem {

class ThreadPool;

// theta (P), velocity (P), deltaSum (P)
void outerNesterovStep(std::span<float> theta, std::span<float> velocity,
                       std::span<const float> deltaSum, float deltaScale, const OuterConfig& config,
                       ThreadPool* pool = nullptr);

}  // namespace tandem
