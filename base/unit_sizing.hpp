// How many inner steps a work unit has: the coordinator sizes units by this rule
// (coordinator/work_assignment) and the desktop app's cost estimate (core/cost_estimate)
// predicts them by the same rule, so what a donor is promised is what the coordinator does.
#pragma once

#include <cstdint>

namespace tandem {

struct UnitSizing {
    int64_t tokensPerStep = 0;  // B x T
    int targetSeconds = 0;      // what a unit should take on the worker's device
    int minInnerSteps = 1;      // H for the slowest worker
    int maxInnerSteps = 1;      // H for a worker of unknown or ample throughput (the run's cap)
};

// About targetSeconds of the worker's throughput, clamped to [minInnerSteps, maxInnerSteps];
// the maximum when the throughput is unknown (tokensPerSecond <= 0).
int innerStepsFor(const UnitSizing& sizing, double tokensPerSecond);

}  // namespace tandem
