#include "work_assignment.hpp"

#include "coordinator_impl.hpp"
#include "memory_estimate.hpp"

#include "random.hpp"
#include "result_format.hpp"
#include "unit_sizing.hpp"

#include <algorithm>

namespace tandem::coord {

float Coordinator::Impl::startBlendFor(int64_t clientId) {
    auto q = db.prepare(
        "SELECT w.state, COALESCE(s.round, -1), w.last_step, w.inner_steps, "
        "COALESCE(w.abandon_reason, '') FROM work_units w "
        "LEFT JOIN results s ON s.work_unit_id = w.id WHERE w.run_id = ? AND w.client_id = ? "
        "ORDER BY w.id DESC LIMIT 2");
    if (!q)
        return 0;
    q->bind(1, runId).bind(2, clientId);
    if (!q->step())
        return 0;  // its first unit of the run
    const std::string state = q->text(0);
    const bool finished = q->integer(2) >= q->integer(3);
    const bool refused = q->text(4).starts_with(kRefusedReasonPrefix);
    if (state == "assigned" || (state == "accepted" && q->integer(1) >= version))
        return cfg.startBlend;  // still out, or waiting in the open round: the eager start
    // Trained to the end, but its result never arrived (a lost upload, or stale beyond the
    // bound): DiLoCo's rule, the worker continues from its own end point, so that the next
    // result carries the lost progress. Only one unit away from the run (the unit before was
    // accepted, or there was none): a worker whose results keep getting lost must not train
    // its own model for ever. Never from a refused result's end point.
    if (state == "abandoned" && finished && !refused && (!q->step() || q->text(0) == "accepted"))
        return 1.0f;
    return 0;
}

int innerStepsFor(const RunSettings& run, double tokensPerSecond, int targetSeconds,
                  double uplinkBytesPerSecond) {
    const int64_t resultBytes =
        static_cast<int64_t>(net::kResultHeaderBytes) +
        net::resultPayloadBytes(run.resultEncoding, run.model.parameterCount());
    return tandem::innerStepsFor({int64_t{run.batch} * run.seqLen, targetSeconds, run.minInnerSteps,
                                  run.innerSteps, resultBytes},
                                 tokensPerSecond, uplinkBytesPerSecond);
}

int oldestManifestProtocol(const RunSettings& run) {
    return run.resultEncoding == net::kEncodingFp16 ? net::kOldestProtocolVersion
                                                    : net::kResultEncodingProtocol;
}

int minResultSteps(const RunSettings& run, int innerSteps) {
    return std::clamp(run.minInnerSteps, 1, std::max(1, innerSteps));
}

int64_t workUnitBytes(const RunSettings& run, int innerSteps, int64_t trainBytes) {
    const int64_t tokensPerStep = int64_t{run.batch} * run.seqLen;
    return std::min<int64_t>(
        trainBytes, std::max<int64_t>(run.seqLen + 1, int64_t{innerSteps} * tokensPerStep));
}

std::optional<DataRange> nextDataRange(int64_t cursor, int64_t assignedBytes, int64_t length,
                                       int64_t trainBytes) {
    const int64_t ends[] = {trainBytes};
    return nextDataRange(cursor, assignedBytes, length, ends);
}

std::optional<DataRange> nextDataRange(int64_t cursor, int64_t assignedBytes, int64_t length,
                                       std::span<const int64_t> shardEnds) {
    const int64_t total = shardEnds.back();
    const size_t n = shardEnds.size();
    size_t s = static_cast<size_t>(std::upper_bound(shardEnds.begin(), shardEnds.end(), cursor) -
                                   shardEnds.begin());
    s = std::min(s, n - 1);
    auto startOf = [&](size_t i) { return i == 0 ? int64_t{0} : shardEnds[i - 1]; };
    int64_t offset = cursor, skip = 0;
    int64_t len = std::min(length, shardEnds[s] - startOf(s));
    if (offset + len > shardEnds[s]) {
        skip = shardEnds[s] - offset;
        s = (s + 1) % n;
        offset = startOf(s);
        len = std::min(length, shardEnds[s] - offset);
    }
    if (assignedBytes + skip + len > total)
        return std::nullopt;
    return DataRange{offset, len, (offset + len) % total, assignedBytes + skip + len};
}

std::optional<Outcome<WorkOffer>> Coordinator::Impl::repeatedRequest(int64_t clientId,
                                                                     const std::string& requestId) {
    using Answer = Outcome<WorkOffer>;
    // The newest unit of this request: an earlier one may have been abandoned since.
    auto q = db.prepare(
        "SELECT id, state, manifest_json, inner_steps FROM work_units WHERE client_id = ? AND "
        "request_id = ? ORDER BY id DESC LIMIT 1");
    if (!q)
        return Answer(internalError(q.error().message));
    q->bind(1, clientId).bind(2, requestId);
    if (!q->step() || q->text(1) != "assigned")
        return std::nullopt;  // new, or its unit is gone: the request gets a new unit
    const int64_t wuId = q->integer(0);
    auto m = net::Manifest::fromJson(q->text(2));
    if (!m)
        return Answer(internalError("the stored manifest of work unit " + std::to_string(wuId) +
                                    " cannot be read: " + m.error().message));
    // Asking again is a sign of life: the unit's lease starts over.
    liveness.touch(wuId, clientId, q->integer(3), now());
    log("work unit " + std::to_string(wuId) + " -> client " + std::to_string(clientId) +
        " again (its request was repeated)");
    std::optional<Answer> answer(std::in_place, WorkOffer{});
    answer->value().manifest = std::move(m.value());
    return answer;
}

Outcome<WorkOffer> Coordinator::Impl::assignWork(int64_t clientId, const net::WorkRequest& req,
                                                 const std::string& requestId) {
    const int64_t nowUnix = now();
    if (auto r = blockedRefusal(clientId))
        return *r;
    if (!requestId.empty()) {
        if (auto repeated = repeatedRequest(clientId, requestId))
            return std::move(*repeated);
    }
    {
        auto q = db.prepare(
            "SELECT id FROM work_units WHERE client_id = ? AND state = 'assigned' ORDER BY id");
        if (!q)
            return internalError(q.error().message);
        q->bind(1, clientId);
        std::vector<int64_t> open;
        while (q->step())
            open.push_back(q->integer(0));
        const int limit = workUnitLimit(clientId);
        if (static_cast<int>(open.size()) >= limit) {
            std::string ids;
            for (auto id : open)
                ids += (ids.empty() ? "" : ", ") + std::to_string(id);
            return refuse(
                409, "too_many_work_units",
                "this client already holds " + std::to_string(open.size()) +
                    " unfinished work units (" + ids +
                    "); upload their results or release them (DELETE /v1/work/{id}) "
                    "before asking for more" +
                    (limit < cfg.maxWorkUnitsPerClient
                         ? " (a client holds " + std::to_string(limit) +
                               " at a time until one of its results has been "
                               "accepted in the last " +
                               std::to_string(std::max(1, cfg.referenceRounds)) + " rounds)"
                         : ""));
        }
    }
    // A device that reports its memory gets no unit that cannot fit it (0: not reported).
    if (req.memoryBytes > 0) {
        const UnitMemoryEstimate e = estimateUnitMemory(run.model, run.batch, run.seqLen);
        const bool cpu = req.device.starts_with("cpu");
        const int64_t need = cpu ? e.sharedTotalBytes() : e.backendBytes();
        if (need > req.memoryBytes) {
            return refuse(409, "insufficient_memory",
                          "a work unit of this run (" + run.model.describe() + ", batch " +
                              std::to_string(run.batch) + " x " + std::to_string(run.seqLen) +
                              ") needs " + formatMemory(need) + " on '" + req.device +
                              "', which reports " + formatMemory(req.memoryBytes) + " available");
        }
    }
    // A worker before version 5 would upload fp16 whatever the manifest said (it cannot read
    // the field): an int8 run has no work for it. The words are the ones a worker shows as a
    // protocol mismatch (core/problem.cpp).
    if (run.resultEncoding != net::kEncodingFp16 && req.protocol < net::kResultEncodingProtocol)
        return refuse(409, "protocol_too_old",
                      "protocol version " + std::to_string(req.protocol) +
                          " is not supported by this run: it takes " +
                          net::encodingName(run.resultEncoding) + " results, stated in version " +
                          std::to_string(net::kResultEncodingProtocol) +
                          " manifests; update Tandem on this worker");
    // A sharded run's results arrive in pieces, which only version 6 manifests describe; and
    // every shard must have said where it is.
    if (sharded()) {
        if (req.protocol < kShardedProtocol)
            return refuse(409, "protocol_too_old",
                          "protocol version " + std::to_string(req.protocol) +
                              " is not supported by this run: it is aggregated by " +
                              std::to_string(run.shards) +
                              " shards and takes results in pieces, stated in version " +
                              std::to_string(kShardedProtocol) +
                              " manifests; update Tandem on this worker");
        if (static_cast<int>(shardUrls.size()) < run.shards)
            if (auto st = readShardUrls(); !st)
                return internalError(st.error().message);
        if (static_cast<int>(shardUrls.size()) < run.shards)
            return refuse(503, "shards_not_ready",
                          std::to_string(shardUrls.size()) + " of the run's " +
                              std::to_string(run.shards) +
                              " aggregation shards have started; try again shortly",
                          10);
    }
    // A unit waiting for its twin goes first (replication.cpp).
    if (auto twin = assignTwin(clientId, requestId))
        return std::move(*twin);
    const int H = innerStepsFor(run, req.tokensPerSecond, cfg.targetWorkUnitSeconds,
                                req.uplinkBytesPerSecond);
    const int64_t trainBytes = data.trainTokens();
    int64_t offset = 0, length = 0, reusedFrom = 0;
    int64_t cursor = 0, span = 0, deadlineOfRound = 0;
    // From the cursor's read to the unit's insert in one transaction: with several processes on
    // one PostgreSQL database (front ends), the run's row is locked (FOR UPDATE) until the
    // cursor has moved, and an abandoned range is claimed by one of them (FOR UPDATE SKIP
    // LOCKED); SQLite's BEGIN IMMEDIATE already takes the one write lock.
    const bool postgres = db.backend() == storage::Backend::Postgres;
    Transaction tx(db);
    if (!tx.started())
        return internalError(tx.started().error().message);
    {
        auto q = db.prepare(std::string("SELECT r.data_cursor, d.assigned_bytes, d.deadline_unix, "
                                        "r.version FROM runs r JOIN rounds d ON d.run_id = r.id "
                                        "AND d.round = r.version WHERE r.id = ?") +
                            (postgres ? " FOR UPDATE OF r" : ""));
        if (!q)
            return internalError(q.error().message);
        q->bind(1, runId);
        if (!q->step())
            return internalError("the open round is missing");
        cursor = q->integer(0);
        span = q->integer(1);
        deadlineOfRound = q->integer(2);
        if (q->integer(3) != version) {  // a front end behind a close (front_end.cpp)
            if (!frontEnd())
                return internalError("the run's version moved in another process");
            if (auto st = syncVersion(); !st)
                return internalError(st.error().message);
            if (q->integer(3) != version)
                return internalError("the run's version moved during this request");
        }
    }
    {
        auto q = db.prepare(
            std::string(
                "SELECT id, data_offset, data_length FROM work_units w WHERE run_id = ? AND "
                "base_version = ? AND state = 'abandoned' AND reassigned = 0 AND NOT EXISTS "
                "(SELECT 1 FROM work_units t WHERE t.id = w.twin_id AND t.state != 'abandoned') "
                "ORDER BY id LIMIT 1") +
            (postgres ? " FOR UPDATE SKIP LOCKED" : ""));
        if (!q)
            return internalError(q.error().message);
        q->bind(1, runId).bind(2, version);
        if (q->step()) {
            reusedFrom = q->integer(0);
            offset = q->integer(1);
            length = q->integer(2);
        }
    }
    if (reusedFrom == 0) {
        auto range =
            nextDataRange(cursor, span, workUnitBytes(run, H, trainBytes), data.trainEnds());
        if (!range) {
            const int64_t wait = std::clamp<int64_t>(deadlineOfRound - nowUnix, 5, 60);
            WorkOffer none;
            none.retryAfterSeconds = static_cast<int>(wait);
            return none;  // every byte of the train data is assigned in this round
        }
        offset = range->offset;
        length = range->length;
        cursor = range->nextCursor;
        span = range->assignedBytes;
    }
    auto wfIt = weightFiles.find(version);
    if (wfIt == weightFiles.end())  // a front end before the aggregating process recorded it
        return refuse(503, "version_not_ready",
                      "the weights of version " + std::to_string(version) +
                          " are not recorded yet; try again shortly",
                      5);
    const float startBlend = req.protocol >= 3 ? startBlendFor(clientId) : 0.0f;
    const uint64_t seed = [&] {
        Rng rng(run.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(nowUnix));
        return rng.next() & ((uint64_t{1} << 53) - 1);
    }();
    const int64_t deadline = nowUnix + int64_t{cfg.roundTimeoutSeconds} * (1 + cfg.maxStaleness);
    auto ins = db.prepare(
        "INSERT INTO work_units(run_id, client_id, base_version, shard, data_offset, data_length, "
        "inner_steps, batch, seq_len, seed, created_unix, deadline_unix, heartbeat_unix, "
        "tokens_per_second, request_id, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, "
        "'assigned')");
    if (!ins)
        return internalError(ins.error().message);
    const TrainShard& shard = data.shardAt(offset);
    const int64_t local = offset - data.shardStart(shard);  // in the shard's train slice
    ins->bind(1, runId)
        .bind(2, clientId)
        .bind(3, version)
        .bind(4, shard.number)
        .bind(5, offset)
        .bind(6, length)
        .bind(7, H)
        .bind(8, run.batch)
        .bind(9, run.seqLen)
        .bind(10, static_cast<int64_t>(seed))
        .bind(11, nowUnix)
        .bind(12, deadline)
        .bind(13, nowUnix)
        .bind(14, req.tokensPerSecond);
    if (requestId.empty())
        ins->bindNull(15);
    else
        ins->bind(15, requestId);
    if (auto st = ins->run(); !st)
        return internalError(st.error().message);
    const int64_t wuId = db.lastInsertId();
    metrics.countAssigned();

    net::Manifest m;
    m.workUnitId = wuId;
    m.runId = runId;
    m.baseVersion = version;
    m.model = run.model;
    const ServedFile& wf = wfIt->second;
    // A front end's weights and uploads are the aggregating process's (front_end.cpp).
    const std::string origin = sharded()    ? shardUrls.begin()->second
                               : frontEnd() ? cfg.uploadBase
                                            : std::string();
    m.weightsUrl =
        origin + "/v1/runs/" + std::to_string(runId) + "/weights/" + std::to_string(version);
    m.weightsSha256 = wf.sha256;
    m.weightsBytes = wf.bytes;
    m.dataUrl = "/v1/runs/" + std::to_string(runId) + "/data/" + std::to_string(shard.number);
    m.dataShard = shard.number;
    m.dataOffset = shard.firstToken + local;  // in the shard file's tokens
    m.dataLength = length;
    m.dataTokenBytes = shard.tokens.width;
    m.dataHeaderBytes = shard.headerBytes;
    m.dataSha256 = net::sha256(shard.tokens.slice(local, length).bytes());
    m.innerSteps = H;
    m.batch = run.batch;
    m.seqLen = run.seqLen;
    m.lr = run.lrSchedule();
    m.lrStartStep = version * run.innerSteps;
    m.seed = seed;
    m.deadlineUnix = deadline;
    m.heartbeatSeconds = cfg.heartbeatSeconds;
    m.uploadUrl = origin + "/v1/results/" + std::to_string(wuId);
    m.maxUploadBytes = maxUploadBytes();
    // A worker that asked with version 2 gets a version 2 manifest (it would not know the field
    // and its signature check would fail): it starts from the weights, as before.
    m.protocol = std::clamp(req.protocol, net::kOldestProtocolVersion, net::kProtocolVersion);
    // About --replicate-fraction of the units wait for a twin (replication.cpp). Twins start
    // from the same weights, never blended with their own workers' end points, and their
    // manifest is one every protocol version reads, since the twin's worker may be older.
    const bool twinWanted = chosenForTwin(run.seed, wuId, cfg.replicateFraction);
    m.startBlend = twinWanted ? 0.0f : startBlend;
    if (twinWanted)
        m.protocol = oldestManifestProtocol(run);
    m.resultEncoding = run.resultEncoding;
    // Version 6, a sharded run: where each piece of the result goes (docs/protocol.md).
    if (sharded()) {
        m.protocol = std::max(m.protocol, kShardedProtocol);
        int64_t largest = 0;
        int k = 0;
        for (const net::PieceRange& r : net::pieceRanges(P, run.shards)) {
            m.shards.push_back(net::ShardUpload{r, shardUrls[k] + "/v1/results/" +
                                                       std::to_string(wuId) + "/pieces/" +
                                                       std::to_string(k)});
            largest = std::max(largest, net::piecePayloadBytes(run.resultEncoding, r));
            ++k;
        }
        m.uploadUrl = m.shards.front().uploadUrl;
        m.maxUploadBytes = static_cast<int64_t>(net::kResultHeaderBytes) +
                           run.shards * static_cast<int64_t>(net::kPieceEntryBytes) + largest;
    }
    // Version 4: the same files as blobs, on the coordinator and its mirrors.
    if (m.protocol >= 4) {
        m.weightsUrls = weightBlobUrls(wf.sha256);
        m.dataUrls = blobUrls(shard.file.sha256, cfg.mirrors);
    }
    // Version 5: the deltas that end at this version, oldest first (a worker holding an older
    // version downloads these instead of the weights).
    if (m.protocol >= 5) {
        for (int64_t to = version - kKeptWeightDeltas + 1; to <= version; ++to) {
            auto it = deltaFiles.find(to);
            if (it == deltaFiles.end()) {
                m.weightDeltas.clear();  // the chain must be consecutive up to version
                continue;
            }
            m.weightDeltas.push_back(net::WeightDeltaRef{
                to - 1, it->second.sha256, it->second.bytes, weightBlobUrls(it->second.sha256)});
        }
    }
    m.sign(key);

    auto upd = db.prepare("UPDATE work_units SET manifest_json = ?, twin_wanted = ? WHERE id = ?");
    if (!upd)
        return internalError(upd.error().message);
    upd->bind(1, m.toJson()).bind(2, twinWanted).bind(3, wuId);
    if (auto st = upd->run(); !st)
        return internalError(st.error().message);
    if (reusedFrom != 0) {
        auto r = db.prepare("UPDATE work_units SET reassigned = 1 WHERE id = ?");
        if (!r)
            return internalError(r.error().message);
        r->bind(1, reusedFrom);
        if (auto st = r->run(); !st)
            return internalError(st.error().message);
    } else {
        auto r = db.prepare("UPDATE runs SET data_cursor = ? WHERE id = ?");
        auto r2 = db.prepare("UPDATE rounds SET assigned_bytes = ? WHERE run_id = ? AND round = ?");
        if (!r || !r2)
            return internalError("cannot prepare the cursor update");
        r->bind(1, cursor).bind(2, runId);
        r2->bind(1, span).bind(2, runId).bind(3, version);
        if (auto st = r->run(); !st)
            return internalError(st.error().message);
        if (auto st = r2->run(); !st)
            return internalError(st.error().message);
    }
    if (auto st = tx.commit(); !st)
        return internalError(st.error().message);
    liveness.touch(wuId, clientId, H, nowUnix);
    log("work unit " + std::to_string(wuId) + " -> client " + std::to_string(clientId) +
        ": version " + std::to_string(version) + ", H=" + std::to_string(H) +
        (shard.tokens.width == 1 ? ", bytes ["
                                 : ", shard " + std::to_string(shard.number) + " tokens [") +
        std::to_string(m.dataOffset) + ", " + std::to_string(m.dataOffset + length) + ")" +
        (reusedFrom ? " (reassigned from work unit " + std::to_string(reusedFrom) + ")" : ""));
    WorkOffer offer;
    offer.manifest = std::move(m);
    return offer;
}

Outcome<net::ProgressReply> Coordinator::Impl::heartbeat(int64_t clientId, int64_t workUnitId,
                                                         const net::ProgressReport& rep) {
    // Read only: a heartbeat writes nothing to the database (unit_liveness.hpp).
    auto q = db.prepareCached(
        "SELECT client_id, state, base_version, COALESCE(abandon_reason, ''), inner_steps FROM "
        "work_units WHERE id = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, workUnitId);
    if (auto r = stepOwnWorkUnit(*q, workUnitId, clientId))
        return *r;
    const std::string state = q->text(1);
    const int64_t base = q->integer(2);
    const std::string reason = q->text(3);
    net::ProgressReply reply;
    reply.minSteps = minResultSteps(run, static_cast<int>(q->integer(4)));
    if (state == "accepted" && sharded()) {
        // Its other pieces are still wanted at their shards until each has one.
        auto n = db.prepareCached("SELECT COUNT(*) FROM result_pieces WHERE work_unit_id = ?");
        if (!n)
            return internalError(n.error().message);
        n->bind(1, workUnitId);
        if (n->step() && n->integer(0) < run.shards)
            return reply;
    }
    if (state == "accepted") {
        reply.action = "abandon";
        reply.reason = "the result of this work unit was already accepted";
        return reply;
    }
    if (state == "abandoned") {
        reply.action = "abandon";
        reply.reason = reason.empty() ? "the work unit was abandoned" : reason;
        return reply;
    }
    if (version - base > cfg.maxStaleness) {
        reply.action = "abandon";
        reply.reason = "the run is at version " + std::to_string(version) +
                       "; results based on version " + std::to_string(base) +
                       " are no longer accepted (staleness bound " +
                       std::to_string(cfg.maxStaleness) + ")";
        if (abandonWorkUnit(db, runId, workUnitId, reply.reason))
            metrics.countAbandoned("stale", db.changes());
        forgetLiveness(workUnitId);
        return reply;
    }
    const int64_t t = now();
    liveness.touch(workUnitId, clientId, q->integer(4), t);
    liveness.report(workUnitId, rep.step, static_cast<double>(rep.loss), rep.tokensPerSecond, t);
    metrics.countHeartbeat();
    return reply;
}

}  // namespace tandem::coord
