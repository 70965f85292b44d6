// Replication spot-checks (replication.hpp has the rules; docs/protocol.md, "Replication
// spot-checks"): twins assigned, a twin's result held until the other one arrives (payload in
// held/, figures in held_results, so a restart keeps it), pairs compared and committed at half
// weight each or both held out, and clients blocked after repeated disagreements.
#include "coordinator_impl.hpp"

#include "random.hpp"
#include "safe_text.hpp"
#include "state_store.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem::coord {

bool chosenForTwin(uint64_t runSeed, int64_t workUnitId, double fraction) {
    if (fraction <= 0)
        return false;
    Rng rng(runSeed * 0xD1B54A32D192ED03ull + static_cast<uint64_t>(workUnitId));
    return static_cast<double>(rng.next() >> 11) * 0x1.0p-53 < fraction;
}

void TwinDistanceAccumulator::add(std::span<const float> a, std::span<const float> b) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        const double x = a[i], y = b[i];
        m_diff += (x - y) * (x - y);
        m_na += x * x;
        m_nb += y * y;
    }
}

double TwinDistanceAccumulator::value() const {
    const double scale = std::sqrt(std::max(m_na, m_nb));
    return scale > 0 ? std::sqrt(m_diff) / scale : 0.0;
}

double twinDistance(std::span<const float> a, std::span<const float> b) {
    TwinDistanceAccumulator d;
    d.add(a, b);
    return d.value();
}

bool blockedByTwins(int64_t agreements, int64_t disagreements, int strikes) {
    return disagreements >= std::max(1, strikes) && disagreements > agreements;
}

Expected<TwinSummary> readTwinSummary(const std::filesystem::path& stateDir, int64_t runId,
                                      const std::string& databaseUrl) {
    auto db = openStateStore(stateDir, databaseUrl);
    if (!db)
        return db.error();
    TwinSummary s;
    auto c = db->prepare(
        "SELECT COALESCE(SUM(agreed), 0), COALESCE(SUM(1 - agreed), 0) FROM replica_checks WHERE "
        "run_id = ?");
    auto h = db->prepare(
        "SELECT COUNT(*) FROM held_results h JOIN work_units w ON w.id = h.work_unit_id WHERE "
        "w.run_id = ?");
    auto b = db->prepare(
        "SELECT id, name, replica_agreements, replica_disagreements, blocked_unix FROM clients "
        "WHERE blocked_unix IS NOT NULL ORDER BY blocked_unix, id");
    if (!c || !h || !b)
        return makeError("cannot read the replication checks");
    c->bind(1, runId);
    if (c->step()) {
        s.agreed = c->integer(0);
        s.disagreed = c->integer(1);
    }
    h->bind(1, runId);
    if (h->step())
        s.waiting = h->integer(0);
    while (b->step())
        s.blocked.push_back({b->integer(0), net::quotable(b->text(1)), b->integer(2), b->integer(3),
                             b->integer(4)});
    return s;
}

// ---------------------------------------------------------------------------------------------

