// Several coordinator processes on one PostgreSQL database (issue 16, item 2, K = 1): what a
// front end (CoordinatorRole::Front) does instead of the aggregating process's start and ticker,
// and what the aggregating process does for it. A front end holds no round sum and closes no
// round: it follows the run's version in the database, names the version's files from the rows
// the aggregating process writes (recordVersionFiles), writes the liveness it receives every
// second, and the clock holder reads that before it times a unit out (mergeDatabaseLiveness).
#include "coordinator_impl.hpp"

#include "safe_text.hpp"

#include <cctype>

namespace tandem::coord {

namespace {

std::optional<ServedFile> fileOfRow(Statement& q, int shaColumn, int bytesColumn) {
    if (q.isNull(shaColumn))
        return std::nullopt;
    auto digest = net::fromHex(q.text(shaColumn));
    if (!digest || digest->size() != net::Sha256Digest{}.size())
        return std::nullopt;
    ServedFile f;  // no path: the bytes are the aggregating process's (and its mirrors')
    std::copy(digest->begin(), digest->end(), f.sha256.begin());
    f.bytes = q.integer(bytesColumn);
    return f;
}

}  // namespace

Status checkUploadBase(const std::string& url) {
    const auto bad = [&](const std::string& why) {
        return makeError("--upload-base '" + net::quotable(url) + "': " + why);
    };
    if (url.empty())
        return makeError(
            "--role front needs --upload-base https://host:port, the aggregating process's "
            "address, where its manifests send uploads and weight downloads");
    if (url.rfind("https://", 0) != 0)
        return bad("an https:// URL (workers reach the coordinator over verified TLS only)");
    const std::string rest = url.substr(8);
    if (rest.empty() || url.size() > 200)
        return bad("no host name, or longer than 200 characters");
    for (char c : rest)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' &&
            c != '[' && c != ']')
            return bad(std::string("the character '") + c +
                       "' does not belong in it: only https://host:port (the paths are appended)");
    return {};
}

std::vector<std::string> Coordinator::Impl::weightBlobUrls(const net::Sha256Digest& digest) const {
    std::vector<std::string> urls = blobUrls(digest, cfg.mirrors);
    if (sharded()) {
        // Every shard holds the whole weights of a committed version (shard_rounds.cpp).
        std::vector<std::string> all;
        for (const auto& [k, url] : shardUrls)
            all.push_back(url + urls.front());
        for (size_t i = 1; i < urls.size() && all.size() < net::kMaxBlobUrls; ++i)
            all.push_back(urls[i]);
        all.resize(std::min(all.size(), net::kMaxBlobUrls));
        return all;
    }
    if (frontEnd())
        urls.front() = cfg.uploadBase + urls.front();
    return urls;
}

Status Coordinator::Impl::recordVersionFiles() {
    Transaction tx(db, "recording the versions' files");
    if (!tx.started())
        return tx.started();
    for (const auto& [ver, file] : weightFiles) {
        auto u = db.prepare(
            "UPDATE rounds SET weights_sha256 = ?, weights_bytes = ? WHERE run_id = ? AND round = "
            "?");
        if (!u)
            return u.error();
        u->bind(1, net::toHex(file.sha256)).bind(2, file.bytes).bind(3, runId).bind(4, ver);
        if (auto st = u->run(); !st)
            return st;
    }
    for (const auto& [ver, file] : deltaFiles) {
        auto u = db.prepare(
            "UPDATE rounds SET delta_sha256 = ?, delta_bytes = ? WHERE run_id = ? AND round = ?");
        if (!u)
            return u.error();
        u->bind(1, net::toHex(file.sha256)).bind(2, file.bytes).bind(3, runId).bind(4, ver);
        if (auto st = u->run(); !st)
            return st;
    }
    return tx.commit();
}

