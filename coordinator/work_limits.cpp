// Sybil limits on work (docs/protocol.md "Request work"): a client holds at most
// --new-client-units (1) until a result of it was accepted in the last 4 rounds, and a unit whose
// heartbeats report no progress is reclaimed after --stall-timeout, as a silent one is after
// --heartbeat-timeout.
#include "coordinator_impl.hpp"

namespace tandem::coord {

int Coordinator::Impl::workUnitLimit(int64_t clientId) {
    auto q = db.prepare(
        "SELECT COUNT(*) FROM results s JOIN work_units w ON w.id = s.work_unit_id WHERE "
        "w.client_id = ? AND s.round > ?");
    if (!q)
        return 1;
    q->bind(1, clientId).bind(2, version - std::max(1, cfg.referenceRounds));
    const int64_t accepted = q->step() ? q->integer(0) : 0;
    if (accepted > 0)
        return cfg.maxWorkUnitsPerClient;
    return std::min(cfg.maxWorkUnitsPerClient, std::max(1, cfg.newClientWorkUnits));
}

void Coordinator::Impl::abandonStalled() {
    if (cfg.stallTimeoutSeconds <= 0)
        return;
    // The liveness table holds the assigned units (tick() retained them just before).
    const int64_t t = now();
    std::vector<std::pair<int64_t, std::string>> victims;
    for (const auto& [id, p] : liveness.units()) {
        // A trained result waiting behind other uploads reports its last step, which cannot go
        // up: it is not stalled (its heartbeats alone decide, as for any other unit).
        const bool trained = p.bestStep >= p.innerSteps;
        if (p.reported && !trained && t - p.bestStepSinceUnix >= cfg.stallTimeoutSeconds &&
            !uploading.count(id))
            victims.emplace_back(id, "heartbeats without progress for " +
                                         std::to_string(t - p.bestStepSinceUnix) +
                                         " s (still at step " + std::to_string(p.bestStep) +
                                         "); its data was reassigned");
    }
    for (auto& [id, why] : victims) {
        (void)abandonWorkUnit(db, runId, id, why);
        forgetLiveness(id);
        log("work unit " + std::to_string(id) + " abandoned: " + why);
    }
}

}  // namespace tandem::coord
