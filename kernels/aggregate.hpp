// The elementwise steps of a round's sum: committing a checked upload, and re-basing late ones.
// The coordinator's (hence namespace coord), here so that tandem-bench-diloco rounds exactly like
// it without linking the server. Compiled with -ffp-contract=off (CMakeLists.txt).
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

// sum (N) -= weight * (base (N) - current (N)). Re-bases late results: a delta trained from the
// older weights `base` (delta = base - end) counts as current - end, the move from the weights
// it lands on to the point its worker reached. Without this, a result one version late re-applies
// the step the previous round already took (with outer momentum, the run oscillates).
void rebaseOnto(std::span<float> sum, std::span<const float> base, std::span<const float> current,
                float weight, ThreadPool* pool = nullptr);

}  // namespace tandem::coord