Status Coordinator::Impl::restoreFront() {
    std::lock_guard lock(mu);
    auto stored = readRunRow(
        "the database holds no run yet: start the aggregating process (--role all) first; a "
        "front end never creates a run");
    if (!stored)
        return stored.error();
    // The manifests name a unit's data by its SHA-256, so a front end reads the run's train
    // data: data/ copied from the aggregating process's state directory (or, for llm.c shards
    // given by path, the same paths on this machine).
    auto opened = openTrainData(*stored);
    if (!opened)
        return makeError(opened.error().message +
                         " (a front end needs the run's data: copy data/ from the aggregating "
                         "process's state directory, docs/operations.md)");
    data = std::move(*opened);
    // The train shards as blobs of this process: data comes from the front end itself.
    for (const TrainShard& shard : data.train())
        if (auto st = dirs.blobs().publish(shard.file.path, shard.file.sha256); !st)
            return st;
    startedUnix = livenessWrittenUnix = now();
    if (auto st = syncVersion(); !st)
        return st;
    log("front end of run " + std::to_string(runId) + ": model " + run.model.describe() +
        ", version " + std::to_string(version) + "; uploads and weights at " + cfg.uploadBase);
    return {};
}

Status Coordinator::Impl::syncVersion() {
    int64_t v = 0, contributors = 0;
    {
        auto q = db.prepareCached(
            "SELECT r.version, d.contributors FROM runs r JOIN rounds d ON d.run_id = r.id AND "
            "d.round = r.version WHERE r.id = ?");
        if (!q)
            return q.error();
        q->bind(1, runId);
        if (!q->step())
            return q->status() ? makeError("the run's open round is missing") : q->status();
        v = q->integer(0);
        contributors = q->integer(1);
    }
    // The board's totals and the page change with every result the aggregating process takes.
    if (v != version || contributors != frontContributors)
        board.invalidate();
    frontContributors = contributors;
    if (v == version && weightFiles.count(v))
        return {};
    auto files = db.prepare(
        "SELECT round, weights_sha256, weights_bytes, delta_sha256, delta_bytes FROM rounds "
        "WHERE run_id = ? AND round > ? AND round <= ? ORDER BY round");
    if (!files)
        return files.error();
    files->bind(1, runId).bind(2, v - kKeptWeightDeltas - cfg.maxStaleness).bind(3, v);
    weightFiles.clear();
    deltaFiles.clear();
    while (files->step()) {
        const int64_t ver = files->integer(0);
        if (auto w = fileOfRow(*files, 1, 2); w && ver >= v - cfg.maxStaleness)
            weightFiles[ver] = *w;
        if (auto d = fileOfRow(*files, 3, 4))
            deltaFiles[ver] = *d;
    }
    if (!files->status())
        return files->status();
    if (v != version)
        log("following the run to version " + std::to_string(v));
    version = v;
    return {};
}

void Coordinator::Impl::frontTick() {
    if (auto st = syncVersion(); !st)
        log("error: reading the run's version: " + st.error().message);
    // What the other processes heard, for the status's active workers and GET /v1/work.
    mergeDatabaseLiveness();
    // Within a second in the database, where the clock holder reads it (mergeDatabaseLiveness).
    if (now() - livenessWrittenUnix >= kFrontLivenessFlushSeconds)
        flushLiveness();
    // Units that ended elsewhere (accepted, abandoned by the clock holder) leave the table.
    if (now() - frontRetainedUnix >= kLivenessFlushSeconds) {
        frontRetainedUnix = now();
        auto q = db.prepare("SELECT id FROM work_units WHERE run_id = ? AND state = 'assigned'");
        if (!q)
            return;
        q->bind(1, runId);
        std::set<int64_t> assigned;
        while (q->step())
            assigned.insert(q->integer(0));
        if (q->status())
            liveness.retain(assigned);
    }
}

void Coordinator::Impl::mergeDatabaseLiveness() {
    auto q = db.prepareCached(
        "SELECT id, client_id, inner_steps, heartbeat_unix, last_step, last_loss, "
        "tokens_per_second FROM work_units WHERE run_id = ? AND state = 'assigned'");
    if (!q)
        return;
    q->bind(1, runId);
    while (q->step()) {
        const int64_t id = q->integer(0), heartbeat = q->integer(3);
        const UnitPulse* p = liveness.find(id);
        if (p && p->heartbeatUnix >= heartbeat)
            continue;
        std::optional<UnitReport> reported;
        if (!q->isNull(5))
            reported = UnitReport{q->integer(4), q->real(5), q->real(6)};
        liveness.merge(id, q->integer(1), q->integer(2), heartbeat, reported);
    }
}

}  // namespace tandem::coord