std::optional<Refusal> Coordinator::Impl::blockedRefusal(int64_t clientId) {
    auto q = db.prepareCached(
        "SELECT blocked_unix, replica_agreements, replica_disagreements FROM clients WHERE id = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, clientId);
    if (!q->step() || q->isNull(0))
        return std::nullopt;
    return refuse(403, "client_blocked",
                  "this client is blocked: " + std::to_string(q->integer(2)) +
                      " of its results disagreed with another worker's result of the same work "
                      "unit (replication spot-checks), against " +
                      std::to_string(q->integer(1)) +
                      " that agreed; the coordinator accepts no more of its results");
}

std::optional<Outcome<WorkOffer>> Coordinator::Impl::assignTwin(int64_t clientId,
                                                                const std::string& requestId) {
    using Answer = Outcome<WorkOffer>;
    if (cfg.replicateFraction <= 0)
        return std::nullopt;
    // Only for a client whose units are all without twins: a worker uploads its results in
    // order, so then nothing ahead of the twin in its queue can be held, and no two held results
    // can wait for each other (docs/protocol.md, "Replication spot-checks").
    auto own = db.prepare(
        "SELECT COUNT(*) FROM work_units WHERE client_id = ? AND state = 'assigned' AND "
        "(twin_wanted = 1 OR twin_id IS NOT NULL)");
    if (!own)
        return Answer(internalError(own.error().message));
    own->bind(1, clientId);
    if (!own->step() || own->integer(0) > 0)
        return std::nullopt;
    auto q = db.prepare(
        "SELECT id, client_id, manifest_json FROM work_units WHERE run_id = ? AND twin_wanted = 1 "
        "AND state = 'assigned' AND base_version = ? AND client_id != ? ORDER BY id LIMIT 1");
    if (!q)
        return Answer(internalError(q.error().message));
    q->bind(1, runId).bind(2, version).bind(3, clientId);
    if (!q->step())
        return std::nullopt;
    const int64_t first = q->integer(0);
    auto m = net::Manifest::fromJson(q->text(2));
    if (!m)
        return Answer(internalError("the stored manifest of work unit " + std::to_string(first) +
                                    " cannot be read: " + m.error().message));
    const int64_t nowUnix = now();
    const int64_t deadline = nowUnix + int64_t{cfg.roundTimeoutSeconds} * (1 + cfg.maxStaleness);
    Transaction tx(db);
    if (!tx.started())
        return Answer(internalError(tx.started().error().message));
    // The same base version, data range, seed and H; never reassigned itself (its range is the
    // first unit's).
    auto ins = db.prepare(
        "INSERT INTO work_units(run_id, client_id, base_version, shard, data_offset, data_length, "
        "inner_steps, batch, seq_len, seed, created_unix, deadline_unix, heartbeat_unix, "
        "tokens_per_second, request_id, state, reassigned, twin_id) SELECT run_id, ?, "
        "base_version, shard, data_offset, data_length, inner_steps, batch, seq_len, seed, ?, ?, "
        "?, 0, ?, 'assigned', 1, id FROM work_units WHERE id = ?");
    if (!ins)
        return Answer(internalError(ins.error().message));
    ins->bind(1, clientId).bind(2, nowUnix).bind(3, deadline).bind(4, nowUnix);
    if (requestId.empty())
        ins->bindNull(5);
    else
        ins->bind(5, requestId);
    ins->bind(6, first);
    if (auto st = ins->run(); !st)
        return Answer(internalError(st.error().message));
    const int64_t twin = db.lastInsertId();
    m->workUnitId = twin;
    m->uploadUrl =
        (frontEnd() ? cfg.uploadBase : std::string()) + "/v1/results/" + std::to_string(twin);
    m->deadlineUnix = deadline;
    m->sign(key);
    auto a = db.prepare("UPDATE work_units SET manifest_json = ? WHERE id = ?");
    // Only while it still wants one: another process (a front end) may have given it a twin
    // since the read above; then this one rolls back and the client gets other work.
    auto b = db.prepare(
        "UPDATE work_units SET twin_wanted = 0, twin_id = ? WHERE id = ? AND twin_wanted = 1");
    if (!a || !b)
        return Answer(internalError("cannot prepare the twin's rows"));
    a->bind(1, m->toJson()).bind(2, twin);
    b->bind(1, twin).bind(2, first);
    for (Statement* st : {&*a, &*b})
        if (auto r = st->run(); !r)
            return Answer(internalError(r.error().message));
    if (db.changes() != 1)
        return std::nullopt;  // rolled back with tx
    if (auto st = tx.commit(); !st)
        return Answer(internalError(st.error().message));
    metrics.countAssigned();
    // Alive from now: heartbeats are kept in memory (unit_liveness.hpp); untracked, the twin
    // would count as silent since the coordinator started.
    liveness.touch(twin, clientId, m->innerSteps, nowUnix);
    log("work unit " + std::to_string(twin) + " -> client " + std::to_string(clientId) +
        ": twin of work unit " + std::to_string(first) + " (client " +
        std::to_string(q->integer(1)) + "), a replication spot-check");
    WorkOffer offer;
    offer.manifest = std::move(*m);
    return Answer(std::move(offer));
}

Expected<double> Coordinator::Impl::twinDistanceOfFiles(int64_t heldWorkUnitId,
                                                        const net::Sha256Digest& heldSha,
                                                        const fs::path& staged) {
    const fs::path path = dirs.heldPayload(heldWorkUnitId);
    auto held = PayloadReader::open(path, payloadLayout(), heldSha);
    if (!held)
        return makeError("the held result of work unit " + std::to_string(heldWorkUnitId) +
                         " is missing its payload: " + held.error().message);
    auto upload = PayloadReader::open(staged, payloadLayout());
    if (!upload)
        return upload.error();
    TwinDistanceAccumulator distance;
    for (;;) {
        auto a = held->next();
        if (!a)
            return a.error();
        auto b = upload->next();
        if (!b)
            return b.error();
        if (a->empty() || b->empty())
            break;
        distance.add(*a, *b);
    }
    return distance.value();
}

namespace {

// A held result's row, for commitEntries.
struct Held {
    CommitEntry entry;
    double weightFactor = 1;
    int64_t baseVersion = 0;
};

std::optional<Held> readHeldRow(Database& db, int64_t workUnitId) {
    auto q = db.prepare(
        "SELECT h.tokens, h.steps, h.loss_first, h.loss_last, h.norm, h.weight_factor, "
        "h.payload_sha256, h.result_sha256, h.signature, w.client_id, w.base_version FROM "
        "held_results h JOIN work_units w ON w.id = h.work_unit_id WHERE h.work_unit_id = ?");
    if (!q)
        return std::nullopt;
    q->bind(1, workUnitId);
    if (!q->step())
        return std::nullopt;
    Held h;
    CommitEntry& e = h.entry;
    e.wuId = workUnitId;
    e.tokens = q->integer(0);
    e.steps = static_cast<int32_t>(q->integer(1));
    e.lossFirst = static_cast<float>(q->real(2));
    e.lossLast = static_cast<float>(q->real(3));
    e.norm = q->real(4);
    h.weightFactor = q->real(5);
    e.payloadSha256 = toDigest(q->blob(6));
    e.resultDigest = toDigest(q->blob(7));
    const auto sig = q->blob(8);
    if (sig.size() == e.signature.size())
        std::copy(sig.begin(), sig.end(), e.signature.begin());
    e.clientId = q->integer(9);
    h.baseVersion = q->integer(10);
    return h;
}

Status deleteHeldRow(Database& db, int64_t workUnitId) {
    auto d = db.prepare("DELETE FROM held_results WHERE work_unit_id = ?");
    if (!d)
        return d.error();
    return d->bind(1, workUnitId).run();
}

}  // namespace

std::optional<Refusal> Coordinator::Impl::twinRefusal(int64_t workUnitId) {
    auto q = db.prepare(
        "SELECT w.twin_id, (SELECT COUNT(*) FROM held_results h WHERE h.work_unit_id = w.id) FROM "
        "work_units w WHERE w.id = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, workUnitId);
    if (!q->step() || q->isNull(0))
        return std::nullopt;
    const int64_t twin = q->integer(0);
    if (q->integer(1) > 0)
        return refuse(503, "awaiting_replica",
                      "the result of work unit " + std::to_string(workUnitId) +
                          " is kept until another worker's result of the same unit (work unit " +
                          std::to_string(twin) +
                          ", a replication spot-check) arrives; it is then accepted or refused. "
                          "Retry later",
                      std::max(5, cfg.heartbeatSeconds));
    auto c = db.prepare(
        "SELECT distance FROM replica_checks WHERE agreed = 0 AND (first_unit = ? OR second_unit "
        "= ?)");
    if (!c)
        return internalError(c.error().message);
    c->bind(1, workUnitId).bind(2, workUnitId);
    if (!c->step())
        return std::nullopt;
    return refuse(422, "replica_mismatch",
                  "the result of work unit " + std::to_string(workUnitId) +
                      " and another worker's result of the same unit (work unit " +
                      std::to_string(twin) + ") differ by " + fmt(c->real(0)) +
                      " (||a - b|| / max(||a||, ||b||); the tolerance is " +
                      fmt(cfg.replicateTolerance) +
                      "): neither is accepted, and the disagreement counts against both clients");
}

std::optional<Outcome<std::string>> Coordinator::Impl::pairResult(
    UploadSession::State& s, const GateVerdict& verdict, std::unique_lock<std::mutex>& lock) {
    using Answer = Outcome<std::string>;
    auto q = db.prepare(
        "SELECT t.id, t.client_id, t.state, (SELECT COUNT(*) FROM held_results h WHERE "
        "h.work_unit_id = t.id) FROM work_units w JOIN work_units t ON t.id = w.twin_id WHERE "
        "w.id = ?");
    if (!q)
        return Answer(internalError(q.error().message));
    q->bind(1, s.wuId);
    if (!q->step() || q->text(2) != "assigned")
        return std::nullopt;  // no twin, or it is gone: committed alone
    const int64_t twin = q->integer(0), twinClient = q->integer(1);
    const net::ResultHeader& header = s.stream.header();

    if (q->integer(3) == 0) {
        // The first of the two: kept (file, then row) until the twin's result arrives.
        const fs::path held = dirs.heldPayload(s.wuId);
        std::error_code ec;
        fs::create_directories(dirs.held(), ec);
        if (::rename(s.stream.stagingFile().c_str(), held.c_str()) != 0)
            return Answer(internalError("cannot move the payload into " + held.string()));
        s.stream.releaseStagingFile();
        (void)fsyncPath(dirs.held(), true);
        auto ins = db.prepare(
            "INSERT INTO held_results(work_unit_id, tokens, steps, loss_first, loss_last, norm, "
            "weight_factor, payload_sha256, result_sha256, signature, received_unix) VALUES (?, "
            "?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        if (!ins) {
            fs::remove(held, ec);
            return Answer(internalError(ins.error().message));
        }
        ins->bind(1, s.wuId)
            .bind(2, header.tokens)
            .bind(3, header.steps)
            .bind(4, static_cast<double>(header.lossFirst))
            .bind(5, static_cast<double>(header.lossLast))
            .bind(6, s.stream.norm())
            .bind(7, verdict.weightFactor)
            .bind(8, std::span<const uint8_t>(header.payloadSha256))
            .bind(9, std::span<const uint8_t>(s.stream.resultDigest()))
            .bind(10, std::span<const uint8_t>(s.stream.signature()))
            .bind(11, now());
        if (auto st = ins->run(); !st) {
            fs::remove(held, ec);
            return Answer(internalError(st.error().message));
        }
        metrics.countHeld();
        log("result of work unit " + std::to_string(s.wuId) +
            " held until the result of its twin " + std::to_string(twin) + " (client " +
            std::to_string(twinClient) + ") arrives");
        return Answer(twinRefusal(s.wuId).value_or(internalError("the held row vanished")));
    }

    // The second: compared with the held one.
    auto held = readHeldRow(db, twin);
    if (!held)
        return Answer(internalError("the held result of work unit " + std::to_string(twin) +
                                    " cannot be read"));
    auto measured = twinDistanceOfFiles(twin, held->entry.payloadSha256, s.stream.stagingFile());
    if (!measured)
        return Answer(internalError(measured.error().message));
    const double distance = *measured;
    const bool agreed = distance <= cfg.replicateTolerance;
    const int64_t nowUnix = now();
    std::vector<int64_t> newlyBlocked;
    // Both clients' counts, the check's row and the held row go with the decision.
    auto record = [&]() -> Status {
        if (auto st = deleteHeldRow(db, twin); !st)
            return st;
        auto c = db.prepare(
            "INSERT INTO replica_checks(run_id, first_unit, second_unit, first_client, "
            "second_client, distance, agreed, decided_unix) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
        if (!c)
            return c.error();
        c->bind(1, runId)
            .bind(2, twin)
            .bind(3, s.wuId)
            .bind(4, twinClient)
            .bind(5, s.clientId)
            .bind(6, distance)
            .bind(7, agreed)
            .bind(8, nowUnix);
        if (auto st = c->run(); !st)
            return st;
        for (const int64_t client : {twinClient, s.clientId}) {
            auto u = db.prepare(
                agreed ? "UPDATE clients SET replica_agreements = replica_agreements + 1 WHERE id "
                         "= ?"
                       : "UPDATE clients SET replica_disagreements = replica_disagreements + 1 "
                         "WHERE id = ?");
            auto r = db.prepare(
                "SELECT replica_agreements, replica_disagreements, blocked_unix FROM clients WHERE "
                "id = ?");
            if (!u || !r)
                return makeError("cannot prepare the replication counts");
            if (auto st = u->bind(1, client).run(); !st)
                return st;
            r->bind(1, client);
            if (!r->step() || !r->isNull(2) ||
                !blockedByTwins(r->integer(0), r->integer(1), cfg.replicateStrikes))
                continue;
            // Blocked: no more work, and what it holds goes to others.
            auto b = db.prepare("UPDATE clients SET blocked_unix = ? WHERE id = ?");
            auto a = db.prepare(
                "UPDATE work_units SET state = 'abandoned', abandon_reason = 'its client was "
                "blocked after repeated disagreements in replication spot-checks' WHERE "
                "client_id = ? AND state = 'assigned'");
            if (!b || !a)
                return makeError("cannot prepare the block");
            if (auto st = b->bind(1, nowUnix).bind(2, client).run(); !st)
                return st;
            if (auto st = a->bind(1, client).run(); !st)
                return st;
            newlyBlocked.push_back(client);
        }
        return {};
    };
    auto blockedNote = [&] {
        for (const int64_t client : newlyBlocked) {
            metrics.countBlocked();
            log("client " + std::to_string(client) +
                " blocked: repeated disagreements in replication spot-checks "
                "(--replicate-strikes " +
                std::to_string(cfg.replicateStrikes) + "); its later results are refused");
        }
    };
    const std::string pair = "twins " + std::to_string(twin) + " (client " +
                             std::to_string(twinClient) + ") and " + std::to_string(s.wuId) +
                             " (client " + std::to_string(s.clientId) + ")";
    std::error_code ec;
    if (!agreed) {
        const std::string why = "its result and its twin's differ by " + fmt(distance) +
                                " (tolerance " + fmt(cfg.replicateTolerance) +
                                "); both are held out (replication spot-check)";
        Transaction tx(db);
        if (!tx.started())
            return Answer(internalError(tx.started().error().message));
        auto a = db.prepare(
            "UPDATE work_units SET state = 'abandoned', abandon_reason = ? WHERE id IN (?, ?)");
        if (!a)
            return Answer(internalError(a.error().message));
        if (auto st = a->bind(1, why).bind(2, twin).bind(3, s.wuId).run(); !st)
            return Answer(internalError(st.error().message));
        if (auto st = record(); !st)
            return Answer(internalError(st.error().message));
        if (auto st = tx.commit(); !st)
            return Answer(internalError(st.error().message));
        fs::remove(dirs.heldPayload(twin), ec);
        metrics.countTwinCheck(false);
        log(pair + " disagree: distance " + fmt(distance) + " above the tolerance " +
            fmt(cfg.replicateTolerance) + "; both results held out");
        blockedNote();
        settleHeld();  // held results whose twin belonged to a newly blocked client
        return Answer(twinRefusal(s.wuId).value_or(internalError("the check's row vanished")));
    }
    // Agreed: both count, at half their weight each, so the unit's data counts once.
    const double stale = std::pow(cfg.staleWeightFactor, version - s.baseVersion);
    CommitEntry entries[2] = {held->entry, entryOf(s)};
    entries[0].weight = static_cast<double>(entries[0].tokens) * stale * held->weightFactor / 2;
    entries[1].weight = static_cast<double>(header.tokens) * stale * verdict.weightFactor / 2;
    entries[0].note = entries[1].note = "twin of work unit ";
    entries[0].note += std::to_string(s.wuId) + ", distance " + fmt(distance) + ", half weight";
    entries[1].note += std::to_string(twin) + ", distance " + fmt(distance) + ", half weight" +
                       (verdict.message.empty() ? "" : "; " + verdict.message);
    auto receipts = commitEntries(entries, record);
    if (!receipts.ok())
        return Answer(receipts.refusal());
    fs::remove(dirs.heldPayload(twin), ec);
    metrics.countTwinCheck(true);
    log(pair + " agree: distance " + fmt(distance) + " within the tolerance " +
        fmt(cfg.replicateTolerance));
    closeIfComplete(lock);
    return Answer(std::move(receipts.value()[1]));
}

void Coordinator::Impl::settleHeld(int64_t workUnitId) {
    if (closing)
        return;
    auto q = db.prepare(
        "SELECT h.work_unit_id, w.state, w.base_version, COALESCE(t.state, 'abandoned') FROM "
        "held_results h JOIN work_units w ON w.id = h.work_unit_id LEFT JOIN work_units t ON t.id "
        "= w.twin_id WHERE w.run_id = ? AND (?2 = 0 OR h.work_unit_id = ?2) ORDER BY "
        "h.work_unit_id");
    if (!q)
        return;
    q->bind(1, runId).bind(2, workUnitId);
    struct Due {
        int64_t wu;
        bool drop;
    };
    std::vector<Due> due;
    while (q->step()) {
        const bool own = q->text(1) == "assigned" && version - q->integer(2) <= cfg.maxStaleness;
        if (!own)
            due.push_back({q->integer(0), true});
        else if (q->text(3) != "assigned")
            due.push_back({q->integer(0), false});
    }
    std::error_code ec;
    for (const Due& d : due) {
        if (d.drop) {
            const std::string why =
                "the run moved on; its base version is beyond the staleness bound";
            Transaction tx(db);
            if (!tx.started() || !deleteHeldRow(db, d.wu) ||
                !abandonWorkUnit(db, runId, d.wu, why) || !tx.commit())
                continue;
            fs::remove(dirs.heldPayload(d.wu), ec);
            log("held result of work unit " + std::to_string(d.wu) + " dropped: its unit was " +
                "abandoned or went stale before its twin's result arrived");
            continue;
        }
        auto held = readHeldRow(db, d.wu);
        if (!held)
            continue;
        // The payload must be whole before it is committed (the aggregator reads it unchecked).
        if (auto whole = net::sha256File(dirs.heldPayload(d.wu));
            !whole || whole->bytes != payloadLayout().bytes() ||
            whole->digest != held->entry.payloadSha256) {
            log("error: the held payload " + dirs.heldPayload(d.wu).string() +
                " is missing, truncated or does not match its SHA-256");
            continue;
        }
        CommitEntry& e = held->entry;
        e.weight = static_cast<double>(e.tokens) *
                   std::pow(cfg.staleWeightFactor, version - held->baseVersion) *
                   held->weightFactor;
        e.note = "accepted alone: its twin was abandoned";
        const int64_t wu = d.wu;
        auto receipts = commitEntries(std::span(&e, 1), [&] { return deleteHeldRow(db, wu); });
        if (!receipts.ok()) {
            log("error: committing the held result of work unit " + std::to_string(wu) + ": " +
                receipts.refusal().message);
            continue;
        }
        fs::remove(dirs.heldPayload(wu), ec);
    }
}

void Coordinator::Impl::removeOrphanHeldFiles() {
    std::set<std::string> keep;
    if (auto q = db.prepare("SELECT work_unit_id FROM held_results")) {
        while (q->step())
            keep.insert(std::to_string(q->integer(0)) + ".f16");
    }
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dirs.held(), ec))
        if (!keep.count(e.path().filename().string()))
            fs::remove(e.path(), ec);
}

}  // namespace tandem::coord
