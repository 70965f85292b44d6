#include "work_units.hpp"

#include "messages.hpp"

#include <cstring>
#include <limits>
#include <string>

namespace tandem::coord {

namespace {

// The one statement that abandons work units: assigned ones of the run trained from a version
// before ?3, all of them (?4 = 0) or the one with id ?4.
constexpr std::string_view kAbandon =
    "UPDATE work_units SET state = 'abandoned', abandon_reason = ?1 WHERE run_id = ?2 AND state = "
    "'assigned' AND base_version < ?3 AND (?4 = 0 OR id = ?4)";

Status abandon(Database& db, int64_t runId, int64_t beforeVersion, int64_t workUnitId,
               std::string_view reason) {
    auto u = db.prepare(kAbandon);
    if (!u)
        return u.error();
    return u->bind(1, reason).bind(2, runId).bind(3, beforeVersion).bind(4, workUnitId).run();
}

}  // namespace

std::optional<Refusal> stepOwnWorkUnit(Statement& q, int64_t workUnitId, int64_t clientId) {
    if (!q.step())
        return refuse(404, "unknown_work_unit",
                      "work unit " + std::to_string(workUnitId) + " does not exist");
    if (q.integer(0) != clientId)
        return refuse(403, "not_your_work_unit",
                      "work unit " + std::to_string(workUnitId) + " belongs to another client");
    return std::nullopt;
}

Status abandonWorkUnit(Database& db, int64_t runId, int64_t workUnitId, std::string_view reason) {
    return abandon(db, runId, std::numeric_limits<int64_t>::max(), workUnitId, reason);
}

Status abandonWorkUnitsBefore(Database& db, int64_t runId, int64_t version,
                              std::string_view reason) {
    return abandon(db, runId, version, 0, reason);
}

net::Sha256Digest toDigest(const std::vector<uint8_t>& blob) {
    net::Sha256Digest d{};
    if (blob.size() == d.size())
        std::memcpy(d.data(), blob.data(), d.size());
    return d;
}

}  // namespace tandem::coord
