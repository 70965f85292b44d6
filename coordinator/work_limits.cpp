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

void Coordinator::Impl::noteProgress(int64_t workUnitId, int64_t step) {
    auto [it, fresh] = progressSeen.try_emplace(workUnitId, Progress{step, now()});
    if (!fresh && step > it->second.step)
        it->second = Progress{step, now()};
}

void Coordinator::Impl::abandonStalled() {
    if (cfg.stallTimeoutSeconds <= 0 || progressSeen.empty())
        return;
    const int64_t t = now();
    std::vector<std::pair<int64_t, std::string>> victims;
    for (auto it = progressSeen.begin(); it != progressSeen.end();) {
        // Every tick, for every unit that reported: prepared once, kept by the database.
        auto q = db.prepareCached("SELECT state, inner_steps FROM work_units WHERE id = ?");
        if (!q)
            return;
        q->bind(1, it->first);
        if (!q->step() || q->text(0) != "assigned") {
            it = progressSeen.erase(it);  // finished or abandoned: nothing to watch
            continue;
        }
        // A trained result waiting behind other uploads reports its last step, which cannot go
        // up: it is not stalled (its heartbeats alone decide, as for any other unit).
        const bool trained = it->second.step >= q->integer(1);
        if (!trained && t - it->second.since >= cfg.stallTimeoutSeconds &&
            !uploading.count(it->first))
            victims.emplace_back(
                it->first, "heartbeats without progress for " +
                               std::to_string(t - it->second.since) + " s (still at step " +
                               std::to_string(it->second.step) + "); its data was reassigned");
        ++it;
    }
    for (auto& [id, why] : victims) {
        (void)abandonWorkUnit(db, runId, id, why);
        progressSeen.erase(id);
        log("work unit " + std::to_string(id) + " abandoned: " + why);
    }
}

}  // namespace tandem::coord
