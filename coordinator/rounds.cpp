// Rounds: the close (outer step), the quorum, timeouts and the ticker.
#include "rounds.hpp"

#include "coordinator_impl.hpp"

#include "aggregate.hpp"
#include "checkpoint.hpp"

namespace tandem::coord {

Expected<NextVersion> outerStepOfRound(const StateDir& dirs, const ModelConfig& model,
                                       std::span<const float> theta,
                                       std::span<const float> velocity, std::span<const float> sum,
                                       double weightSum, std::span<const LateResults> late,
                                       const OuterConfig& outer, ThreadPool* pool,
                                       std::span<const float> residual, WeightDeltaCodec codec,
                                       int64_t offset) {
    std::vector<float> rebased;
    if (!late.empty())
        rebased.assign(sum.begin(), sum.end());
    for (const auto& [base, weight] : late) {
        auto older = loadCheckpoint(dirs.weights(base), model);
        if (!older)
            return makeError("re-basing the results trained from version " + std::to_string(base) +
                             ": " + older.error().message);
        if (older->parameters.size() < static_cast<size_t>(offset) + theta.size())
            return makeError("weights of version " + std::to_string(base) +
                             " have the wrong size for " + model.describe());
        coord::rebaseOnto(rebased,
                          std::span<const float>(older->parameters)
                              .subspan(static_cast<size_t>(offset), theta.size()),
                          theta, static_cast<float>(weight), pool);
    }
    NextVersion next{{theta.begin(), theta.end()}, {velocity.begin(), velocity.end()}, {}, {}};
    outerNesterovStep(next.theta, next.velocity, late.empty() ? sum : rebased,
                      static_cast<float>(1.0 / weightSum), outer, pool);
    if (codec != WeightDeltaCodec::Off) {
        if (residual.size() != theta.size())
            return makeError("the weight-delta residual has " + std::to_string(residual.size()) +
                             " values; expected " + std::to_string(theta.size()));
        next.residual.assign(residual.begin(), residual.end());
        auto q = quantizeWithFeedback(theta, next.theta, next.residual, codec, pool);
        if (!q)
            return q.error();
        next.delta = std::move(*q);
    }
    return next;
}

Status Coordinator::Impl::loseClose(int64_t r, bool withDelta) {
    std::error_code ec;
    for (const fs::path& p : {dirs.weights(r + 1), dirs.momentum(r + 1), dirs.residual(r + 1)})
        fs::remove(p, ec);
    if (withDelta)
        fs::remove(dirs.weightDelta(r + 1), ec);
    cleanStaleFiles(false);  // the blobs of the discarded files
    fencedOut = true;
    return makeError("round " + std::to_string(r) +
                     " was closed by another process, or took a result after this close "
                     "began; this close is discarded with its files and this process closes "
                     "no more rounds and takes no more results (restart it to follow the "
                     "database)");
}

Status Coordinator::Impl::closeRound(std::unique_lock<std::mutex>& lock) {
    const auto started = std::chrono::steady_clock::now();
    const int64_t r = version;
    if (fencedOut)
        return makeError("this process lost a round close to another one; restart it");
    if (!roundClock.held())
        return makeError("not closing round " + std::to_string(r) + ": " + roundClock.why());
    int64_t contributors = 0, tokens = 0;
    double weightSum = 0;
    {
        auto q = db.prepare(
            "SELECT contributors, tokens, weight_sum FROM rounds WHERE run_id = ? AND round = ?");
        if (!q)
            return q.error();
        q->bind(1, runId).bind(2, r);
        if (!q->step())
            return makeError("round " + std::to_string(r) + " is missing");
        contributors = q->integer(0);
        tokens = q->integer(1);
        weightSum = q->real(2);
    }
    if (contributors == 0 || weightSum <= 0)
        return makeError("a round without results cannot close");
    // Late results by base version, to be re-based onto theta (coord::rebaseOnto).
    std::vector<LateResults> late;
    {
        auto q = db.prepare(
            "SELECT w.base_version, SUM(s.weight) FROM results s JOIN work_units w ON w.id = "
            "s.work_unit_id WHERE w.run_id = ? AND s.round = ? AND w.base_version < ? GROUP BY "
            "w.base_version");
        if (!q)
            return q.error();
        q->bind(1, runId).bind(2, r).bind(3, r);
        while (q->step())
            late.push_back({q->integer(0), q->real(1)});
    }
    // The outer step and the file reads and writes (seconds for a large model) run without the
    // lock, so that heartbeats, downloads and status stay responsive; commits wait on `closing`,
    // and nothing else changes theta, vel or sum (the aggregator only adds committed results).
    closing = true;
    lock.unlock();
    if (cfg.testBeforeClose)
        cfg.testBeforeClose(r);
    // Every committed result of the round in the sum (the aggregator reads their files).
    Status summed = aggregator->drain();
    auto next = summed ? outerStepOfRound(dirs, run.model, theta, vel, sum, weightSum, late,
                                          cfg.outer, &pool, residual, run.weightDeltas)
                       : Expected<NextVersion>(makeError(
                             summed.error().message +
                             "; the round cannot close until a restart rebuilds its sum"));
    Expected<ServedFile> published =
        next ? dirs.publish(r + 1, run.model, next->theta, next->velocity, next->residual)
             : Expected<ServedFile>(next.error());
    // The delta r -> r + 1, on disk before the version is committed (listed in manifests after).
    std::optional<ServedFile> deltaFile;
    if (published && next->delta) {
        auto d = dirs.publishWeightDelta(r + 1, *next->delta);
        if (d)
            deltaFile = *d;
        else
            published = d.error();
    }
    lock.lock();
    closing = false;
    closeCv.notify_all();
    if (!published)
        return published.error();
    const int64_t t = now();
    bool won = true;
    {
        Transaction tx(db);
        if (!tx.started())
            return tx.started();
        // The close is a compare-and-set on the round's row and the run's version: it commits
        // only if round r is still open, with the results this close summed, and the run still
        // at version r. Another process's close of r (a clock holder that lost its lock a moment
        // ago and the new one) or a result committed since the read above makes it a loser.
        auto a = db.prepare(
            "UPDATE rounds SET closed_unix = ? WHERE run_id = ? AND round = ? AND closed_unix IS "
            "NULL AND contributors = ?");
        auto d = db.prepare("UPDATE runs SET version = ? WHERE id = ? AND version = ?");
        // With the new version's files (front_end.cpp: front ends name them from this row).
        auto b = db.prepare(
            "INSERT INTO rounds(run_id, round, opened_unix, deadline_unix, weights_sha256, "
            "weights_bytes, delta_sha256, delta_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
        if (!a || !b || !d)
            return makeError("cannot prepare the round close");
        a->bind(1, t).bind(2, runId).bind(3, r).bind(4, contributors);
        d->bind(1, r + 1).bind(2, runId).bind(3, r);
        b->bind(1, runId).bind(2, r + 1).bind(3, t).bind(4, t + cfg.roundTimeoutSeconds);
        b->bind(5, net::toHex(published->sha256)).bind(6, published->bytes);
        if (deltaFile)
            b->bind(7, net::toHex(deltaFile->sha256)).bind(8, deltaFile->bytes);
        else
            b->bindNull(7).bindNull(8);
        // The run's row first, as a work assignment locks it (work_assignment.cpp): one order of
        // row locks, so the two never deadlock.
        for (Statement* st : {&*d, &*a}) {
            if (auto s = st->run(); !s)
                return s;
            won = won && db.changes() == 1;
        }
        if (won) {
            if (auto s = b->run(); !s)
                return s;
            if (auto stale = abandonStaleAndCommit(tx, r + 1); !stale)
                return stale.error();
        }
    }  // a lost close's transaction is rolled back here
    if (!won)
        return loseClose(r, deltaFile.has_value());
    rememberOuterStep(theta, next->theta);
    theta.swap(next->theta);
    vel.swap(next->velocity);
    residual.swap(next->residual);
    std::fill(sum.begin(), sum.end(), 0.0f);
    version = r + 1;
    metrics.countRoundClosed(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    weightFiles[version] = *published;
    while (!weightFiles.empty() && weightFiles.begin()->first < version - cfg.maxStaleness)
        weightFiles.erase(weightFiles.begin());
    if (deltaFile)
        deltaFiles[version] = *deltaFile;
    while (!deltaFiles.empty() &&
           deltaFiles.begin()->first <= version - kKeptWeightDeltas - cfg.maxStaleness)
        deltaFiles.erase(deltaFiles.begin());
    cleanStaleFiles(false);
    evalQueue.push_back(EvalJob{r, theta});
    evalCv.notify_all();
    log("round " + std::to_string(r) + " closed: " + std::to_string(contributors) +
        " contributor(s), " + std::to_string(tokens) + " tokens, weight " + fmt(weightSum, 8) +
        (late.empty() ? "" : " (late results re-based onto version " + std::to_string(r) + ")") +
        "; version " + std::to_string(version) + " published" +
        (next->delta ? std::string(" (") + weightDeltaCodecName(next->delta->codec) + " delta, " +
                           std::to_string(next->delta->payloadBytes()) + " bytes)"
                     : std::string()));
    return {};
}

Expected<int64_t> Coordinator::Impl::abandonStaleAndCommit(Transaction& tx, int64_t newVersion) {
    if (auto s = abandonWorkUnitsBefore(
            db, runId, newVersion - cfg.maxStaleness,
            "the run moved on; its base version is beyond the staleness bound");
        !s)
        return s.error();
    const int64_t staleUnits = db.changes();
    if (auto s = tx.commit(); !s)
        return s.error();
    metrics.countAbandoned("stale", staleUnits);
    return staleUnits;
}

int64_t Coordinator::Impl::roundQuorum() {
    if (!cfg.quorumOfActiveWorkers)
        return cfg.quorum;
    // Clients with a live unit (heartbeats in memory) and those that reported to the round.
    std::set<int64_t> active = liveClients();
    auto q = db.prepareCached(
        "SELECT DISTINCT w.client_id FROM results s JOIN work_units w ON w.id = s.work_unit_id "
        "WHERE w.run_id = ? AND s.round = ?");
    if (q) {
        q->bind(1, runId).bind(2, version);
        while (q->step())
            active.insert(q->integer(0));
    }
    return std::max<int64_t>(cfg.quorum, static_cast<int64_t>(active.size()));
}

void Coordinator::Impl::abandonTimedOut() {
    const int64_t t = now();
    auto q = db.prepareCached(
        "SELECT id, deadline_unix, id IN (SELECT work_unit_id FROM held_results) FROM work_units "
        "WHERE run_id = ? AND state = 'assigned'");
    if (!q)
        return;
    q->bind(1, runId);
    std::set<int64_t> assigned;
    std::vector<std::pair<int64_t, std::string>> victims;
    while (q->step()) {
        const int64_t id = q->integer(0);
        assigned.insert(id);
        const int64_t heartbeat = lastSignOfLife(id);  // in memory (unit_liveness.hpp)
        if (uploading.count(id))
            continue;  // its result is arriving
        if (q->integer(2) != 0)
            continue;  // its result is here, held until its twin's arrives (replication.hpp)
        if (q->integer(1) < t)
            victims.emplace_back(id, "its deadline passed; its data was reassigned");
        else if (heartbeat < t - cfg.heartbeatTimeoutSeconds)
            victims.emplace_back(id, "no heartbeat for " + std::to_string(t - heartbeat) +
                                         " s; its data was reassigned");
    }
    if (!q->status())
        return;  // a failed read must not drop the liveness of units it did not list
    liveness.retain(assigned);
    for (auto& [id, why] : victims) {
        if (abandonWorkUnit(db, runId, id, why))
            metrics.countAbandoned("timeout", db.changes());
        forgetLiveness(id);
        log("work unit " + std::to_string(id) + " abandoned: " + why);
    }
}

void Coordinator::Impl::tickerLoop() {
    std::unique_lock lock(mu);
    while (!stopping) {
        tickCv.wait_for(lock, std::chrono::seconds(1));
        if (stopping)
            break;
        lock.unlock();
        tick();  // takes the lock itself
        lock.lock();
    }
}

void Coordinator::Impl::tick() {
    std::unique_lock lock(mu);
    if (stopping || closing)
        return;
    if (frontEnd())
        return frontTick();  // no clock, no round of its own (front_end.cpp)
    // Only the round clock's holder times units out and closes rounds (round_clock.hpp).
    // A process fenced out by a lost close (loseClose) no longer runs it, whatever the lock says.
    const bool clock = !fencedOut && roundClock.held();
    // With PostgreSQL the first tick says which it is too: the logs show who holds the clock.
    const bool first = !roundClockKnown && db.backend() == storage::Backend::Postgres;
    roundClockKnown = true;
    if (first || clock != roundClockHeld)
        log(clock       ? "this process runs the round clock now"
            : fencedOut ? "not running the round clock: this process lost a round close"
                        : "not running the round clock: " + roundClock.why());
    roundClockHeld = clock;
    if (clock) {
        // Heartbeats that front ends received, before anything is timed out (front_end.cpp).
        if (db.backend() == storage::Backend::Postgres)
            mergeDatabaseLiveness();
        abandonTimedOut();
        abandonStalled();
        settleHeld();  // held results whose twin timed out are accepted alone
    }
    if (now() - livenessWrittenUnix >= kLivenessFlushSeconds)
        flushLiveness();
    if (sharded())
        return shardTick(lock, clock);  // shard_rounds.cpp
    if (!clock)
        return;
    auto q =
        db.prepare("SELECT deadline_unix, contributors FROM rounds WHERE run_id = ? AND round = ?");
    if (!q)
        return;
    q->bind(1, runId).bind(2, version);
    if (!q->step())
        return;
    const int64_t deadline = q->integer(0), contributors = q->integer(1);
    // The upload that completed the round only woke the ticker (result_intake.cpp); and a worker
    // that went silent no longer holds up a round that waits for the active ones.
    if (contributors > 0 && contributors >= roundQuorum()) {
        if (auto st = closeRound(lock); !st)
            log("error: closing the round failed: " + st.error().message);
        return;
    }
    if (now() < deadline)
        return;
    if (contributors > 0) {
        log("round " + std::to_string(version) + " reached its deadline with " +
            std::to_string(contributors) + " of " + std::to_string(roundQuorum()) + " results");
        if (auto st = closeRound(lock); !st)
            log("error: closing the round failed: " + st.error().message);
    } else {
        auto u = db.prepare("UPDATE rounds SET deadline_unix = ? WHERE run_id = ? AND round = ?");
        if (u)
            (void)u->bind(1, now() + cfg.roundTimeoutSeconds).bind(2, runId).bind(3, version).run();
    }
}

}  // namespace tandem::coord
