// The work_units table's statements that more than one part uses: a client's own work unit, and
// abandoning work units (one statement for the heartbeat, the timeouts and the round close).
#pragma once

#include "coordinator.hpp"
#include "sqlite.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tandem::coord {

// Steps q, a query for one work unit whose first column is its client: a client may only act on
// its own work units (404 when there is none, 403 when it is another client's).
std::optional<Refusal> stepOwnWorkUnit(Statement& q, int64_t workUnitId, int64_t clientId);

// Abandons one work unit of the run if it is still assigned (an accepted one stays accepted);
// reason: what its worker is told.
Status abandonWorkUnit(Database& db, int64_t runId, int64_t workUnitId, std::string_view reason);
// How the abandon reason of a unit whose result the gate refused begins.
inline constexpr std::string_view kRefusedReasonPrefix = "its result was refused";
// Abandons every assigned work unit of the run trained from a version before `version`.
Status abandonWorkUnitsBefore(Database& db, int64_t runId, int64_t version,
                              std::string_view reason);

// A SHA-256 stored as a blob (all zeros when the blob has the wrong size).
net::Sha256Digest toDigest(const std::vector<uint8_t>& blob);

}  // namespace tandem::coord
