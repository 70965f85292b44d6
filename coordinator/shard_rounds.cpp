// Rounds of a sharded run (issue 16; docs/protocol.md, "Sharded runs"): K processes on one
// PostgreSQL database, shard k taking the pieces of range k. A round closes in two phases:
//   1. the clock holder (round_clock.hpp) marks round r closing (rounds.closing_unix) once its
//      quorum or deadline is met;
//   2. each shard, at its next tick, drains its range's sum, applies the outer step to its range
//      (outerStepOfRound with its offset: element-wise, so bit for bit the whole vector's
//      values there), writes its parts of version r + 1 (part_file.hpp) and records the weights
//      part in round_parts; its later pieces go to round r + 1 (pieceRound);
//   3. every shard, once all K parts are recorded, fetches the others' parts from their
//      /blobs/ and writes the whole weights of r + 1 (the same bytes everywhere);
//   4. the clock holder commits version r + 1 (the compare-and-set of a one-process close) and
//      every shard follows it.
// Each step reads what it needs from the database and the shard's own files, so any process
// may die between any two of them: a restart (restoreShard) finds where its shard stands.
//
// Dimensions: P parameters, N values of this shard's range.
#include "coordinator_impl.hpp"

#include "part_file.hpp"
#include "rounds.hpp"

#include "checkpoint.hpp"
#include "file_io.hpp"

#include <httplib.h>

#include <algorithm>

