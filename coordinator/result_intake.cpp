// Result intake: an upload's slot (beginUpload), its stream (upload_stream.hpp), and the commit
// of a checked result into the open round.
#include "coordinator_impl.hpp"
#include "work_assignment.hpp"

#include "result_format.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

#include <unistd.h>

namespace tandem::coord {

UploadSession::UploadSession(std::unique_ptr<State> state) : m_s(std::move(state)) {}
UploadSession::~UploadSession() = default;

UploadSession::State::State(Coordinator::Impl* coordinator, int64_t client, int64_t workUnit,
                            int64_t base, UploadExpectation expectation)
    : c(coordinator),
      clientId(client),
      wuId(workUnit),
      baseVersion(base),
      stream(std::move(expectation)) {}

UploadSession::State::~State() {
    stream.discard();
    std::lock_guard lock(c->mu);
    c->uploading.erase(wuId);
    if (--c->uploadsPerClient[clientId] <= 0)
        c->uploadsPerClient.erase(clientId);
    --c->uploadsTotal;
}

Outcome<std::unique_ptr<UploadSession::State>> Coordinator::Impl::beginUpload(
    int64_t clientId, int64_t workUnitId, int64_t contentLength, std::string_view signature,
    bool dryRun, int piece) {
    // 421 Misdirected Request: the worker's manifest says where (front_end.cpp).
    if (frontEnd())
        return refuse(421, "not_on_front_end",
                      "this is a front end of the run; results are uploaded to " +
                          (sharded() ? std::string("the aggregation shards")
                                     : "the aggregating process at " + cfg.uploadBase +
                                           "/v1/results/" + std::to_string(workUnitId)) +
                          " (the manifest's upload_url)");
    if (auto r = pieceRouteRefusal(workUnitId, piece))
        return *r;
    const int64_t expected = piece >= 0 ? pieceUploadBytes() : maxUploadBytes();
    const PayloadLayout layout = piece >= 0 ? pieceLayout() : payloadLayout();
    const int64_t values = layout.parameterCount;
    // What a body is made of, for the size refusals.
    const std::string shape =
        " bytes; a " + std::string(piece >= 0 ? "piece of a result" : "result") + " for " +
        run.model.describe() + " is exactly " + std::to_string(expected) +
        " bytes (128-byte header + " +
        (piece >= 0 ? std::to_string(run.shards * net::kPieceEntryBytes) + "-byte piece table + "
                    : std::string()) +
        (layout.encoding == net::kEncodingInt8
             ? std::to_string(values) + " int8 values and " +
                   std::to_string(layout.bytes() - values) +
                   " bytes of scales: this run takes int8 results)"
             : "2 x " + std::to_string(values) + " parameters: this run takes fp16 results)");
    std::unique_ptr<UploadSession::State> state;
    {
        std::lock_guard lock(mu);
        // A held result whose twin is gone is committed (or dropped) before it is looked at.
        if (!closing)
            settleHeld(workUnitId);
        auto q = db.prepare(
            "SELECT w.client_id, w.state, w.base_version, w.inner_steps, w.batch, w.seq_len, "
            "c.public_key, COALESCE(w.abandon_reason, '') FROM work_units w JOIN clients c ON "
            "c.id = w.client_id WHERE w.id = ?");
        if (!q)
            return internalError(q.error().message);
        q->bind(1, workUnitId);
        if (auto r = stepOwnWorkUnit(*q, workUnitId, clientId))
            return *r;
        if (auto r = blockedRefusal(clientId))
            return *r;
        if (contentLength < 0)
            return refuse(
                411, "length_required",
                "send Content-Length: a result is exactly " + std::to_string(expected) + " bytes");
        if (contentLength > expected)
            return refuse(413, "too_large",
                          "the body has " + std::to_string(contentLength) + shape);
        if (contentLength != expected)
            return refuse(400, "wrong_size",
                          "the body has " + std::to_string(contentLength) + shape);
        auto sig = net::signatureFromBase64(signature);
        if (signature.empty() || !sig)
            return refuse(400, "bad_signature",
                          signature.empty()
                              ? "the X-Tandem-Signature header (base64 Ed25519 signature of the "
                                "result digest) is missing"
                              : "X-Tandem-Signature: " + sig.error().message);
        if (auto r = twinRefusal(workUnitId))
            return *r;
        const int64_t base = q->integer(2);
        // A piece: "accepted" when this shard has it (another shard's piece accepted the unit,
        // and this one's may still come, with the same result digest).
        std::optional<PieceRecord> held;
        if (piece >= 0) {
            auto known = pieceRecord(workUnitId);
            if (!known)
                return internalError(known.error().message);
            held = std::move(*known);
        }
        std::string st = q->text(1);
        if (piece >= 0)  // this shard's own piece decides; another's acceptance leaves it open
            st = held->here ? "accepted" : st == "accepted" ? "assigned" : st;
        if (st != "accepted" && sumRound() - base > cfg.maxStaleness)
            return refuse(409, "stale",
                          "work unit " + std::to_string(workUnitId) + " trained from version " +
                              std::to_string(base) + "; the run is at version " +
                              std::to_string(sumRound()) + " and accepts results at most " +
                              std::to_string(cfg.maxStaleness) + " version(s) old");
        if (st == "abandoned")
            return refuse(409, "work_unit_abandoned",
                          "work unit " + std::to_string(workUnitId) +
                              " was abandoned and its data reassigned: " + q->text(7));
        if (uploading.count(workUnitId))
            return refuse(409, "upload_in_progress",
                          "an upload for work unit " + std::to_string(workUnitId) +
                              " is already in progress; retry when it has ended");
        if (uploadsPerClient[clientId] >= cfg.maxUploadsPerClient) {
            if (uploadsPerClient[clientId] == 0)
                uploadsPerClient.erase(clientId);
            return refuse(429, "too_many_uploads",
                          "this client already has " + std::to_string(cfg.maxUploadsPerClient) +
                              " upload(s) in progress",
                          10);
        }
        if (uploadsTotal >= cfg.maxConcurrentUploads)
            return refuse(503, "busy",
                          "the coordinator is receiving " + std::to_string(uploadsTotal) +
                              " uploads; retry later",
                          15);
        // Also answered to Expect: 100-continue, before the body is sent; the staging file's
        // reservation (upload_stream.hpp) catches a disk that fills meanwhile.
        std::error_code ec;
        if (st != "accepted" &&
            fs::space(dirs.uploads(), ec).available < static_cast<uintmax_t>(layout.bytes()) && !ec)
            return diskFull("this result of " + std::to_string(layout.bytes()) + " bytes");
        if (dryRun)
            return std::unique_ptr<UploadSession::State>();
        UploadExpectation e;
        e.workUnitId = workUnitId;
        e.parameterCount = P;
        e.encoding = layout.encoding;
        e.modelName = run.model.describe();
        e.bodyBytes = expected;
        if (piece >= 0) {
            e.shards = run.shards;
            e.shardIndex = piece;
            e.pieceRange = ownRange;
            e.resultDigestMustBe = held->resultDigest;
        }
        e.maxSteps = static_cast<int>(q->integer(3));
        e.maxTokens = q->integer(3) * q->integer(4) * q->integer(5);
        e.minSteps = minResultSteps(run, e.maxSteps);
        e.tokensPerStep = q->integer(4) * q->integer(5);
        auto pk = q->blob(6);
        if (pk.size() == e.clientKey.size())
            std::memcpy(e.clientKey.data(), pk.data(), pk.size());
        e.signature = *sig;
        e.accepted = st == "accepted";
        if (e.accepted && piece >= 0) {
            e.acceptedDigest = *held->resultDigest;
            e.acceptedReceipt = held->receipt;
        } else if (e.accepted) {
            auto r = db.prepare(
                "SELECT r.result_sha256, p.json FROM results r JOIN receipts p ON "
                "p.work_unit_id = r.work_unit_id WHERE r.work_unit_id = ?");
            if (!r)
                return internalError(r.error().message);
            r->bind(1, workUnitId);
            if (!r->step())
                return internalError("accepted work unit without a receipt");
            e.acceptedDigest = toDigest(r->blob(0));
            e.acceptedReceipt = r->text(1);
        }
        e.clock = [this] { return now(); };
        e.startedUnix = now();
        e.maxSeconds = cfg.maxUploadSeconds;
        if (cfg.minCosine > -1)  // -1: the direction check is off, nothing to measure
            e.direction = lastOuterStep;
        // The slot; the State's destructor releases it.
        uploading.insert(workUnitId);
        ++uploadsPerClient[clientId];
        ++uploadsTotal;
        state =
            std::make_unique<UploadSession::State>(this, clientId, workUnitId, base, std::move(e));
        state->piece = piece;
    }
    if (!state->stream.isRetryOfAccepted()) {
        const fs::path staging = dirs.uploads() / (std::to_string(workUnitId) + "-" +
                                                   net::toHex(net::randomBytes(6)) + ".part");
        if (auto r = state->stream.open(staging))
            return *r;
    }
    return state;
}

std::optional<Outcome<std::string>> UploadSession::feed(std::span<const uint8_t> bytes) {
    m_s->c->metrics.addUploadBytes(static_cast<int64_t>(bytes.size()));
    auto answer = m_s->stream.feed(bytes);
    if (answer && !answer->ok())
        m_s->c->metrics.countRefused(answer->refusal().code);
    return answer;
}

Outcome<std::string> UploadSession::finish(bool complete) {
    auto out = [&]() -> Outcome<std::string> {
        if (auto r = m_s->stream.finish(complete))
            return *r;
        return m_s->c->commitResult(*m_s);
    }();
    if (!out.ok() && out.refusal().code != "awaiting_replica")  // held, not refused
        m_s->c->metrics.countRefused(out.refusal().code);
    return out;
}

Outcome<std::string> Coordinator::Impl::commitResult(UploadSession::State& s) {
    if (s.piece >= 0)
        return commitPiece(s);  // piece_intake.cpp
    const UploadStream& upload = s.stream;
    const net::ResultHeader& header = upload.header();

    std::unique_lock lock(mu);
    closeCv.wait(lock, [&] { return !closing; });
    if (auto state = unitStateAtCommit(s.wuId, false); !state.ok())
        return state.refusal();
    const int64_t staleness = version - s.baseVersion;
    if (staleness > cfg.maxStaleness)
        return refuse(409, "stale",
                      "work unit " + std::to_string(s.wuId) + " trained from version " +
                          std::to_string(s.baseVersion) + "; the run moved on to version " +
                          std::to_string(version) + " during the upload");
    const GateVerdict verdict = gateResult(s);
    if (verdict.code == "internal")
        return internalError(verdict.message);
    if (!verdict.accepted()) {
        // Final: the worker drops a refused result, so the unit ends here, its data goes to the
        // next request and it no longer counts against its client's unit limit (kept assigned,
        // three refusals in a row left a client without work until their deadlines passed).
        const std::string why = std::string(kRefusedReasonPrefix) + " (" + verdict.code + ")";
        if (abandonWorkUnit(db, runId, s.wuId, why))
            metrics.countAbandoned("refused", db.changes());
        forgetLiveness(s.wuId);
        log("work unit " + std::to_string(s.wuId) + " abandoned: " + why + ": " + verdict.message);
        settleHeld();  // a held result whose twin this was is accepted alone
        return refuse(422, verdict.code, verdict.message);
    }
    // A unit with a live twin waits for it, or is compared with it (replication.cpp).
    if (auto answer = pairResult(s, verdict, lock))
        return std::move(*answer);

    CommitEntry e = entryOf(s);
    e.weight = static_cast<double>(header.tokens) * std::pow(cfg.staleWeightFactor, staleness) *
               verdict.weightFactor;
    e.note = verdict.message;
    auto receipts = commitEntries(std::span(&e, 1), {});
    if (!receipts.ok())
        return receipts.refusal();
    closeIfComplete(lock);
    return std::move(receipts.value().front());
}

Outcome<std::string> Coordinator::Impl::unitStateAtCommit(int64_t workUnitId, bool acceptedIsOpen) {
    auto q = db.prepare("SELECT state, COALESCE(abandon_reason, '') FROM work_units WHERE id = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, workUnitId);
    if (!q->step())
        return internalError("work unit vanished");
    const std::string state = q->text(0);
    if (state == "abandoned" || (state == "accepted" && !acceptedIsOpen))
        return refuse(409, "work_unit_abandoned",
                      "work unit " + std::to_string(workUnitId) +
                          " was abandoned while uploading: " + q->text(1));
    return state;
}

CommitEntry Coordinator::Impl::entryOf(UploadSession::State& s) {
    const net::ResultHeader& header = s.stream.header();
    CommitEntry e;
    e.wuId = s.wuId;
    e.clientId = s.clientId;
    e.tokens = header.tokens;
    e.steps = header.steps;
    e.lossFirst = header.lossFirst;
    e.lossLast = header.lossLast;
    e.norm = s.stream.norm();
    e.payloadSha256 = header.payloadSha256;
    e.resultDigest = s.stream.resultDigest();
    e.signature = s.stream.signature();
    e.stream = &s.stream;
    return e;
}

Outcome<std::vector<std::string>> Coordinator::Impl::commitEntries(
    std::span<CommitEntry> entries, const std::function<Status()>& alsoInTransaction) {
    const int64_t nowUnix = now();
    // Durable payloads first: a committed row always has its file. A live upload's staging
    // file moves into the round; a held result's file is linked (it stays where it was until
    // its row is gone, so a crash in between loses nothing).
    std::error_code ec;
    fs::create_directories(dirs.round(version), ec);
    std::vector<fs::path> placed;
    auto fail = [&](const std::string& what) {
        std::error_code e2;
        for (const auto& p : placed)
            fs::remove(p, e2);
        // SQLite's SQLITE_FULL: the transaction was rolled back.
        if (what.find("database or disk is full") != std::string::npos)
            return diskFull("the result's record");
        return internalError(what);
    };
    for (CommitEntry& e : entries) {
        const fs::path final = dirs.payload(version, e.wuId);
        if (e.stream) {
            if (::rename(e.stream->stagingFile().c_str(), final.c_str()) != 0)
                return fail("cannot move the payload into " + final.string());
            e.stream->releaseStagingFile();
        } else {
            fs::remove(final, ec);  // left by a commit that failed before
            if (::link(dirs.heldPayload(e.wuId).c_str(), final.c_str()) != 0)
                return fail("cannot link the held payload into " + final.string());
        }
        placed.push_back(final);
    }
    (void)fsyncPath(dirs.round(version), true);

    std::vector<std::string> receipts;
    for (const CommitEntry& e : entries) {
        net::Receipt receipt;
        receipt.workUnitId = e.wuId;
        receipt.clientId = e.clientId;
        receipt.round = version;
        receipt.weight = e.weight;
        receipt.credit = e.tokens;  // the donor's work, not reduced by staleness
        receipt.timeUnix = nowUnix;
        receipt.resultDigest = e.resultDigest;
        receipt.sign(key);
        receipts.push_back(receipt.toJson());
    }
    {
        Transaction tx(db);
        if (!tx.started())
            return fail(tx.started().error().message);
        for (size_t k = 0; k < entries.size(); ++k) {
            const CommitEntry& e = entries[k];
            auto ins = db.prepare(
                "INSERT INTO results(work_unit_id, seq, round, weight, tokens, steps, loss_last, "
                "norm, payload_sha256, result_sha256, signature, received_unix) VALUES (?, "
                "(SELECT COALESCE(MAX(seq), 0) + 1 FROM results), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
            auto rec = db.prepare("INSERT INTO receipts(work_unit_id, json) VALUES (?, ?)");
            auto wu = db.prepare(
                "UPDATE work_units SET state = 'accepted', twin_wanted = 0 WHERE id = ?");
            // Only into an open round (a close is a compare-and-set on this row, rounds.cpp).
            auto rnd = db.prepare(
                "UPDATE rounds SET contributors = contributors + 1, tokens = tokens + ?, "
                "weight_sum = weight_sum + ? WHERE run_id = ? AND round = ? AND closed_unix IS "
                "NULL");
            if (!ins || !rec || !wu || !rnd)
                return fail("cannot prepare the result insert");
            ins->bind(1, e.wuId)
                .bind(2, version)
                .bind(3, e.weight)
                .bind(4, e.tokens)
                .bind(5, e.steps)
                .bind(6, static_cast<double>(e.lossLast))
                .bind(7, e.norm)
                .bind(8, std::span<const uint8_t>(e.payloadSha256))
                .bind(9, std::span<const uint8_t>(e.resultDigest))
                .bind(10, std::span<const uint8_t>(e.signature))
                .bind(11, nowUnix);
            rec->bind(1, e.wuId).bind(2, receipts[k]);
            wu->bind(1, e.wuId);
            rnd->bind(1, e.tokens).bind(2, e.weight).bind(3, runId).bind(4, version);
            for (Statement* st : {&*ins, &*rec, &*wu, &*rnd})
                if (auto r = st->run(); !r)
                    return fail(r.error().message);
            if (db.changes() != 1) {  // rolled back with tx
                fencedOut = true;
                std::error_code e2;
                for (const auto& p : placed)
                    fs::remove(p, e2);
                log("error: round " + std::to_string(version) +
                    " was closed by another process; this one takes no more results (restart "
                    "it to follow the database)");
                return refuse(503, "round_closed_elsewhere",
                              "round " + std::to_string(version) +
                                  " was closed by another coordinator process; try again later",
                              30);
            }
            if (auto r = board.addResult(runId, e.clientId, e.tokens, e.weight); !r)
                return fail(r.error().message);
        }
        if (alsoInTransaction)
            if (auto r = alsoInTransaction(); !r)
                return fail(r.error().message);
        if (auto r = tx.commit(); !r)
            return fail(r.error().message);
    }
    int64_t contributors = 0;
    {
        auto q = db.prepare("SELECT contributors FROM rounds WHERE run_id = ? AND round = ?");
        if (q) {
            q->bind(1, runId).bind(2, version);
            if (q->step())
                contributors = q->integer(0);
        }
    }
    const int64_t needed = roundQuorum();
    for (const CommitEntry& e : entries) {
        metrics.countAccepted(e.tokens);
        // In acceptance order (mu is held from the transaction to here): the sum's rounding is
        // the order's, and a restart re-adds the files in the same order (results.seq).
        aggregator->add(dirs.payload(version, e.wuId), static_cast<float>(e.weight));
        log("result of work unit " + std::to_string(e.wuId) + " accepted into round " +
            std::to_string(version) + ": " + std::to_string(e.tokens) + " tokens, weight " +
            fmt(e.weight, 6) + ", norm " + fmt(e.norm) + ", loss " + fmt(e.lossFirst) + " -> " +
            fmt(e.lossLast) + " (" + std::to_string(contributors) + "/" + std::to_string(needed) +
            ")" + (e.note.empty() ? "" : "; " + e.note));
    }
    return receipts;
}

void Coordinator::Impl::closeIfComplete(std::unique_lock<std::mutex>& lock) {
    int64_t contributors = 0;
    auto q = db.prepare("SELECT contributors FROM rounds WHERE run_id = ? AND round = ?");
    if (!q)
        return;
    q->bind(1, runId).bind(2, version);
    if (q->step())
        contributors = q->integer(0);
    if (contributors == 0 || contributors < roundQuorum())
        return;
    // Only the round clock's holder closes (round_clock.hpp); it does at its next tick.
    if (!roundClock.held())
        return;
    // The ticker closes the round (rounds.cpp, tick), so that this answer does not wait for the
    // outer step and the files of the new version.
    if (cfg.backgroundThreads)
        tickCv.notify_all();
    else if (auto st = closeRound(lock); !st)
        log("error: closing the round failed: " + st.error().message);
}

}  // namespace tandem::coord
