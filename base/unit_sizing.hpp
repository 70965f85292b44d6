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
    int64_t resultBytes = 0;    // what a unit's result uploads (0: not considered)
};

// About targetSeconds of the worker's throughput, clamped to [minInnerSteps, maxInnerSteps];
// the maximum when the throughput is unknown (tokensPerSecond <= 0). With the worker's measured
// uplink (bytes/s, 0: unknown) a unit also lasts kUploadMargin x as long as its result takes
// to upload, so that the upload, which runs while the next unit trains, is done before that one
// ends and the device never waits for it.
inline constexpr double kUploadMargin = 1.1;
int innerStepsFor(const UnitSizing& sizing, double tokensPerSecond,
                  double uplinkBytesPerSecond = 0);

}  // namespace tandem
