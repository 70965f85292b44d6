// Rounds: the arithmetic of a round close as a function. The rest of the rounds' life (the
// quorum, timeouts, the ticker, the database rows of a close) is Coordinator::Impl in rounds.cpp.
//
// Dimensions: P parameters.
#pragma once

#include "outer.hpp"
#include "state_dir.hpp"
#include "weight_delta.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tandem {
class ThreadPool;
}

namespace tandem::coord {

// The results of a round trained from an older version, by that version.
struct LateResults {
    int64_t baseVersion = 0;
    double weightSum = 0;
};

struct NextVersion {
    std::vector<float> theta;             // (P)
    std::vector<float> velocity;          // (P)
    std::vector<float> residual;          // (P) with weight deltas, else empty
    std::optional<QuantizedDelta> delta;  // q, with weight deltas: theta = old theta + deq(q)
};

// The weights a round produces: late results re-based onto theta (their base version's weights
// read from dirs), then the outer Nesterov step with the weighted mean delta sum / weightSum.
// With weight deltas (codec not Off) the step's move u is quantized with error feedback
// (quantizeWithFeedback): the next weights are theta + deq(Q(u + residual)) and the new residual
// is returned. The momentum sees the true mean delta d, as without deltas: quantization changes
// only what is applied to theta, and the residual puts what it left out into the next version.
// theta, velocity: (P) the round's version; sum: (P) sum of weight x delta over its results;
// residual: (P) the version's residual e (codec not Off), else empty. offset: a sharded run's
// range, theta, velocity and sum being values [offset, offset + N) of the model (the step is
// element-wise, so a range steps exactly as it would inside the whole vector).
Expected<NextVersion> outerStepOfRound(const StateDir& dirs, const ModelConfig& model,
                                       std::span<const float> theta,
                                       std::span<const float> velocity, std::span<const float> sum,
                                       double weightSum, std::span<const LateResults> late,
                                       const OuterConfig& outer, ThreadPool* pool,
                                       std::span<const float> residual = {},
                                       WeightDeltaCodec codec = WeightDeltaCodec::Off,
                                       int64_t offset = 0);

}  // namespace tandem::coord
