// The elementwise step that commits a checked upload to the round sum.
//
// Dimensions: N elements.
#pragma once

#include <span>

namespace tandem {
class ThreadPool;
}

namespace tandem::coord {

// sum (N) += weight * x (N). Rounds exactly like accumulateFp16 (sum += weight * decode(h)) when
// x holds decoded halves, so a sum rebuilt from stored payloads after a restart is bit-identical.
void addScaled(std::span<float> sum, std::span<const float> x, float weight,
               ThreadPool* pool = nullptr);

}  // namespace tandem::coord
