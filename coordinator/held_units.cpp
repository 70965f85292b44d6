// A client's view of its work units: the ones it holds (GET /v1/work) and giving one back
// (DELETE /v1/work/{id}), so that a worker that lost track of a unit (killed after the commit,
// before it recorded the answer) need not wait for the heartbeat timeout.
#include "coordinator_impl.hpp"

namespace tandem::coord {

Outcome<net::HeldWorkUnits> Coordinator::Impl::heldWork(int64_t clientId) {
    auto q = db.prepare(
        "SELECT id, COALESCE(request_id, ''), base_version, last_step, heartbeat_unix, "
        "deadline_unix FROM work_units WHERE client_id = ? AND state = 'assigned' ORDER BY id");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, clientId);
    net::HeldWorkUnits out;
    while (q->step()) {
        out.units.push_back({q->integer(0), q->text(1), q->integer(2), q->integer(3), q->integer(4),
                             q->integer(5)});
        // The step and the heartbeat from memory (the database has them from the last batch).
        if (const UnitPulse* p = liveness.find(q->integer(0))) {
            out.units.back().lastStep = p->step;
            out.units.back().heartbeatUnix = p->heartbeatUnix;
        }
    }
    return out;
}

Outcome<void> Coordinator::Impl::releaseWork(int64_t clientId, int64_t workUnitId) {
    auto q = db.prepare("SELECT client_id, state FROM work_units WHERE id = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, workUnitId);
    if (auto r = stepOwnWorkUnit(*q, workUnitId, clientId))
        return *r;
    const std::string state = q->text(1);
    const std::string id = std::to_string(workUnitId);
    if (state != "assigned")
        return refuse(409, "not_assigned",
                      "work unit " + id + " is " + state +
                          "; only an assigned unit can be "
                          "released");
    if (uploading.count(workUnitId))
        return refuse(409, "upload_in_progress",
                      "the result of work unit " + id + " is arriving; it cannot be released");
    const std::string reason = "released by its client";
    if (auto st = abandonWorkUnit(db, runId, workUnitId, reason); !st)
        return internalError(st.error().message);
    metrics.countAbandoned("released", db.changes());
    log("work unit " + id + " released by client " + std::to_string(clientId));
    return {};
}

}  // namespace tandem::coord
