// Work assignment: how long a work unit is and which train bytes it reads. The rest (the
// database rows, the signed manifest, heartbeats) is Coordinator::Impl::assignWork and
// heartbeat in work_assignment.cpp.
#pragma once

#include "run_setup.hpp"

#include <cstdint>
#include <optional>

namespace tandem::coord {

// Inner steps H for a worker: about targetSeconds of its reported throughput, clamped to
// [minInnerSteps, innerSteps], so fast and slow workers take about the same wall time; the
// maximum when it reported none (tokensPerSecond <= 0).
int innerStepsFor(const RunSettings& run, double tokensPerSecond, int targetSeconds);

// The train bytes a unit of H steps reads: H batches of windows, at least one window, at most
// the whole shard.
int64_t workUnitBytes(const RunSettings& run, int innerSteps, int64_t trainBytes);

struct DataRange {
    int64_t offset = 0;
    int64_t length = 0;
    int64_t nextCursor = 0;     // where the next unit starts
    int64_t assignedBytes = 0;  // the round's span after this unit
};

// The next `length` bytes at the cursor, or from byte 0 when they would run past the end (the
// skipped tail counts as assigned); none when the round's units would then span more than the
// shard (no byte is trained twice in one round).
std::optional<DataRange> nextDataRange(int64_t cursor, int64_t assignedBytes, int64_t length,
                                       int64_t trainBytes);

}  // namespace tandem::coord
