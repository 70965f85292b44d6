// Run set-up: creating the run on first start, restoring it (and the open round's sum) after.
#include "run_setup.hpp"

#include "run_data.hpp"

#include "coordinator_impl.hpp"

#include "checkpoint.hpp"
#include "corpus.hpp"
#include "crypto.hpp"
#include "file_io.hpp"
#include "model_files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>

namespace tandem::coord {

using nlohmann::json;

LrSchedule RunSettings::lrSchedule() const {
    return lrDecaySteps > 0
               ? LrSchedule{peakLr, minLr, lrWarmupSteps, lrDecaySteps}
               : LrSchedule{peakLr, peakLr, lrWarmupSteps, std::max<int64_t>(1, lrWarmupSteps)};
}

Expected<RunSettings> settingsForNewRun(const CoordinatorConfig& cfg,
                                        std::optional<int> vocabSize) {
    auto parsed = ModelConfig::parse(cfg.model);
    if (!parsed)
        return parsed.error();
    if (vocabSize)
        parsed->vocabSize = *vocabSize;
    if (auto st = parsed->validate(); !st)
        return st.error();
    RunSettings s;
    s.model = *parsed;
    s.seqLen = cfg.seqLen > 0 ? cfg.seqLen : s.model.maxSeqLen;
    if (s.seqLen > s.model.maxSeqLen)
        return makeError("sequence length " + std::to_string(s.seqLen) + " exceeds the model's " +
                         std::to_string(s.model.maxSeqLen));
    if (cfg.innerSteps < 1 || cfg.batch < 1)
        return makeError("inner steps and batch must be at least 1");
    s.innerSteps = cfg.innerSteps;
    s.minInnerSteps = cfg.minInnerSteps > 0 ? cfg.minInnerSteps : std::max(1, cfg.innerSteps / 10);
    s.batch = cfg.batch;
    s.peakLr = cfg.innerPeakLr;
    s.minLr = cfg.innerMinLr;
    s.lrWarmupSteps = cfg.lrWarmupSteps;
    s.lrDecaySteps = cfg.lrDecaySteps;
    s.seed = cfg.seed & ((uint64_t{1} << 53) - 1);
    s.resultEncoding = cfg.resultEncoding.value_or(cfg.newRunResultEncoding);
    s.weightDeltas = cfg.weightDeltas;
    s.shards = cfg.newRunShards;
    const int64_t blocks =
        (s.model.parameterCount() + net::kInt8ResultBlock - 1) / net::kInt8ResultBlock;
    if (s.shards < 1 || s.shards > net::kMaxShards || s.shards > blocks)
        return makeError("--shards " + std::to_string(s.shards) + ": a run has 1 to " +
                         std::to_string(std::min<int64_t>(net::kMaxShards, blocks)) +
                         " aggregation shards (" + s.model.describe() + " has " +
                         std::to_string(blocks) + " blocks of 256 parameters)");
    if (s.shards > 1 && s.weightDeltas != WeightDeltaCodec::Off)
        return makeError("--weight-deltas needs whole vectors at one process; a run of " +
                         std::to_string(s.shards) +
                         " aggregation shards moves by the outer step as it is (--weight-deltas "
                         "off)");
    return s;
}

std::string toJson(const RunSettings& s) {
    const ModelConfig& m = s.model;
    json config{{"model", m.describe()},
                {"layers", m.layers},
                {"heads", m.heads},
                {"channels", m.channels},
                {"max_seq_len", m.maxSeqLen},
                {"vocab_size", m.vocabSize},
                {"inner_steps", s.innerSteps},
                {"min_inner_steps", s.minInnerSteps},
                {"batch", s.batch},
                {"seq_len", s.seqLen},
                {"peak_lr", s.peakLr},
                {"min_lr", s.minLr},
                {"lr_warmup_steps", s.lrWarmupSteps},
                {"lr_decay_steps", s.lrDecaySteps},
                {"seed", s.seed},
                {"data", s.dataKind},
                {"result_encoding", net::encodingName(s.resultEncoding)},
                {"weight_deltas", weightDeltaCodecName(s.weightDeltas)},
                {"shards", s.shards}};
    return config.dump();
}

Expected<RunSettings> runSettingsFromJson(std::string_view text) {
    json c = json::parse(text, nullptr, false);
    if (c.is_discarded())
        return makeError("database: the run's configuration is not JSON");
    RunSettings s;
    s.model.layers = c.at("layers").get<int>();
    s.model.heads = c.at("heads").get<int>();
    s.model.channels = c.at("channels").get<int>();
    s.model.maxSeqLen = c.at("max_seq_len").get<int>();
    s.model.vocabSize = c.at("vocab_size").get<int>();
    s.innerSteps = c.at("inner_steps").get<int>();
    s.minInnerSteps = c.at("min_inner_steps").get<int>();
    s.batch = c.at("batch").get<int>();
    s.seqLen = c.at("seq_len").get<int>();
    s.peakLr = c.at("peak_lr").get<float>();
    s.minLr = c.at("min_lr").get<float>();
    // Runs created before the run-wide schedule: its defaults.
    s.lrWarmupSteps = c.value("lr_warmup_steps", int64_t{100});
    s.lrDecaySteps = c.value("lr_decay_steps", int64_t{0});
    s.seed = c.at("seed").get<uint64_t>();
    s.dataKind = c.value("data", std::string(kDataBytes));  // runs from before token corpora
    if (s.dataKind != kDataBytes && s.dataKind != kDataSentencePiece && s.dataKind != kDataLlmc)
        return makeError("database: the run's data kind '" + s.dataKind +
                         "' is unknown; use a newer tandem-coordinator");
    // Runs from before int8 results: fp16.
    const std::string encoding = c.value("result_encoding", std::string("fp16"));
    const auto known = net::encodingFromName(encoding);
    if (!known)
        return makeError("database: the run's result encoding '" + encoding +
                         "' is unknown; use a newer tandem-coordinator");
    s.resultEncoding = *known;
    const std::string deltas = c.value("weight_deltas", std::string("off"));
    auto codec = parseWeightDeltaCodec(deltas);
    if (!codec)
        return makeError("database: the run's weight deltas '" + deltas +
                         "' are unknown; use a newer tandem-coordinator");
    s.weightDeltas = *codec;
    s.shards = c.value("shards", 1);  // runs from before sharding: one process
    if (s.shards < 1 || s.shards > net::kMaxShards)
        return makeError("database: the run has " + std::to_string(s.shards) +
                         " aggregation shards; expected 1 to " + std::to_string(net::kMaxShards));
    return s;
}

Status Coordinator::Impl::createRun() {
    if (!pendingRun) {
        auto prepared = prepareNewRun(cfg);
        if (!prepared)
            return prepared.error();
        pendingRun = std::move(*prepared);
    }
    NewRun fresh = std::move(*pendingRun);
    pendingRun.reset();
    const RunSettings& settings = fresh.settings;
    const ModelConfig m = settings.model;
    // The starting weights before anything is written: a file that does not fit the model
    // stops the run's creation here.
    std::vector<float> init;
    if (!cfg.initWeights.empty()) {
        auto imported = importModel(cfg.initWeights, ParameterLayout(m));
        if (!imported)
            return makeError("--init: " + imported.error().message);
        init = std::move(*imported);
    }
    auto written = writeRunData(dirs, fresh.data);
    if (!written)
        return written.error();
    // Anything written before a failure is removed again: no half-made run.
    auto undo = [&](Status st) {
        std::error_code ec;
        for (const auto& f : written->files)
            fs::remove(f, ec);
        fs::remove(dirs.weights(0), ec);
        fs::remove(dirs.momentum(0), ec);
        fs::remove(dirs.residual(0), ec);
        return st;
    };
    const bool bytes = fresh.data.kind == kDataBytes;
    int64_t trainCount = 0, valCount = 0;
    if (bytes) {
        trainCount = static_cast<int64_t>(fresh.data.trainBytes.size());
        valCount = static_cast<int64_t>(fresh.data.valBytes.size());
    } else {
        for (const auto& r : written->rows)
            (r.split == "train" ? trainCount : valCount) += r.tokens;
    }
    const std::string trainSha =
        bytes ? net::toHex(net::sha256(fresh.data.trainBytes)) : trainFingerprint(written->rows);

    const int64_t count = m.parameterCount();
    if (init.empty()) {
        init.resize(static_cast<size_t>(count));
        initParameters(ParameterLayout(m), init, cfg.seed);
    }
    std::vector<float> zeros(static_cast<size_t>(count), 0.0f);
    const bool deltas = settings.weightDeltas != WeightDeltaCodec::Off;
    auto published = dirs.publish(0, m, init, zeros, deltas ? zeros : std::span<const float>{});
    if (!published)
        return undo(published.error());
    auto id = insertRun(settings, trainCount, trainSha, written->rows);
    if (!id)
        return undo(id.error());
    log("created run " + std::to_string(*id) + ": model " + m.describe() +
        (cfg.initWeights.empty() ? "" : ", weights from " + cfg.initWeights.string()) + ", " +
        std::to_string(count) + " parameters, " + std::to_string(trainCount) + " train " +
        (bytes ? "bytes, " : "tokens, ") + std::to_string(valCount) + " validation " +
        (bytes ? "bytes" : "tokens") + (bytes ? "" : " (" + fresh.data.kind + ")"));
    return {};
}

Expected<int64_t> Coordinator::Impl::insertRun(const RunSettings& settings, int64_t trainCount,
                                               const std::string& trainSha,
                                               std::span<const ShardRow> rows) {
    Transaction tx(db);
    if (!tx.started())
        return tx.started().error();
    auto ins = db.prepare(
        "INSERT INTO runs(config_json, version, data_cursor, train_bytes, train_sha256, "
        "created_unix) VALUES (?, 0, 0, ?, ?, ?)");
    if (!ins)
        return ins.error();
    ins->bind(1, toJson(settings)).bind(2, trainCount).bind(3, trainSha).bind(4, now());
    if (auto st = ins->run(); !st)
        return st.error();
    const int64_t id = db.lastInsertId();
    auto round = db.prepare(
        "INSERT INTO rounds(run_id, round, opened_unix, deadline_unix) VALUES (?, 0, ?, ?)");
    if (!round)
        return round.error();
    round->bind(1, id).bind(2, now()).bind(3, now() + cfg.roundTimeoutSeconds);
    if (auto st = round->run(); !st)
        return st.error();
    for (const ShardRow& r : rows) {
        auto row = db.prepare(
            "INSERT INTO data_shards(run_id, split, number, path, token_bytes, header_bytes, "
            "file_bytes, first_token, tokens, file_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        if (!row)
            return row.error();
        row->bind(1, id)
            .bind(2, r.split)
            .bind(3, r.number)
            .bind(4, r.path.string())
            .bind(5, int64_t{r.tokenBytes})
            .bind(6, r.headerBytes)
            .bind(7, r.fileBytes)
            .bind(8, r.firstToken)
            .bind(9, r.tokens)
            .bind(10, r.fileSha256);
        if (auto st = row->run(); !st)
            return st.error();
    }
    if (auto st = tx.commit(); !st)
        return st.error();
    return id;
}

Expected<StoredTrainData> Coordinator::Impl::readRunRow(const std::string& whenMissing) {
    auto q = db.prepare(
        "SELECT id, config_json, version, train_bytes, train_sha256 FROM runs ORDER BY id LIMIT 1");
    if (!q)
        return q.error();
    if (!q->step())
        return makeError(whenMissing);
    runId = q->integer(0);
    auto settings = runSettingsFromJson(q->text(1));
    if (!settings)
        return settings.error();
    run = *settings;
    P = run.model.parameterCount();
    version = q->integer(2);
    return StoredTrainData{q->integer(3), q->text(4)};
}

Expected<RunData> Coordinator::Impl::openTrainData(const StoredTrainData& stored) {
    return run.dataKind == kDataBytes ? RunData::openBytes(dirs, stored.bytes, stored.sha256)
                                      : openTokenData(stored.sha256);
}

Status Coordinator::Impl::restore() {
    std::unique_lock lock(mu);
    {
        auto q = db.prepare("SELECT COUNT(*) FROM runs");
        if (!q)
            return q.error();
        q->step();
        if (q->integer(0) == 0) {
            if (auto st = createRun(); !st)
                return st;
        }
    }
    auto stored = readRunRow("database: the run vanished");
    if (!stored)
        return stored.error();

    auto given = ModelConfig::parse(cfg.model);
    if (given && run.dataKind == kDataSentencePiece)
        given->vocabSize = run.model.vocabSize;  // the tokenizer's V, not --model's
    if (auto& m = given; m && !(*m == run.model))
        log("note: the state directory's run uses model " + run.model.describe() +
            "; the --model given (" + m->describe() + ") applies to new state directories only");
    if (!cfg.initWeights.empty())
        log("note: --init applies to new state directories only; the run keeps its weights");
    if (cfg.resultEncoding && *cfg.resultEncoding != run.resultEncoding)
        log(std::string("note: the state directory's run takes ") +
            net::encodingName(run.resultEncoding) + " results; --result-encoding " +
            net::encodingName(*cfg.resultEncoding) + " applies to new state directories only");

    auto opened = openTrainData(*stored);
    if (!opened)
        return opened.error();
    data = std::move(*opened);
    if (auto tok = runTokenizer(dirs.root(), run))
        tokenizer = std::move(*tok);
    else
        log("no samples for this run: " + tok.error().message);

    // A shard that joins a sharded run, or lost its copy, takes the version's weights from
    // another shard (shard_rounds.cpp).
    std::error_code missing;
    if (sharded() && !fs::exists(dirs.weights(version), missing))
        if (auto st = fetchVersionWeights(lock, version); !st)
            return makeError("weights of version " + std::to_string(version) + ": " +
                             st.error().message);
    auto w = loadCheckpoint(dirs.weights(version), run.model);
    if (!w)
        return makeError("weights of version " + std::to_string(version) + ": " +
                         w.error().message);
    theta = std::move(w->parameters);
    if (!sharded()) {  // a shard's momentum is its range's (restoreShard)
        auto mom = loadCheckpoint(dirs.momentum(version), run.model);
        if (!mom)
            return makeError("momentum of version " + std::to_string(version) + ": " +
                             mom.error().message);
        vel = std::move(mom->parameters);
        if (static_cast<int64_t>(vel.size()) != P)
            return makeError("the momentum has the wrong size for " + run.model.describe());
    }
    if (static_cast<int64_t>(theta.size()) != P)
        return makeError("the weights have the wrong size for " + run.model.describe());
    ownRange = {0, P};
    if (run.weightDeltas != cfg.weightDeltas)
        log(std::string("note: the state directory's run moves by weight deltas '") +
            weightDeltaCodecName(run.weightDeltas) + "'; --weight-deltas " +
            weightDeltaCodecName(cfg.weightDeltas) + " applies to new state directories only");
    residual.clear();
    if (run.weightDeltas != WeightDeltaCodec::Off) {
        // Written with the version's weights before the version was committed (publish).
        auto e = loadCheckpoint(dirs.residual(version), run.model);
        if (!e)
            return makeError("weight-delta residual of version " + std::to_string(version) + ": " +
                             e.error().message + "; the state directory is damaged");
        if (static_cast<int64_t>(e->parameters.size()) != P)
            return makeError("the weight-delta residual has the wrong size for " +
                             run.model.describe());
        residual = std::move(e->parameters);
    }
    for (int64_t ver = std::max<int64_t>(0, version - cfg.maxStaleness); ver <= version; ++ver) {
        std::error_code ec;
        if (!fs::exists(dirs.weights(ver), ec))
            continue;
        auto h = net::sha256File(dirs.weights(ver));
        if (!h)
            return h.error();
        weightFiles[ver] = ServedFile{dirs.weights(ver), h->bytes, h->digest};
    }
    deltaFiles.clear();
    for (int64_t ver = std::max<int64_t>(1, version - kKeptWeightDeltas - cfg.maxStaleness + 1);
         run.weightDeltas != WeightDeltaCodec::Off && ver <= version; ++ver) {
        std::error_code ec;
        if (!fs::exists(dirs.weightDelta(ver), ec))
            continue;  // a run that moved without deltas before
        auto h = net::sha256File(dirs.weightDelta(ver));
        if (!h)
            return h.error();
        deltaFiles[ver] = ServedFile{dirs.weightDelta(ver), h->bytes, h->digest};
    }
    if (auto st = publishBlobs(); !st)
        return st;
    if (sharded()) {
        if (auto st = restoreShard(); !st)
            return st;
    } else {
        sum.assign(static_cast<size_t>(P), 0.0f);
        if (auto st = rebuildRoundSum(); !st)
            return st;
        restoreOuterStep();
    }
    cleanStaleFiles(true);
    removeOrphanHeldFiles();

    // Closed rounds whose validation loss was not recorded before a stop.
    auto pending = db.prepare(
        "SELECT round FROM rounds WHERE run_id = ? AND closed_unix IS NOT NULL AND val_loss IS "
        "NULL ORDER BY round");
    if (!pending)
        return pending.error();
    pending->bind(1, runId);
    while (pending->step()) {
        const int64_t r = pending->integer(0);
        auto ck = loadCheckpoint(dirs.weights(r + 1), run.model);
        if (ck)
            evalQueue.push_back(EvalJob{r, std::move(ck->parameters)});
    }
    log("run " + std::to_string(runId) + ": model " + run.model.describe() + " (" +
        std::to_string(P) + " parameters), " + net::encodingName(run.resultEncoding) +
        " results, round " + std::to_string(version) + " open");
    return {};
}

Expected<RunData> Coordinator::Impl::openTokenData(const std::string& trainSha) {
    auto q = db.prepare(
        "SELECT split, number, path, token_bytes, header_bytes, file_bytes, first_token, tokens, "
        "file_sha256 FROM data_shards WHERE run_id = ? ORDER BY split, number");
    if (!q)
        return q.error();
    q->bind(1, runId);
    std::vector<ShardRow> rows;
    while (q->step()) {
        ShardRow r;
        r.split = q->text(0);
        r.number = q->integer(1);
        r.path = q->text(2);
        r.tokenBytes = static_cast<int>(q->integer(3));
        r.headerBytes = q->integer(4);
        r.fileBytes = q->integer(5);
        r.firstToken = q->integer(6);
        r.tokens = q->integer(7);
        r.fileSha256 = q->text(8);
        rows.push_back(std::move(r));
    }
    if (auto st = q->status(); !st)
        return st.error();
    if (trainFingerprint(rows) != trainSha)
        return makeError(
            "database: the run's data_shards rows do not match its train data "
            "(fingerprint differs); the state directory is damaged");
    return RunData::openShards(dirs, rows);
}

Status Coordinator::Impl::rebuildRoundSum() {
    auto q = db.prepare(
        "SELECT work_unit_id, weight, payload_sha256 FROM results WHERE round = ? ORDER BY seq");
    if (!q)
        return q.error();
    q->bind(1, version);
    int count = 0;
    while (q->step()) {
        const int64_t wu = q->integer(0);
        const fs::path path = dirs.payload(version, wu);
        // What the aggregator did when the result was accepted (round_aggregator.hpp), in the
        // same order, with each file checked against its SHA-256.
        if (auto st =
                accumulatePayload(sum, path, run.resultEncoding, static_cast<float>(q->real(1)),
                                  toDigest(q->blob(2)), &pool);
            !st)
            return makeError("accepted result of work unit " + std::to_string(wu) + ": " +
                             st.error().message + "; the state directory is damaged");
        ++count;
    }
    if (auto st = q->status(); !st)
        return st;
    if (count > 0)
        log("restored round " + std::to_string(version) + ": " + std::to_string(count) +
            " accepted results re-added to the round sum");
    return {};
}

void Coordinator::Impl::cleanStaleFiles(bool startup) {
    std::set<std::string> keep;
    // The payloads of the round results go into (a shard's: its pieces of that round).
    auto q = db.prepare(sharded()
                            ? "SELECT work_unit_id FROM result_pieces WHERE round = ? AND shard = ?"
                            : "SELECT work_unit_id FROM results WHERE round = ?");
    if (q) {
        q->bind(1, sumRound());
        if (sharded())
            q->bind(2, int64_t{cfg.shard});
        while (q->step())
            keep.insert(std::to_string(q->integer(0)) + ".f16");
    }
    dirs.removeStale(version, cfg.maxStaleness, keep, startup, sumRound());
    std::set<std::string> blobs;
    for (const auto& [ver, file] : weightFiles)
        blobs.insert(net::toHex(file.sha256));
    for (const auto& [ver, file] : deltaFiles)
        blobs.insert(net::toHex(file.sha256));
    for (const TrainShard& shard : data.train())
        blobs.insert(net::toHex(shard.file.sha256));
    for (const auto& [ver, file] : partFiles)
        blobs.insert(net::toHex(file.sha256));
    if (assembled)
        blobs.insert(net::toHex(assembled->sha256));
    dirs.blobs().removeUnreferenced(blobs);
}

Status Coordinator::Impl::publishBlobs() {
    for (const auto& [ver, file] : weightFiles)
        if (auto st = dirs.blobs().publish(file.path, file.sha256); !st)
            return st;
    for (const auto& [ver, file] : deltaFiles)
        if (auto st = dirs.blobs().publish(file.path, file.sha256); !st)
            return st;
    for (const TrainShard& shard : data.train())
        if (auto st = dirs.blobs().publish(shard.file.path, shard.file.sha256); !st)
            return st;
    return {};
}

}  // namespace tandem::coord
