// Work assignment: sizing and placing work units, and their heartbeats.
#include "coordinator_impl.hpp"

#include "random.hpp"

#include <algorithm>
#include <cmath>

namespace tandem::coord {

Outcome<WorkOffer> Coordinator::requestWork(int64_t clientId, std::string_view body) {
    auto req = net::WorkRequest::fromJson(body);
    if (!req)
        return refuse(400, "bad_request", req.error().message);
    Impl& c = *m_impl;
    std::lock_guard lock(c.mu);
    const int64_t now = c.now();
    {
        auto q = c.db.prepare(
            "SELECT id FROM work_units WHERE client_id = ? AND state = 'assigned' ORDER BY id");
        if (!q)
            return internalError(q.error().message);
        q->bind(1, clientId);
        std::vector<int64_t> open;
        while (q->step())
            open.push_back(q->integer(0));
        if (static_cast<int>(open.size()) >= c.cfg.maxWorkUnitsPerClient) {
            std::string ids;
            for (auto id : open)
                ids += (ids.empty() ? "" : ", ") + std::to_string(id);
            return refuse(409, "too_many_work_units",
                          "this client already holds " + std::to_string(open.size()) +
                              " unfinished work units (" + ids +
                              "); upload or let them expire "
                              "before asking for more");
        }
    }
    // H from the reported throughput, so fast and slow workers take about the same wall time.
    const int64_t tokensPerStep = int64_t{c.run.batch} * c.run.seqLen;
    int H = c.run.innerSteps;
    if (req->tokensPerSecond > 0) {
        const double steps =
            req->tokensPerSecond * c.cfg.targetWorkUnitSeconds / static_cast<double>(tokensPerStep);
        H = static_cast<int>(
            std::clamp<double>(std::floor(steps), c.run.minInnerSteps, c.run.innerSteps));
    }
    const int64_t trainBytes = static_cast<int64_t>(c.train.size());
    int64_t offset = 0, length = 0, reusedFrom = 0;
    int64_t cursor = 0, span = 0;
    {
        auto q = c.db.prepare(
            "SELECT id, data_offset, data_length FROM work_units WHERE run_id = ? AND "
            "base_version = ? AND state = 'abandoned' AND reassigned = 0 ORDER BY id LIMIT 1");
        if (!q)
            return internalError(q.error().message);
        q->bind(1, c.runId).bind(2, c.version);
        if (q->step()) {
            reusedFrom = q->integer(0);
            offset = q->integer(1);
            length = q->integer(2);
        }
    }
    {
        auto q = c.db.prepare(
            "SELECT r.data_cursor, d.assigned_bytes, d.deadline_unix FROM runs r JOIN rounds d ON "
            "d.run_id = r.id AND d.round = r.version WHERE r.id = ?");
        if (!q)
            return internalError(q.error().message);
        q->bind(1, c.runId);
        if (!q->step())
            return internalError("the open round is missing");
        cursor = q->integer(0);
        span = q->integer(1);
        if (reusedFrom == 0) {
            length = std::min<int64_t>(
                trainBytes, std::max<int64_t>(c.run.seqLen + 1, int64_t{H} * tokensPerStep));
            int64_t skip = 0;
            offset = cursor;
            if (offset + length > trainBytes) {
                skip = trainBytes - offset;
                offset = 0;
            }
            if (span + skip + length > trainBytes) {
                const int64_t wait = std::clamp<int64_t>(q->integer(2) - now, 5, 60);
                WorkOffer none;
                none.retryAfterSeconds = static_cast<int>(wait);
                return none;  // every byte of the train data is assigned in this round
            }
            span += skip + length;
            cursor = (offset + length) % trainBytes;
        }
    }
    const uint64_t seed = [&] {
        Rng rng(c.run.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(now));
        return rng.next() & ((uint64_t{1} << 53) - 1);
    }();
    const int64_t deadline = now + int64_t{c.cfg.roundTimeoutSeconds} * (1 + c.cfg.maxStaleness);
    Transaction tx(c.db);
    if (!tx.started())
        return internalError(tx.started().error().message);
    auto ins = c.db.prepare(
        "INSERT INTO work_units(run_id, client_id, base_version, shard, data_offset, data_length, "
        "inner_steps, batch, seq_len, seed, created_unix, deadline_unix, heartbeat_unix, "
        "tokens_per_second, state) VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'assigned')");
    if (!ins)
        return internalError(ins.error().message);
    ins->bind(1, c.runId)
        .bind(2, clientId)
        .bind(3, c.version)
        .bind(4, offset)
        .bind(5, length)
        .bind(6, H)
        .bind(7, c.run.batch)
        .bind(8, c.run.seqLen)
        .bind(9, static_cast<int64_t>(seed))
        .bind(10, now)
        .bind(11, deadline)
        .bind(12, now)
        .bind(13, req->tokensPerSecond);
    if (auto st = ins->run(); !st)
        return internalError(st.error().message);
    const int64_t wuId = c.db.lastInsertId();

    net::Manifest m;
    m.workUnitId = wuId;
    m.runId = c.runId;
    m.baseVersion = c.version;
    m.model = c.run.model;
    const ServedFile& wf = c.weightFiles.at(c.version);
    m.weightsUrl = "/v1/runs/" + std::to_string(c.runId) + "/weights/" + std::to_string(c.version);
    m.weightsSha256 = wf.sha256;
    m.weightsBytes = wf.bytes;
    m.dataUrl = "/v1/runs/" + std::to_string(c.runId) + "/data/0";
    m.dataShard = 0;
    m.dataOffset = offset;
    m.dataLength = length;
    m.dataSha256 = net::sha256(std::span<const uint8_t>(c.train).subspan(
        static_cast<size_t>(offset), static_cast<size_t>(length)));
    m.innerSteps = H;
    m.batch = c.run.batch;
    m.seqLen = c.run.seqLen;
    m.lr = c.run.lrSchedule();
    m.lrStartStep = c.version * c.run.innerSteps;
    m.seed = seed;
    m.deadlineUnix = deadline;
    m.heartbeatSeconds = c.cfg.heartbeatSeconds;
    m.uploadUrl = "/v1/results/" + std::to_string(wuId);
    m.maxUploadBytes = maxUploadBytes();
    m.sign(c.key);

    auto upd = c.db.prepare("UPDATE work_units SET manifest_json = ? WHERE id = ?");
    if (!upd)
        return internalError(upd.error().message);
    upd->bind(1, m.toJson()).bind(2, wuId);
    if (auto st = upd->run(); !st)
        return internalError(st.error().message);
    if (reusedFrom != 0) {
        auto r = c.db.prepare("UPDATE work_units SET reassigned = 1 WHERE id = ?");
        if (!r)
            return internalError(r.error().message);
        r->bind(1, reusedFrom);
        if (auto st = r->run(); !st)
            return internalError(st.error().message);
    } else {
        auto r = c.db.prepare("UPDATE runs SET data_cursor = ? WHERE id = ?");
        auto r2 =
            c.db.prepare("UPDATE rounds SET assigned_bytes = ? WHERE run_id = ? AND round = ?");
        if (!r || !r2)
            return internalError("cannot prepare the cursor update");
        r->bind(1, cursor).bind(2, c.runId);
        r2->bind(1, span).bind(2, c.runId).bind(3, c.version);
        if (auto st = r->run(); !st)
            return internalError(st.error().message);
        if (auto st = r2->run(); !st)
            return internalError(st.error().message);
    }
    if (auto st = tx.commit(); !st)
        return internalError(st.error().message);
    c.log("work unit " + std::to_string(wuId) + " -> client " + std::to_string(clientId) +
          ": version " + std::to_string(c.version) + ", H=" + std::to_string(H) + ", bytes [" +
          std::to_string(offset) + ", " + std::to_string(offset + length) + ")" +
          (reusedFrom ? " (reassigned from work unit " + std::to_string(reusedFrom) + ")" : ""));
    WorkOffer offer;
    offer.manifest = std::move(m);
    return offer;
}

Outcome<net::ProgressReply> Coordinator::progress(int64_t clientId, int64_t workUnitId,
                                                  std::string_view body) {
    auto rep = net::ProgressReport::fromJson(body);
    if (!rep)
        return refuse(400, "bad_request", rep.error().message);
    Impl& c = *m_impl;
    std::lock_guard lock(c.mu);
    auto q = c.db.prepare(
        "SELECT client_id, state, base_version, COALESCE(abandon_reason, '') FROM work_units "
        "WHERE id = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, workUnitId);
    if (auto r = stepOwnWorkUnit(*q, workUnitId, clientId))
        return *r;
    const std::string state = q->text(1);
    const int64_t base = q->integer(2);
    const std::string reason = q->text(3);
    net::ProgressReply reply;
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
    if (c.version - base > c.cfg.maxStaleness) {
        reply.action = "abandon";
        reply.reason = "the run is at version " + std::to_string(c.version) +
                       "; results based on version " + std::to_string(base) +
                       " are no longer accepted (staleness bound " +
                       std::to_string(c.cfg.maxStaleness) + ")";
        (void)abandonWorkUnit(c.db, c.runId, workUnitId, reply.reason);
        return reply;
    }
    auto upd = c.db.prepare(
        "UPDATE work_units SET heartbeat_unix = ?, last_step = ?, last_loss = ?, "
        "tokens_per_second = ? WHERE id = ?");
    if (!upd)
        return internalError(upd.error().message);
    upd->bind(1, c.now())
        .bind(2, rep->step)
        .bind(3, static_cast<double>(rep->loss))
        .bind(4, rep->tokensPerSecond)
        .bind(5, workUnitId);
    if (auto st = upd->run(); !st)
        return internalError(st.error().message);
    return reply;
}

}  // namespace tandem::coord
