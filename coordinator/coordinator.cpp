// The facade: Coordinator's public calls parse their input, take the lock and hand over to the
// parts (coordinator_impl.hpp); status and the served files are answered here.
//
// Dimensions: P parameters.
#include "coordinator.hpp"

#include "coordinator_impl.hpp"
#include "run_export.hpp"
#include "state_store.hpp"

#include "safe_text.hpp"

#include <sys/statvfs.h>

namespace tandem::coord {

// ---------------------------------------------------------------------------------------------
// Startup

Expected<std::unique_ptr<Coordinator>> Coordinator::open(CoordinatorConfig cfg, Logger log) {
    if (!log)
        log = [](const std::string&) {};
    auto mirrors = checkMirrorUrls(std::move(cfg.mirrors));
    if (!mirrors)
        return mirrors.error();
    cfg.mirrors = std::move(*mirrors);
    // A new state directory: the run's corpus is checked before anything is made, so that a
    // refused corpus leaves nothing behind.
    if (auto st = checkDatabaseUrl(cfg.databaseUrl); !st)
        return st.error();
    const bool front = cfg.role == CoordinatorRole::Front;
    if (front) {
        if (cfg.databaseUrl.empty())
            return makeError(
                "--role front needs the run state in PostgreSQL (--db postgresql://...): with "
                "SQLite one process serves the run, and it is the default role");
        if (auto st = checkUploadBase(cfg.uploadBase); !st)
            return st.error();
    }
    // A sharded run (shard_rounds.cpp) lives in PostgreSQL; refused before anything is made.
    if (cfg.newRunShards > 1 && cfg.databaseUrl.empty())
        return makeError("--aggregation-shards " + std::to_string(cfg.newRunShards) +
                         ": a run of several aggregation shards keeps its state in PostgreSQL "
                         "(--db postgresql://...)");
    std::optional<NewRun> pending;
    if (!front) {
        // (With PostgreSQL, restore() prepares the run when the database holds none.)
        std::error_code ec;
        if (cfg.databaseUrl.empty() && !fs::exists(cfg.stateDir / "coordinator.db", ec)) {
            auto prepared = prepareNewRun(cfg);
            if (!prepared)
                return prepared.error();
            pending = std::move(*prepared);
        }
    }
    // One coordinator per state directory.
    auto dirs = StateDir::open(cfg.stateDir);
    if (!dirs)
        return dirs.error();
    // One aggregating process per database; front ends take no lock.
    auto serveLock =
        front ? Expected<ServeLock>(ServeLock()) : ServeLock::take(cfg.databaseUrl, cfg.shard);
    if (!serveLock)
        return makeError(stateStoreName(cfg.stateDir, cfg.databaseUrl) + ": " +
                         serveLock.error().message);
    auto db = openStateStore(cfg.stateDir, cfg.databaseUrl);
    if (!db)
        return db.error();
    // A front end signs with the run's key, copied from the aggregating process's state
    // directory (docs/operations.md): it never makes one of its own.
    auto key = front ? net::SigningKey::load(dirs->keyFile())
                     : net::SigningKey::loadOrCreate(dirs->keyFile());
    if (!key)
        return makeError("coordinator key: " + key.error().message +
                         (front ? " (a front end uses the run's key: copy coordinator_key.pem "
                                  "from the aggregating process's state directory)"
                                : ""));

    auto impl = std::make_unique<Impl>(std::move(cfg), std::move(log), std::move(*dirs),
                                       std::move(*db), std::move(*key));
    impl->pendingRun = std::move(pending);
    auto* raw = impl.get();
    if (front) {
        // No round sum, no clock, no validation: the aggregating process's (front_end.cpp).
        if (auto st = impl->restoreFront(); !st)
            return st.error();
    } else {
        if (auto st = impl->restore(); !st)
            return st.error();
        // For front ends (front_end.cpp), which exist only on PostgreSQL.
        if (impl->db.backend() == storage::Backend::Postgres)
            if (auto st = impl->recordVersionFiles(); !st)
                return makeError("recording the versions' files: " + st.error().message);
        if (auto st = impl->restoreLiveness(); !st)
            return makeError("reading the assigned work units: " + st.error().message);
        impl->roundClock = RoundClock(impl->cfg.databaseUrl, impl->runId);
        impl->serveLock = std::move(*serveLock);
        raw->aggregator = std::make_unique<RoundAggregator>(raw->sum, raw->run.resultEncoding,
                                                            &raw->pool, raw->cfg.backgroundThreads);
    }
    std::unique_ptr<Coordinator> c(new Coordinator(std::move(impl)));
    if (raw->cfg.backgroundThreads) {
        if (!front)
            raw->validator = std::thread([raw] { raw->validatorLoop(); });
        raw->ticker = std::thread([raw] { raw->tickerLoop(); });
    }
    return c;
}

Coordinator::Coordinator(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Coordinator::~Coordinator() {
    {
        std::lock_guard lock(m_impl->mu);
        m_impl->stopping = true;
    }
    m_impl->tickCv.notify_all();
    m_impl->evalCv.notify_all();
    if (m_impl->ticker.joinable())
        m_impl->ticker.join();
    if (m_impl->validator.joinable())
        m_impl->validator.join();
    m_impl->aggregator.reset();  // a restart re-adds what it had not yet added
    std::lock_guard lock(m_impl->mu);
    m_impl->flushLiveness();  // heartbeats since the last batch (unit_liveness.hpp)
}

// ---------------------------------------------------------------------------------------------
// Clients

Outcome<net::RegisterResponse> Coordinator::registerClient(std::string_view body) {
    auto req = net::RegisterRequest::fromJson(body);
    if (!req)
        return refuse(400, "bad_request", req.error().message);
    std::lock_guard lock(m_impl->mu);
    auto out = m_impl->registerDonor(*req);
    if (out.ok())
        m_impl->metrics.countRegistration();
    return out;
}

Outcome<int64_t> Coordinator::authenticate(std::string_view authorization) {
    std::lock_guard lock(m_impl->mu);
    return m_impl->clients.authenticate(authorization);
}

// ---------------------------------------------------------------------------------------------
// Work

Outcome<WorkOffer> Coordinator::requestWork(int64_t clientId, std::string_view body,
                                            std::optional<std::string> requestId) {
    auto req = net::WorkRequest::fromJson(body);
    if (!req)
        return refuse(400, "bad_request", req.error().message);
    if (requestId && !net::isRequestId(*requestId))
        return refuse(400, "bad_request",
                      std::string("the ") + net::kRequestIdHeader + " header must be 1 to " +
                          std::to_string(net::kMaxRequestIdChars) +
                          " letters, digits, '-' or '_', found '" + net::quotable(*requestId) +
                          "'");
    std::lock_guard lock(m_impl->mu);
    return m_impl->assignWork(clientId, *req, requestId.value_or(std::string()));
}

Outcome<net::HeldWorkUnits> Coordinator::heldWork(int64_t clientId) {
    std::lock_guard lock(m_impl->mu);
    return m_impl->heldWork(clientId);
}

Outcome<void> Coordinator::releaseWork(int64_t clientId, int64_t workUnitId) {
    std::lock_guard lock(m_impl->mu);
    return m_impl->releaseWork(clientId, workUnitId);
}

Outcome<net::ProgressReply> Coordinator::progress(int64_t clientId, int64_t workUnitId,
                                                  std::string_view body) {
    auto rep = net::ProgressReport::fromJson(body);
    if (!rep)
        return refuse(400, "bad_request", rep.error().message);
    std::lock_guard lock(m_impl->mu);
    return m_impl->heartbeat(clientId, workUnitId, *rep);
}

// ---------------------------------------------------------------------------------------------
// Uploads

Outcome<std::unique_ptr<UploadSession>> Coordinator::beginUpload(int64_t clientId,
                                                                 int64_t workUnitId,
                                                                 int64_t contentLength,
                                                                 std::string_view signature,
                                                                 bool dryRun, int piece) {
    auto state = m_impl->beginUpload(clientId, workUnitId, contentLength, signature, dryRun, piece);
    if (!state.ok()) {
        if (state.refusal().code != "awaiting_replica")  // held, not refused
            m_impl->metrics.countRefused(state.refusal().code);
        return state.refusal();
    }
    if (!state.value())
        return std::unique_ptr<UploadSession>();  // dry run
    return std::unique_ptr<UploadSession>(new UploadSession(std::move(state.value())));
}

// ---------------------------------------------------------------------------------------------
// Rounds

void Coordinator::tick() {
    m_impl->tick();
}

void Coordinator::waitForValidation() {
    m_impl->waitForValidation();
}

// ---------------------------------------------------------------------------------------------
// Status and files

std::vector<ModelSample> Coordinator::samples(int64_t runId, int64_t limit) {
    std::lock_guard lock(m_impl->mu);
    if (runId != m_impl->runId)
        return {};
    return m_impl->latestSamples(std::clamp<int64_t>(limit, 1, 1000));
}

net::RunStatus Coordinator::status() {
    Impl& c = *m_impl;
    std::lock_guard lock(c.mu);
    net::RunStatus s;
    s.runId = c.runId;
    s.round = c.version;
    s.model = c.run.model;
    s.workUnitSeconds = c.cfg.targetWorkUnitSeconds;
    if (auto e = readLatestExport(c.cfg.stateDir); e && e->runId == c.runId)
        s.latestExport = net::ExportInfo{e->path, e->format, e->version, e->exportedUnix};
    s.batch = c.run.batch;
    s.seqLen = c.run.seqLen;
    s.innerStepsMin = c.run.minInnerSteps;
    s.innerStepsMax = c.run.innerSteps;
    if (!c.data.train().empty())
        s.tokenBytes = c.data.train().front().tokens.width;
    s.resultEncoding = net::encodingName(c.run.resultEncoding);
    s.weightDeltas = weightDeltaCodecName(c.run.weightDeltas);
    auto h = c.db.prepare(
        "SELECT round, val_loss, contributors, tokens FROM rounds WHERE run_id = ? AND closed_unix "
        "IS NOT NULL ORDER BY round");
    if (h) {
        h->bind(1, c.runId);
        while (h->step())
            s.history.push_back({h->integer(0), h->optionalReal(1), static_cast<int>(h->integer(2)),
                                 h->integer(3)});
    }
    auto t = c.db.prepare("SELECT COALESCE(SUM(tokens), 0) FROM results");
    if (t && t->step())
        s.totalTokens = t->integer(0);
    s.activeWorkers = static_cast<int>(c.liveClients().size());
    if (auto newest = c.latestSamples(1); !newest.empty())
        s.latestSample = net::SampleSummary{newest[0].version, newest[0].prompt, newest[0].text};
    return s;
}

// ---------------------------------------------------------------------------------------------
// Metrics

MetricsGauges Coordinator::Impl::metricsGauges() {
    MetricsGauges g;
    g.runId = runId;
    g.model = run.model.describe();
    g.parameters = P;
    g.version = version;
    g.activeWorkers = static_cast<int64_t>(liveClients().size());
    g.uploadsInFlight = uploadsTotal;
    g.uploadSlots = cfg.maxConcurrentUploads;
    g.roundQuorum = roundQuorum();
    if (auto q = db.prepare("SELECT COUNT(*) FROM work_units WHERE run_id = ? AND state = "
                            "'assigned'")) {
        q->bind(1, runId);
        if (q->step())
            g.assignedUnits = q->integer(0);
    }
    if (auto q = db.prepare("SELECT contributors FROM rounds WHERE run_id = ? AND round = ?")) {
        q->bind(1, runId).bind(2, version);
        if (q->step())
            g.roundContributors = q->integer(0);
    }
    if (auto q = db.prepare("SELECT round, val_loss FROM rounds WHERE run_id = ? AND val_loss IS "
                            "NOT NULL ORDER BY round DESC LIMIT 1")) {
        q->bind(1, runId);
        if (q->step()) {
            g.validationLossRound = q->integer(0);
            g.validationLoss = q->real(1);
        }
    }
    if (auto q = db.prepare("SELECT COUNT(*) FROM held_results"); q && q->step())
        g.heldResults = q->integer(0);
    if (auto q = db.prepare("SELECT COUNT(*) FROM clients WHERE blocked_unix IS NOT NULL");
        q && q->step())
        g.blockedClients = q->integer(0);
    std::error_code ec;
    const fs::path dbFile = dirs.databaseFile();
    if (db.backend() == storage::Backend::Postgres) {
        if (auto q = db.prepare("SELECT pg_database_size(current_database())"); q && q->step())
            g.databaseBytes = q->integer(0);
    } else {
        for (const fs::path& f : {dbFile, fs::path(dbFile.string() + "-wal")}) {
            const auto bytes = fs::file_size(f, ec);
            if (!ec)
                g.databaseBytes += static_cast<int64_t>(bytes);
        }
    }
    struct statvfs v {};
    if (::statvfs(dirs.root().c_str(), &v) == 0) {
        g.diskFreeBytes = static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize);
        g.diskTotalBytes = static_cast<int64_t>(v.f_blocks) * static_cast<int64_t>(v.f_frsize);
    }
    return g;
}

Metrics& Coordinator::metrics() {
    return m_impl->metrics;
}

std::string Coordinator::metricsText() {
    MetricsGauges g;
    {
        std::lock_guard lock(m_impl->mu);
        g = m_impl->metricsGauges();
    }
    return m_impl->metrics.render(g);
}

Outcome<ServedFile> Coordinator::weightsFile(int64_t runId, int64_t version) {
    Impl& c = *m_impl;
    std::lock_guard lock(c.mu);
    if (runId != c.runId)
        return refuse(404, "unknown_run",
                      "run " + std::to_string(runId) +
                          " does not exist; this "
                          "coordinator serves run " +
                          std::to_string(c.runId));
    if (c.frontEnd())
        return refuse(404, "not_on_front_end",
                      "this is a front end; the weights are served at " + c.cfg.uploadBase +
                          " (the manifest's URLs)");
    auto it = c.weightFiles.find(version);
    if (it == c.weightFiles.end())
        return refuse(404, "unknown_version",
                      "weights version " + std::to_string(version) +
                          " is not available; the "
                          "current version is " +
                          std::to_string(c.version));
    return it->second;
}

Outcome<ServedFile> Coordinator::dataShard(int64_t runId, int64_t shard) {
    Impl& c = *m_impl;
    if (runId != c.runId)
        return refuse(404, "unknown_run", "run " + std::to_string(runId) + " does not exist");
    const auto train = c.data.train();
    if (shard < 0 || shard >= static_cast<int64_t>(train.size()))
        return refuse(404, "unknown_shard",
                      "data shard " + std::to_string(shard) +
                          " does not exist; the run has shards 0 to " +
                          std::to_string(train.size() - 1));
    return train[static_cast<size_t>(shard)].file;
}

Outcome<ServedFile> Coordinator::blob(std::string_view name) const {
    return m_impl->dirs.blobs().find(name);
}

std::optional<fs::path> Coordinator::tokenizerPath() const {
    return runTokenizerFile(m_impl->dirs.root(), m_impl->run);
}

int64_t Coordinator::runId() const {
    return m_impl->runId;
}
int64_t Coordinator::currentVersion() {
    std::lock_guard lock(m_impl->mu);
    return m_impl->version;
}
const ModelConfig& Coordinator::model() const {
    return m_impl->run.model;
}
int64_t Coordinator::parameterCount() const {
    return m_impl->P;
}
net::PublicKey Coordinator::publicKey() const {
    return m_impl->key.publicKey();
}
std::vector<float> Coordinator::weights() {
    std::lock_guard lock(m_impl->mu);
    return m_impl->theta;
}
std::vector<float> Coordinator::velocity() {
    std::lock_guard lock(m_impl->mu);
    return m_impl->vel;
}
std::vector<float> Coordinator::weightDeltaResidual() {
    std::lock_guard lock(m_impl->mu);
    return m_impl->residual;
}
int64_t Coordinator::maxUploadBytes() const {
    return m_impl->maxUploadBytes();
}

}  // namespace tandem::coord
