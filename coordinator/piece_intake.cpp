// Pieces of a sharded run's results (docs/protocol.md, "Sharded runs"): where a piece belongs,
// what this shard already holds of a unit, and the commit of a checked piece into this shard's
// round sum. Each shard decides on its own piece alone; the first piece of a unit to be
// committed anywhere also records the unit's result (its figures, the donor's credit) once.
#include "coordinator_impl.hpp"

#include <cmath>
#include <cstdio>

namespace tandem::coord {

Expected<Coordinator::Impl::PieceRecord> Coordinator::Impl::pieceRecord(int64_t workUnitId) {
    PieceRecord rec;
    auto q = db.prepareCached(
        "SELECT s.result_sha256, (SELECT p.receipt_json FROM result_pieces p WHERE "
        "p.work_unit_id = s.work_unit_id AND p.shard = ?) FROM results s WHERE s.work_unit_id = ?");
    if (!q)
        return q.error();
    q->bind(1, int64_t{cfg.shard}).bind(2, workUnitId);
    if (q->step()) {
        rec.resultDigest = toDigest(q->blob(0));
        if (!q->isNull(1)) {
            rec.here = true;
            rec.receipt = q->text(1);
        }
    }
    if (auto st = q->status(); !st)
        return st.error();
    return rec;
}

std::optional<Refusal> Coordinator::Impl::pieceRouteRefusal(int64_t workUnitId, int piece) {
    const std::string unit = std::to_string(workUnitId);
    if (piece < 0 && sharded())
        return refuse(409, "pieces_required",
                      "this run is aggregated by " + std::to_string(run.shards) +
                          " shards: a result is uploaded in pieces to the shards its manifest "
                          "lists (protocol version 6); update Tandem on this worker");
    if (piece < 0)
        return std::nullopt;
    if (!sharded())
        return refuse(404, "not_sharded",
                      "this run is not sharded: upload the whole result of work unit " + unit +
                          " to /v1/results/" + unit);
    if (piece >= run.shards)
        return refuse(404, "unknown_piece",
                      "a result of this run has " + std::to_string(run.shards) +
                          " pieces, numbered from 0; there is no piece " + std::to_string(piece));
    if (piece != cfg.shard) {
        (void)readShardUrls();
        auto it = shardUrls.find(piece);
        return refuse(421, "wrong_shard",
                      "piece " + std::to_string(piece) + " belongs at shard " +
                          std::to_string(piece) +
                          (it == shardUrls.end() ? std::string()
                                                 : ", " + it->second + "/v1/results/" + unit +
                                                       "/pieces/" + std::to_string(piece)) +
                          "; this process is shard " + std::to_string(cfg.shard) +
                          " (the manifest's shards list says where each piece goes)");
    }
    return std::nullopt;
}

Outcome<std::string> Coordinator::Impl::commitPiece(UploadSession::State& s) {
    const UploadStream& upload = s.stream;
    const net::ResultHeader& header = upload.header();

    std::unique_lock lock(mu);
    closeCv.wait(lock, [&] { return !closing; });
    // Another piece of the unit may have been accepted: that leaves it open for this one.
    auto state = unitStateAtCommit(s.wuId, true);
    if (!state.ok())
        return state.refusal();
    const std::string unitState = state.value();
    const int64_t round = pieceRound;
    const int64_t staleness = round - s.baseVersion;
    if (staleness > cfg.maxStaleness)
        return refuse(409, "stale",
                      "work unit " + std::to_string(s.wuId) + " trained from version " +
                          std::to_string(s.baseVersion) +
                          "; this shard's range moved on to version " + std::to_string(round) +
                          " during the upload");
    const GateVerdict verdict = gateResult(s);
    if (verdict.code == "internal")
        return internalError(verdict.message);
    if (!verdict.accepted()) {
        // Every shard judges the same norm from the same table, so the unit's other pieces are
        // refused alike; the unit ends here unless another piece was accepted before.
        if (unitState == "assigned") {
            const std::string why = std::string(kRefusedReasonPrefix) + " (" + verdict.code + ")";
            if (abandonWorkUnit(db, runId, s.wuId, why))
                metrics.countAbandoned("refused", db.changes());
            forgetLiveness(s.wuId);
            log("work unit " + std::to_string(s.wuId) + " abandoned: " + why + ": " +
                verdict.message);
        }
        return refuse(422, verdict.code, verdict.message);
    }
    const double weight = static_cast<double>(header.tokens) *
                          std::pow(cfg.staleWeightFactor, staleness) * verdict.weightFactor;
    const net::PieceEntry entry = upload.pieceEntry();

    // The payload first: a committed row always has its file.
    std::error_code ec;
    fs::create_directories(dirs.round(round), ec);
    const fs::path final = dirs.payload(round, s.wuId);
    if (::rename(s.stream.stagingFile().c_str(), final.c_str()) != 0)
        return internalError("cannot move the piece into " + final.string());
    s.stream.releaseStagingFile();
    (void)fsyncPath(dirs.round(round), true);
    auto fail = [&](const std::string& what) {
        std::error_code e2;
        fs::remove(final, e2);
        if (what.find("database or disk is full") != std::string::npos)
            return diskFull("the piece's record");
        return internalError(what);
    };

    const int64_t t = now();
    net::Receipt receipt;
    receipt.workUnitId = s.wuId;
    receipt.clientId = s.clientId;
    receipt.round = round;
    receipt.weight = weight;
    receipt.credit = header.tokens;
    receipt.timeUnix = t;
    receipt.resultDigest = upload.resultDigest();
    receipt.shard = cfg.shard;
    receipt.sign(key);
    const std::string receiptJson = receipt.toJson();
    bool first = false;
    {
        Transaction tx(db);
        if (!tx.started())
            return fail(tx.started().error().message);
        // Against the version's commit (shard_rounds.cpp), which counts the new round's results
        // as it inserts its row: a piece commit is before it or after it, never in between.
        auto hold = db.prepare("SELECT version FROM runs WHERE id = ? FOR SHARE");
        if (!hold)
            return fail(hold.error().message);
        hold->bind(1, runId);
        if (!hold->step() && !hold->status())
            return fail(hold->status().error().message);
        // The unit's result, once for all its pieces: its seq is -id, since the order of a
        // sharded run's sums is each shard's own (result_pieces.seq).
        auto res = db.prepare(
            "INSERT INTO results(work_unit_id, seq, round, weight, tokens, steps, loss_last, "
            "norm, payload_sha256, result_sha256, signature, received_unix) VALUES (?, ?, ?, ?, "
            "?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (work_unit_id) DO NOTHING");
        if (!res)
            return fail(res.error().message);
        res->bind(1, s.wuId)
            .bind(2, -s.wuId)
            .bind(3, round)
            .bind(4, weight)
            .bind(5, header.tokens)
            .bind(6, int64_t{header.steps})
            .bind(7, static_cast<double>(header.lossLast))
            .bind(8, upload.norm())
            .bind(9, std::span<const uint8_t>(header.payloadSha256))
            .bind(10, std::span<const uint8_t>(upload.resultDigest()))
            .bind(11, std::span<const uint8_t>(upload.signature()))
            .bind(12, t);
        if (auto r = res->run(); !r)
            return fail(r.error().message);
        first = db.changes() == 1;
        auto piece = db.prepare(
            "INSERT INTO result_pieces(work_unit_id, shard, seq, round, weight, sum_squares, "
            "payload_sha256, receipt_json, received_unix) VALUES (?, ?, (SELECT COALESCE(MAX(seq), "
            "0) + 1 FROM result_pieces WHERE shard = ?), ?, ?, ?, ?, ?, ?)");
        if (!piece)
            return fail(piece.error().message);
        piece->bind(1, s.wuId)
            .bind(2, int64_t{cfg.shard})
            .bind(3, int64_t{cfg.shard})
            .bind(4, round)
            .bind(5, weight)
            .bind(6, entry.sumSquares)
            .bind(7, std::span<const uint8_t>(entry.sha256))
            .bind(8, receiptJson)
            .bind(9, t);
        if (auto r = piece->run(); !r)
            return fail(r.error().message);
        if (first) {
            auto rec = db.prepare("INSERT INTO receipts(work_unit_id, json) VALUES (?, ?)");
            auto wu = db.prepare(
                "UPDATE work_units SET state = 'accepted', twin_wanted = 0 WHERE id = ?");
            if (!rec || !wu)
                return fail("cannot prepare the result's rows");
            // The round's figures as a one-process commit keeps them (none while its row is not
            // there yet: the commit that inserts it counts this result).
            auto rnd = db.prepare(
                "UPDATE rounds SET contributors = contributors + 1, tokens = tokens + ?, "
                "weight_sum = weight_sum + ? WHERE run_id = ? AND round = ?");
            if (!rnd)
                return fail(rnd.error().message);
            rec->bind(1, s.wuId).bind(2, receiptJson);
            wu->bind(1, s.wuId);
            rnd->bind(1, header.tokens).bind(2, weight).bind(3, runId).bind(4, round);
            for (Statement* st : {&*rec, &*wu, &*rnd})
                if (auto r = st->run(); !r)
                    return fail(r.error().message);
            if (auto r = board.addResult(runId, s.clientId, header.tokens, weight); !r)
                return fail(r.error().message);
        }
        if (auto r = tx.commit(); !r)
            return fail(r.error().message);
    }
    if (first)
        metrics.countAccepted(header.tokens);
    // In acceptance order (mu is held from the transaction to here), as one process's sum.
    aggregator->add(final, static_cast<float>(weight));
    log("piece " + std::to_string(cfg.shard) + " of work unit " + std::to_string(s.wuId) +
        " accepted into round " + std::to_string(round) + ": " + std::to_string(header.tokens) +
        " tokens, weight " + fmt(weight, 6) + ", norm " + fmt(upload.norm()) +
        (verdict.message.empty() ? "" : "; " + verdict.message));
    if (cfg.backgroundThreads)
        tickCv.notify_all();  // the clock holder looks at the quorum
    return receiptJson;
}

}  // namespace tandem::coord
