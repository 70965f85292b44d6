// Work assignment: how long a work unit is and which train tokens it reads (bytes of a
// byte-level run; ranges never cross a train shard's end). The rest (the
// database rows, the signed manifest, heartbeats) is Coordinator::Impl::assignWork and
// heartbeat in work_assignment.cpp.
#pragma once

#include "run_setup.hpp"

#include <cstdint>
#include <optional>
#include <span>

namespace tandem::coord {

// The first manifest version that lists a sharded run's piece URLs ("shards"); a sharded run
// has no work for a worker that asks with an older one.
inline constexpr int kShardedProtocol = 6;

// Inner steps H for a worker: about targetSeconds of its reported throughput, clamped to
// [minInnerSteps, innerSteps], so fast and slow workers take about the same wall time; the
// maximum when it reported none (tokensPerSecond <= 0).
// uplinkBytesPerSecond: the worker's measured uplink (0: unknown); its result's upload (in the
// run's encoding) then fits in the next unit (base/unit_sizing.hpp).
int innerStepsFor(const RunSettings& run, double tokensPerSecond, int targetSeconds,
                  double uplinkBytesPerSecond = 0);

// The oldest manifest version every worker of the run reads (a twin's manifest, whose second
// worker is not known yet): 2 for an fp16 run, 5 for an int8 run (only workers of version 5 and
// later get its work).
int oldestManifestProtocol(const RunSettings& run);

// The fewest inner steps a result of a unit of `innerSteps` may have: as many as the shortest
// unit the run hands out (minInnerSteps), never more than the unit's own H. A worker that stops
// early (paused, quitting) uploads what it has when it reached this (docs/protocol.md,
// "Partial results").
int minResultSteps(const RunSettings& run, int innerSteps);

// The train tokens a unit of H steps reads: H batches of windows, at least one window, at most
// all train tokens.
int64_t workUnitBytes(const RunSettings& run, int innerSteps, int64_t trainBytes);

struct DataRange {
    int64_t offset = 0;
    int64_t length = 0;
    int64_t nextCursor = 0;     // where the next unit starts
    int64_t assignedBytes = 0;  // the round's span after this unit
};

// The next `length` tokens at the cursor, or from token 0 when they would run past the end
// (the skipped tail counts as assigned); none when the round's units would then span more than
// the shard (no token is trained twice in one round).
std::optional<DataRange> nextDataRange(int64_t cursor, int64_t assignedBytes, int64_t length,
                                       int64_t trainBytes);

// The same over several train shards laid end to end (shardEnds: where each ends): a range
// that would cross a shard's end starts at the next shard instead (after the last: at 0), the
// skipped tail counting as assigned, and is cut to that shard's length.
std::optional<DataRange> nextDataRange(int64_t cursor, int64_t assignedBytes, int64_t length,
                                       std::span<const int64_t> shardEnds);

}  // namespace tandem::coord
