// The liveness table (unit_liveness.hpp) and the coordinator's use of it: restoring it at start,
// writing it in batches, and the active workers it implies.
#include "unit_liveness.hpp"

#include "coordinator_impl.hpp"

namespace tandem::coord {

void UnitLiveness::touch(int64_t workUnitId, int64_t clientId, int64_t innerSteps, int64_t nowUnix,
                         int64_t step) {
    auto [it, fresh] = m_units.try_emplace(workUnitId);
    UnitPulse& p = it->second;
    if (fresh) {
        p.clientId = clientId;
        p.innerSteps = innerSteps;
        p.step = step;
    }
    p.heartbeatUnix = nowUnix;
    p.changed = true;
}

void UnitLiveness::report(int64_t workUnitId, int64_t step, double loss, double tokensPerSecond,
                          int64_t nowUnix) {
    auto it = m_units.find(workUnitId);
    if (it == m_units.end())
        return;
    UnitPulse& p = it->second;
    // Stall reclaim counts from the first heartbeat and from each one with a higher step.
    if (!p.reported || step > p.bestStep) {
        p.bestStep = step;
        p.bestStepSinceUnix = nowUnix;
    }
    p.reported = true;
    p.heartbeatUnix = nowUnix;
    p.step = step;
    p.loss = loss;
    p.tokensPerSecond = tokensPerSecond;
    p.changed = true;
}

void UnitLiveness::merge(int64_t workUnitId, int64_t clientId, int64_t innerSteps,
                         int64_t heartbeatUnix, const std::optional<UnitReport>& reported) {
    const bool wasChanged = m_units.count(workUnitId) && m_units[workUnitId].changed;
    touch(workUnitId, clientId, innerSteps, heartbeatUnix);
    if (reported)
        report(workUnitId, reported->step, reported->loss, reported->tokensPerSecond,
               heartbeatUnix);
    m_units[workUnitId].changed = wasChanged;
}

const UnitPulse* UnitLiveness::find(int64_t workUnitId) const {
    auto it = m_units.find(workUnitId);
    return it == m_units.end() ? nullptr : &it->second;
}

void UnitLiveness::forget(int64_t workUnitId) {
    m_units.erase(workUnitId);
}

void UnitLiveness::retain(const std::set<int64_t>& assigned) {
    for (auto it = m_units.begin(); it != m_units.end();)
        it = assigned.count(it->first) ? std::next(it) : m_units.erase(it);
}

std::vector<std::pair<int64_t, UnitPulse>> UnitLiveness::changed() const {
    std::vector<std::pair<int64_t, UnitPulse>> out;
    for (const auto& [id, p] : m_units)
        if (p.changed)
            out.emplace_back(id, p);
    return out;
}

void UnitLiveness::markWritten() {
    for (auto& [id, p] : m_units)
        p.changed = false;
}

// ---------------------------------------------------------------------------------------------
// The coordinator's part

Status Coordinator::Impl::restoreLiveness() {
    startedUnix = now();
    livenessWrittenUnix = startedUnix;
    auto q = db.prepare(
        "SELECT id, client_id, inner_steps, last_step FROM work_units WHERE run_id = ? AND state = "
        "'assigned'");
    if (!q)
        return q.error();
    q->bind(1, runId);
    int64_t units = 0;
    while (q->step()) {
        liveness.touch(q->integer(0), q->integer(1), q->integer(2), startedUnix, q->integer(3));
        ++units;
    }
    if (!q->status())
        return q->status();
    if (units > 0)
        log(std::to_string(units) +
            " assigned work unit(s) get a fresh grace period: heartbeats are kept in memory, so "
            "--heartbeat-timeout (" +
            std::to_string(cfg.heartbeatTimeoutSeconds) + " s) and --stall-timeout (" +
            std::to_string(cfg.stallTimeoutSeconds) + " s) count from this start");
    return {};
}

void Coordinator::Impl::flushLiveness() {
    livenessWrittenUnix = now();
    const auto units = liveness.changed();
    if (units.empty() && !clients.lastSeenChanged())
        return;
    auto failed = [&](const std::string& what) {
        log("error: writing heartbeats to the database failed (kept in memory, tried again in " +
            std::to_string(kLivenessFlushSeconds) + " s): " + what);
    };
    // Relaxed: a server crash may lose the last moments of heartbeats (PostgreSQL's
    // synchronous_commit = off), never anything else; they are refreshed every flush anyway.
    Transaction tx(db, "writing heartbeats", storage::Commit::Relaxed);
    if (!tx.started())
        return failed(tx.started().error().message);
    for (const auto& [id, p] : units) {
        auto u = p.reported ? db.prepareCached(
                                  "UPDATE work_units SET heartbeat_unix = ?, last_step = ?, "
                                  "last_loss = ?, tokens_per_second = ? WHERE id = ? AND state = "
                                  "'assigned'")
                            : db.prepareCached(
                                  "UPDATE work_units SET heartbeat_unix = ? WHERE id = ? AND "
                                  "state = 'assigned'");
        if (!u)
            return failed(u.error().message);
        u->bind(1, p.heartbeatUnix);
        if (p.reported)
            u->bind(2, p.step).bind(3, p.loss).bind(4, p.tokensPerSecond).bind(5, id);
        else
            u->bind(2, id);
        if (auto st = u->run(); !st)
            return failed(st.error().message);
    }
    if (auto st = clients.writeLastSeen(); !st)
        return failed(st.error().message);
    if (auto st = tx.commit(); !st)
        return failed(st.error().message);
    liveness.markWritten();
    clients.markLastSeenWritten();
}

void Coordinator::Impl::forgetLiveness(int64_t workUnitId) {
    // A unit that ends keeps its last reported step in the database: the next unit's start
    // blend asks whether it was trained to its end (startBlendFor).
    if (const UnitPulse* p = liveness.find(workUnitId); p && p->reported) {
        if (auto u = db.prepareCached("UPDATE work_units SET last_step = ? WHERE id = ?")) {
            u->bind(1, p->step).bind(2, workUnitId);
            (void)u->run();
        }
    }
    liveness.forget(workUnitId);
}

int64_t Coordinator::Impl::lastSignOfLife(int64_t workUnitId) const {
    const UnitPulse* p = liveness.find(workUnitId);
    return p ? p->heartbeatUnix : startedUnix;
}

std::set<int64_t> Coordinator::Impl::liveClients() {
    std::set<int64_t> out;
    auto q = db.prepareCached(
        "SELECT id, client_id FROM work_units WHERE run_id = ? AND state = 'assigned'");
    if (!q)
        return out;
    q->bind(1, runId);
    const int64_t since = now() - cfg.heartbeatTimeoutSeconds;
    while (q->step())
        if (lastSignOfLife(q->integer(0)) >= since)
            out.insert(q->integer(1));
    return out;
}

}  // namespace tandem::coord