namespace tandem::coord {

namespace {

std::string hexOf(const net::Sha256Digest& d) {
    return net::toHex(d);
}

}  // namespace

Status Coordinator::Impl::readShardUrls() {
    auto q = db.prepareCached("SELECT shard, url FROM shard_processes WHERE run_id = ?");
    if (!q)
        return q.error();
    q->bind(1, runId);
    std::map<int, std::string> urls;
    while (q->step())
        urls[static_cast<int>(q->integer(0))] = q->text(1);
    if (auto st = q->status(); !st)
        return st;
    shardUrls = std::move(urls);
    return {};
}

Expected<std::vector<uint8_t>> Coordinator::Impl::fetchShardBlob(const std::string& url) {
    if (cfg.fetchShardBlob)
        return cfg.fetchShardBlob(url);
    // https://host:port/blobs/sha256/<hex>. The shards serve with the run's one TLS identity
    // (docs/operations.md, "Aggregation shards"): its certificate is the trust anchor; with an
    // operator's certificate (no tls/cert.pem here), the system's CAs.
    const size_t slash = url.find('/', 8);
    if (url.rfind("https://", 0) != 0 || slash == std::string::npos)
        return makeError("not an https:// URL of a blob: " + url);
    httplib::Client client(url.substr(0, slash));
    client.enable_server_certificate_verification(true);
    std::error_code ec;
    if (const auto cert = dirs.root() / "tls" / "cert.pem"; fs::exists(cert, ec))
        client.set_ca_cert_path(cert.c_str());
    client.set_connection_timeout(15, 0);
    client.set_read_timeout(120, 0);
    auto res = client.Get(url.substr(slash));
    if (!res)
        return makeError(url + ": " + httplib::to_string(res.error()));
    if (res->status != 200)
        return makeError(url + ": HTTP " + std::to_string(res->status));
    return std::vector<uint8_t>(res->body.begin(), res->body.end());
}

Status Coordinator::Impl::restoreShard() {
    if (cfg.role != CoordinatorRole::All)
        return makeError("a sharded run's shard runs with --role all");
    if (db.backend() != storage::Backend::Postgres)
        return makeError(
            "a run of " + std::to_string(run.shards) +
            " aggregation shards keeps its state in PostgreSQL (--db postgresql://...)");
    if (cfg.shard < 0 || cfg.shard >= run.shards)
        return makeError("--shard " + std::to_string(cfg.shard) + ": this run has " +
                         std::to_string(run.shards) + " shards, numbered 0 to " +
                         std::to_string(run.shards - 1));
    if (auto st = checkUploadBase(cfg.publicUrl); !st)
        return makeError(
            "a shard needs --public-url https://host:port, where workers and the "
            "other shards reach it: " +
            st.error().message);
    if (cfg.replicateFraction > 0 || cfg.minCosine > -1)
        return makeError(
            "replication spot-checks (--replicate-fraction) and the direction check "
            "(--min-cosine) compare whole results; a sharded run takes neither");
    ownRange = net::pieceRanges(P, run.shards)[static_cast<size_t>(cfg.shard)];
    const int64_t n = ownRange.end - ownRange.begin;
    {
        auto u = db.prepare(
            "INSERT INTO shard_processes(run_id, shard, url, started_unix) VALUES (?, ?, ?, ?) ON "
            "CONFLICT (run_id, shard) DO UPDATE SET url = excluded.url, started_unix = "
            "excluded.started_unix");
        if (!u)
            return u.error();
        u->bind(1, runId).bind(2, int64_t{cfg.shard}).bind(3, cfg.publicUrl).bind(4, now());
        if (auto st = u->run(); !st)
            return st;
    }
    (void)readShardUrls();
    // Whether this shard stepped the open round already: its part of the next version is
    // recorded. Parts on disk without their row are from a step that died before recording it;
    // the step is made again (the same bytes).
    bool stepped = false;
    {
        auto q = db.prepare(
            "SELECT weights_sha256 FROM round_parts WHERE run_id = ? AND version = ? AND shard = "
            "?");
        if (!q)
            return q.error();
        q->bind(1, runId).bind(2, version + 1).bind(3, int64_t{cfg.shard});
        stepped = q->step();
        if (auto st = q->status(); !st)
            return st;
    }
    std::error_code ec;
    if (!stepped) {
        fs::remove(dirs.weightsPart(version + 1), ec);
        fs::remove(dirs.momentumPart(version + 1), ec);
    }
    pieceRound = stepped ? version + 1 : version;
    if (fs::exists(dirs.momentumPart(pieceRound), ec)) {
        auto m =
            loadPart(dirs.momentumPart(pieceRound), PartKind::Momentum, pieceRound, P, ownRange);
        if (!m)
            return makeError("momentum of this shard: " + m.error().message);
        vel = std::move(m->values);
    } else if (pieceRound == 0) {
        vel.assign(static_cast<size_t>(n), 0.0f);  // a new run: no momentum yet
    } else {
        return makeError("this shard's momentum of version " + std::to_string(pieceRound) +
                         " is missing (" + dirs.momentumPart(pieceRound).string() +
                         "); the state directory is damaged");
    }
    for (int64_t v : {version, version + 1}) {
        if (!fs::exists(dirs.weightsPart(v), ec))
            continue;
        auto h = net::sha256File(dirs.weightsPart(v));
        if (!h)
            return h.error();
        partFiles[v] = ServedFile{dirs.weightsPart(v), h->bytes, h->digest};
        if (auto st = dirs.blobs().publish(dirs.weightsPart(v), h->digest); !st)
            return st;
    }
    // The sum of the round the pieces go into, from its pieces in acceptance order.
    sum.assign(static_cast<size_t>(n), 0.0f);
    auto q = db.prepare(
        "SELECT work_unit_id, weight, payload_sha256 FROM result_pieces WHERE shard = ? AND "
        "round = ? ORDER BY seq");
    if (!q)
        return q.error();
    q->bind(1, int64_t{cfg.shard}).bind(2, pieceRound);
    int count = 0;
    while (q->step()) {
        const int64_t wu = q->integer(0);
        if (auto st =
                accumulatePayload(sum, dirs.payload(pieceRound, wu), run.resultEncoding,
                                  static_cast<float>(q->real(1)), toDigest(q->blob(2)), &pool);
            !st)
            return makeError("accepted piece of work unit " + std::to_string(wu) + ": " +
                             st.error().message + "; the state directory is damaged");
        ++count;
    }
    if (auto st = q->status(); !st)
        return st;
    log("shard " + std::to_string(cfg.shard) + " of " + std::to_string(run.shards) +
        ": parameters [" + std::to_string(ownRange.begin) + ", " + std::to_string(ownRange.end) +
        "), pieces go to round " + std::to_string(pieceRound) +
        (count > 0 ? " (" + std::to_string(count) + " re-added to its sum)" : std::string()));
    return {};
}

Status Coordinator::Impl::fetchVersionWeights(std::unique_lock<std::mutex>& lock, int64_t v) {
    std::optional<net::Sha256Digest> sha;
    {
        auto q = db.prepare("SELECT weights_sha256 FROM rounds WHERE run_id = ? AND round = ?");
        if (!q)
            return q.error();
        q->bind(1, runId).bind(2, v);
        if (q->step() && !q->isNull(0))
            if (auto d = net::fromHex(q->text(0)); d && d->size() == 32)
                sha = toDigest(*d);
    }
    if (!sha)
        return makeError("the weights of version " + std::to_string(v) +
                         " are not recorded in the database yet");
    (void)readShardUrls();
    const auto urls = shardUrls;
    std::string why;
    lock.unlock();
    std::optional<std::vector<uint8_t>> got;
    for (const auto& [k, url] : urls) {
        if (k == cfg.shard)
            continue;
        auto bytes = fetchShardBlob(url + blobUrlPath(*sha));
        if (bytes && net::sha256(*bytes) == *sha) {
            got = std::move(*bytes);
            break;
        }
        why +=
            "; shard " + std::to_string(k) + ": " +
            (bytes ? std::string("the bytes do not match their SHA-256") : bytes.error().message);
    }
    Status st;
    if (!got)
        st = makeError("no shard gave the weights of version " + std::to_string(v) + why);
    else if (auto ck = parseCheckpoint(*got); !ck || !(ck->config == run.model))
        st = makeError("the weights of version " + std::to_string(v) +
                       " fetched from a shard are "
                       "not a checkpoint of " +
                       run.model.describe());
    else if (auto w = writeFileAtomically(dirs.weights(v), *got); !w)
        st = w;
    else
        st = dirs.blobs().publish(dirs.weights(v), *sha);
    lock.lock();
    if (st)
        log("fetched the weights of version " + std::to_string(v) + " from another shard");
    return st;
}

Status Coordinator::Impl::markClosing() {
    const int64_t r = version;
    int64_t units = 0, deadline = 0;
    bool marked = false;
    {
        auto q = db.prepare(
            "SELECT deadline_unix, closing_unix IS NOT NULL FROM rounds WHERE run_id = ? AND "
            "round = ?");
        if (!q)
            return q.error();
        q->bind(1, runId).bind(2, r);
        if (!q->step())
            return q->status() ? makeError("round " + std::to_string(r) + " is missing")
                               : q->status();
        deadline = q->integer(0);
        marked = q->integer(1) != 0;
    }
    if (marked)
        return {};
    {
        // The results that reached the round: units with a piece in it at any shard.
        auto q = db.prepare(
            "SELECT COUNT(DISTINCT p.work_unit_id) FROM result_pieces p JOIN work_units w ON w.id "
            "= p.work_unit_id WHERE w.run_id = ? AND p.round = ?");
        if (!q)
            return q.error();
        q->bind(1, runId).bind(2, r);
        if (q->step())
            units = q->integer(0);
    }
    const int64_t needed = roundQuorum();
    const bool due = now() >= deadline;
    if (units == 0 && due) {
        auto u = db.prepare("UPDATE rounds SET deadline_unix = ? WHERE run_id = ? AND round = ?");
        if (u)
            (void)u->bind(1, now() + cfg.roundTimeoutSeconds).bind(2, runId).bind(3, r).run();
        return {};
    }
    if (units == 0 || (units < needed && !due))
        return {};
    auto u = db.prepare(
        "UPDATE rounds SET closing_unix = ? WHERE run_id = ? AND round = ? AND closing_unix IS "
        "NULL");
    if (!u)
        return u.error();
    if (auto st = u->bind(1, now()).bind(2, runId).bind(3, r).run(); !st)
        return st;
    log("round " + std::to_string(r) + " closing: " + std::to_string(units) + " of " +
        std::to_string(needed) + " results" + (units < needed ? " at its deadline" : "") +
        "; each shard steps its range");
    return {};
}

Status Coordinator::Impl::stepShard(std::unique_lock<std::mutex>& lock) {
    const int64_t r = version;
    double weightSum = 0;
    int64_t pieces = 0;
    std::vector<LateResults> late;
    {
        // In acceptance order: the weight sum adds up as a one-process round's does, and the
        // late pieces' weights by their base version.
        auto q = db.prepare(
            "SELECT p.weight, w.base_version FROM result_pieces p JOIN work_units w ON w.id = "
            "p.work_unit_id WHERE w.run_id = ? AND p.shard = ? AND p.round = ? ORDER BY p.seq");
        if (!q)
            return q.error();
        q->bind(1, runId).bind(2, int64_t{cfg.shard}).bind(3, r);
        std::map<int64_t, double> lateByBase;
        while (q->step()) {
            ++pieces;
            weightSum += q->real(0);
            if (q->integer(1) < r)
                lateByBase[q->integer(1)] += q->real(0);
        }
        if (auto st = q->status(); !st)
            return st;
        for (const auto& [base, weight] : lateByBase)
            late.push_back({base, weight});
    }
    closing = true;
    lock.unlock();
    if (cfg.testBeforeClose)
        cfg.testBeforeClose(r);
    const auto n = static_cast<size_t>(ownRange.end - ownRange.begin);
    const auto mine = std::span<const float>(theta).subspan(static_cast<size_t>(ownRange.begin), n);
    Status summed = aggregator->drain();
    // A range no piece reached keeps its weights and momentum: a dropped upload for it.
    Expected<NextVersion> next =
        !summed      ? Expected<NextVersion>(summed.error())
        : pieces > 0 ? outerStepOfRound(dirs, run.model, mine, vel, sum, weightSum, late, cfg.outer,
                                        &pool, {}, WeightDeltaCodec::Off, ownRange.begin)
                     : Expected<NextVersion>(NextVersion{{mine.begin(), mine.end()}, vel, {}, {}});
    Expected<ServedFile> part(makeError("not written"));
    if (next) {
        PartFile w{PartKind::Weights, r + 1, P, ownRange, std::move(next->theta)};
        PartFile m{PartKind::Momentum, r + 1, P, ownRange, next->velocity};
        const auto bytes = serializePart(w);
        if (auto st = writeFileAtomically(dirs.momentumPart(r + 1), serializePart(m)); !st)
            part = st.error();
        else if (auto st2 = writeFileAtomically(dirs.weightsPart(r + 1), bytes); !st2)
            part = st2.error();
        else {
            ServedFile f{dirs.weightsPart(r + 1), static_cast<int64_t>(bytes.size()),
                         net::sha256(bytes)};
            if (auto st3 = dirs.blobs().publish(f.path, f.sha256); !st3)
                part = st3.error();
            else
                part = f;
        }
    } else {
        part = next.error();
    }
    lock.lock();
    closing = false;
    closeCv.notify_all();
    if (!part)
        return makeError("stepping round " + std::to_string(r) +
                         " of this shard's range: " + part.error().message);
    auto ins = db.prepare(
        "INSERT INTO round_parts(run_id, version, shard, weights_sha256, weights_bytes, pieces, "
        "weight_sum, created_unix) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    if (!ins)
        return ins.error();
    ins->bind(1, runId)
        .bind(2, r + 1)
        .bind(3, int64_t{cfg.shard})
        .bind(4, hexOf(part->sha256))
        .bind(5, part->bytes)
        .bind(6, pieces)
        .bind(7, weightSum)
        .bind(8, now());
    if (auto st = ins->run(); !st)
        return st;
    vel = std::move(next->velocity);
    std::fill(sum.begin(), sum.end(), 0.0f);
    pieceRound = r + 1;
    partFiles[r + 1] = *part;
    log("round " + std::to_string(r) + ": shard " + std::to_string(cfg.shard) + " stepped its " +
        std::to_string(n) + " parameters (" + std::to_string(pieces) + " piece(s), weight " +
        fmt(weightSum, 8) + (late.empty() ? "" : ", late pieces re-based") + ")");
    return {};
}

Status Coordinator::Impl::assembleVersion(std::unique_lock<std::mutex>& lock, int64_t v) {
    struct Part {
        int shard = 0;
        net::Sha256Digest sha{};
    };
    std::vector<Part> parts;
    {
        auto q = db.prepare(
            "SELECT shard, weights_sha256 FROM round_parts WHERE run_id = ? AND version = ? ORDER "
            "BY shard");
        if (!q)
            return q.error();
        q->bind(1, runId).bind(2, v);
        while (q->step()) {
            auto d = net::fromHex(q->text(1));
            if (!d || d->size() != 32)
                return makeError("round_parts: a malformed SHA-256");
            parts.push_back({static_cast<int>(q->integer(0)), toDigest(*d)});
        }
        if (auto st = q->status(); !st)
            return st;
    }
    if (static_cast<int>(parts.size()) < run.shards)
        return {};  // not all parts are in yet
    (void)readShardUrls();
    const auto urls = shardUrls;
    const auto ranges = net::pieceRanges(P, run.shards);
    lock.unlock();
    std::vector<float> whole(static_cast<size_t>(P));
    Status st;
    for (const Part& p : parts) {
        Expected<std::vector<uint8_t>> bytes(makeError("no address"));
        if (p.shard == cfg.shard)
            bytes = readFile(dirs.weightsPart(v));
        else if (auto it = urls.find(p.shard); it != urls.end())
            bytes = fetchShardBlob(it->second + blobUrlPath(p.sha));
        else
            bytes = makeError("shard " + std::to_string(p.shard) + " has no address recorded");
        if (bytes && net::sha256(*bytes) != p.sha)
            bytes = makeError("its bytes do not match the SHA-256 recorded for it");
        auto part = bytes ? parsePartOf(*bytes, PartKind::Weights, v, P,
                                        ranges[static_cast<size_t>(p.shard)])
                          : Expected<PartFile>(bytes.error());
        if (!part) {
            st = makeError("part " + std::to_string(p.shard) + " of version " + std::to_string(v) +
                           ": " + part.error().message);
            break;
        }
        std::copy(part->values.begin(), part->values.end(),
                  whole.begin() + static_cast<ptrdiff_t>(part->range.begin));
    }
    Expected<ServedFile> file =
        st ? dirs.publishWeights(v, run.model, whole) : Expected<ServedFile>(st.error());
    lock.lock();
    if (!file)
        return file.error();
    assembled = *file;
    return {};
}

Status Coordinator::Impl::commitShardedVersion() {
    const int64_t r = version;
    if (!assembled)
        return makeError("version " + std::to_string(r + 1) + " is not assembled");
    const int64_t t = now();
    bool won = true;
    Transaction tx(db);
    if (!tx.started())
        return tx.started();
    auto d = db.prepare("UPDATE runs SET version = ? WHERE id = ? AND version = ?");
    // The round's figures from the results whose first piece landed in it.
    auto a = db.prepare(
        "UPDATE rounds SET closed_unix = ?, contributors = (SELECT COUNT(*) FROM results s JOIN "
        "work_units w ON w.id = s.work_unit_id WHERE w.run_id = ? AND s.round = ?), tokens = "
        "(SELECT COALESCE(SUM(s.tokens), 0) FROM results s JOIN work_units w ON w.id = "
        "s.work_unit_id WHERE w.run_id = ? AND s.round = ?), weight_sum = (SELECT "
        "COALESCE(SUM(s.weight), 0) FROM results s JOIN work_units w ON w.id = s.work_unit_id "
        "WHERE w.run_id = ? AND s.round = ?) WHERE run_id = ? AND round = ? AND closed_unix IS "
        "NULL AND closing_unix IS NOT NULL");
    // With the results whose first piece landed in it early (at a shard that had stepped);
    // piece commits hold the run's row FOR SHARE (piece_intake.cpp), so none is in between.
    auto b = db.prepare(
        "INSERT INTO rounds(run_id, round, opened_unix, deadline_unix, weights_sha256, "
        "weights_bytes, contributors, tokens, weight_sum) SELECT ?, ?, ?, ?, ?, ?, COUNT(*), "
        "COALESCE(SUM(s.tokens), 0), COALESCE(SUM(s.weight), 0) FROM results s JOIN work_units w "
        "ON w.id = s.work_unit_id WHERE w.run_id = ? AND s.round = ?");
    if (!a || !b || !d)
        return makeError("cannot prepare the commit of version " + std::to_string(r + 1));
    d->bind(1, r + 1).bind(2, runId).bind(3, r);
    a->bind(1, t).bind(2, runId).bind(3, r).bind(4, runId).bind(5, r).bind(6, runId).bind(7, r);
    a->bind(8, runId).bind(9, r);
    b->bind(1, runId).bind(2, r + 1).bind(3, t).bind(4, t + cfg.roundTimeoutSeconds);
    b->bind(5, hexOf(assembled->sha256)).bind(6, assembled->bytes).bind(7, runId).bind(8, r + 1);
    for (Statement* st : {&*d, &*a}) {
        if (auto s = st->run(); !s)
            return s;
        won = won && db.changes() == 1;
    }
    if (!won)
        return {};  // another clock holder committed it: followed at the next tick
    if (auto s = b->run(); !s)
        return s;
    if (auto stale = abandonStaleAndCommit(tx, r + 1); !stale)
        return stale.error();
    log("version " + std::to_string(r + 1) + " committed from " + std::to_string(run.shards) +
        " shards' parts");
    return {};
}

Status Coordinator::Impl::adoptVersion(std::unique_lock<std::mutex>& lock) {
    int64_t v = version;
    {
        auto q = db.prepareCached("SELECT version FROM runs WHERE id = ?");
        if (!q)
            return q.error();
        q->bind(1, runId);
        if (q->step())
            v = q->integer(0);
    }
    if (v <= version)
        return {};
    if (v != version + 1 || pieceRound != v)
        return makeError("the run is at version " + std::to_string(v) + " but this shard's range " +
                         "is at round " + std::to_string(pieceRound) +
                         "; restart it to follow the database");
    std::error_code ec;
    if (!assembled && !fs::exists(dirs.weights(v), ec))
        if (auto st = assembleVersion(lock, v); !st)
            return st;
    auto w = loadCheckpoint(dirs.weights(v), run.model);
    if (!w)
        return makeError("weights of version " + std::to_string(v) + ": " + w.error().message);
    auto h = net::sha256File(dirs.weights(v));
    if (!h)
        return h.error();
    theta = std::move(w->parameters);
    version = v;
    assembled.reset();
    weightFiles[v] = ServedFile{dirs.weights(v), h->bytes, h->digest};
    while (!weightFiles.empty() && weightFiles.begin()->first < version - cfg.maxStaleness)
        weightFiles.erase(weightFiles.begin());
    while (!partFiles.empty() && partFiles.begin()->first < version - cfg.maxStaleness)
        partFiles.erase(partFiles.begin());
    metrics.countRoundClosed(0);
    cleanStaleFiles(false);
    if (roundClockHeld) {  // the clock holder evaluates each version once
        evalQueue.push_back(EvalJob{v - 1, theta});
        evalCv.notify_all();
    }
    log("following the run to version " + std::to_string(v));
    return {};
}

void Coordinator::Impl::shardTick(std::unique_lock<std::mutex>& lock, bool clock) {
    auto report = [&](const Status& st, const char* what) {
        if (!st)
            log(std::string("error: ") + what + ": " + st.error().message);
        return static_cast<bool>(st);
    };
    if (!report(adoptVersion(lock), "following the run's version"))
        return;
    if (clock && pieceRound == version && !report(markClosing(), "closing the round"))
        return;
    if (pieceRound == version) {
        auto q = db.prepare(
            "SELECT closing_unix IS NOT NULL FROM rounds WHERE run_id = ? AND round = ?");
        if (!q)
            return;
        q->bind(1, runId).bind(2, version);
        if (!q->step() || q->integer(0) == 0)
            return;
        if (!report(stepShard(lock), "stepping this shard's range"))
            return;
    }
    if (!assembled && !report(assembleVersion(lock, version + 1), "assembling the next version"))
        return;
    if (clock && assembled) {
        if (report(commitShardedVersion(), "committing the next version"))
            report(adoptVersion(lock), "following the run's version");
    }
}

}  // namespace tandem::coord
