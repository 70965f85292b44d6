// Dimensions: P parameters.
#include "coordinator.hpp"

#include "aggregate.hpp"
#include "backend.hpp"
#include "checkpoint.hpp"
#include "codec.hpp"
#include "corpus.hpp"
#include "file_io.hpp"
#include "random.hpp"
#include "result_format.hpp"
#include "schema.hpp"
#include "sqlite.hpp"
#include "thread_pool.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

namespace tandem::coord {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kChunkHalves = size_t{1} << 19;  // 1 MiB of payload per decode step

Refusal refuse(int status, std::string code, std::string message, int retryAfter = 0) {
    return Refusal{status, std::move(code), std::move(message), retryAfter};
}

Refusal internalError(const std::string& what) {
    return refuse(500, "internal", "the coordinator failed: " + what);
}

// Steps q, a query for one work unit whose first column is its client: a client may only act on
// its own work units (404 when there is none, 403 when it is another client's).
std::optional<Refusal> stepOwnWorkUnit(Statement& q, int64_t workUnitId, int64_t clientId) {
    if (!q.step())
        return refuse(404, "unknown_work_unit",
                      "work unit " + std::to_string(workUnitId) + " does not exist");
    if (q.integer(0) != clientId)
        return refuse(403, "not_your_work_unit",
                      "work unit " + std::to_string(workUnitId) + " belongs to another client");
    return std::nullopt;
}

net::Sha256Digest toDigest(const std::vector<uint8_t>& v) {
    net::Sha256Digest d{};
    if (v.size() == d.size())
        std::memcpy(d.data(), v.data(), d.size());
    return d;
}

std::string fmt(double x, int digits = 4) {
    std::ostringstream s;
    s.precision(digits);
    s << x;
    return s.str();
}

Status fsyncPath(const fs::path& path, bool directory) {
    int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return makeError("cannot open " + path.string() + " to flush it");
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0)
        return makeError("cannot flush " + path.string());
    return {};
}

Expected<net::Sha256Digest> hashFile(const fs::path& path, int64_t* bytes) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        return makeError("cannot open " + path.string());
    net::Sha256 h;
    std::vector<uint8_t> buf(1 << 20);
    size_t n;
    int64_t total = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
        h.update(std::span<const uint8_t>(buf.data(), n));
        total += static_cast<int64_t>(n);
    }
    std::fclose(f);
    if (bytes)
        *bytes = total;
    return h.finish();
}

struct EvalJob {
    int64_t round = 0;
    std::vector<float> weights;  // (P) the version the round produced
};

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Coordinator::Impl {
    CoordinatorConfig cfg;
    Logger log;
    std::mutex mu;  // guards everything below, including the database connection
    Database db;
    net::SigningKey key;
    ThreadPool pool;

    int64_t runId = 0;
    ModelConfig model;
    int64_t P = 0;
    int batch = 0, seqLen = 0, innerSteps = 0, minInnerSteps = 1;
    float peakLr = 0, minLr = 0;
    int64_t lrWarmupSteps = 0, lrDecaySteps = 0;
    uint64_t runSeed = 0;
    std::vector<uint8_t> train;       // shard 0
    std::vector<uint8_t> validation;  // held-out tail of the corpus
    ServedFile shard0;

    int64_t version = 0;                 // the open round = the current weights version
    std::vector<float> theta, vel, sum;  // (P) each
    std::map<int64_t, ServedFile> weightFiles;
    std::shared_ptr<int> stateLock;              // flock on <state>/coordinator.lock
    std::map<int64_t, int64_t> lastSeenWritten;  // client id -> unix seconds
    std::set<int64_t> uploading;                 // work unit ids with an upload in progress
    std::map<int64_t, int> uploadsPerClient;
    int uploadsTotal = 0;
    std::vector<std::vector<float>> scratchPool;

    std::thread ticker, validator;
    std::condition_variable tickCv, evalCv, evalDoneCv;
    std::deque<EvalJob> evalQueue;
    int evalBusy = 0;
    bool stopping = false;

    Impl(CoordinatorConfig c, Logger l, Database d, net::SigningKey k)
        : cfg(std::move(c)),
          log(std::move(l)),
          db(std::move(d)),
          key(std::move(k)),
          pool(std::max(1, cfg.threads)) {}

    int64_t now() const {
        if (cfg.clock)
            return cfg.clock();
        return std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    }
    fs::path dir(const char* sub) const { return cfg.stateDir / sub; }
    fs::path weightsPath(int64_t v) const {
        return dir("weights") / ("v" + std::to_string(v) + ".ckpt");
    }
    fs::path momentumPath(int64_t v) const {
        return dir("momentum") / ("v" + std::to_string(v) + ".ckpt");
    }
    fs::path roundDir(int64_t r) const { return dir("rounds") / std::to_string(r); }
    fs::path payloadPath(int64_t r, int64_t wu) const {
        return roundDir(r) / (std::to_string(wu) + ".f16");
    }

    // ---- startup

    Status createRun();
    Status restore();
    Status rebuildRoundSum();
    void cleanStaleFiles(bool startup);
    Expected<ServedFile> publishWeights(int64_t v, std::span<const float> weights,
                                        std::span<const float> momentum);

    // ---- rounds

    // mu held through `lock`; released while the new version is computed and written.
    Status closeRound(std::unique_lock<std::mutex>& lock);
    bool closing = false;  // a round close is writing files; commits wait for it
    std::condition_variable closeCv;
    void abandonTimedOut();  // mu held
    int64_t roundQuorum();   // mu held: results that close the open round
    double normReference();  // mu held
    std::vector<float> takeScratch();

    // ---- validation

    void validatorLoop();
    std::optional<double> evaluate(std::span<const float> weights, std::string* error);
};

// ---------------------------------------------------------------------------------------------
// Startup

Expected<std::unique_ptr<Coordinator>> Coordinator::open(CoordinatorConfig cfg, Logger log) {
    if (!log)
        log = [](const std::string&) {};
    std::error_code ec;
    for (const char* sub : {"", "weights", "momentum", "rounds", "uploads", "data"}) {
        fs::create_directories(cfg.stateDir / sub, ec);
        if (ec)
            return makeError("cannot create " + (cfg.stateDir / sub).string() + ": " +
                             ec.message());
    }
    // One coordinator per state directory; the kernel drops the lock when the process dies.
    const fs::path lockPath = cfg.stateDir / "coordinator.lock";
    int lockFd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lockFd < 0)
        return makeError("cannot open " + lockPath.string() + ": " + std::strerror(errno));
    std::shared_ptr<int> stateLock(new int(lockFd), [](int* fd) {
        ::close(*fd);
        delete fd;
    });
    if (::flock(lockFd, LOCK_EX | LOCK_NB) != 0)
        return makeError("another tandem-coordinator is using the state directory " +
                         cfg.stateDir.string());
    const auto dbPath = cfg.stateDir / "coordinator.db";
    // FULL: an accepted result and its receipt survive a power cut.
    auto db = Database::open(dbPath, {.synchronous = storage::Synchronous::Full,
                                      .migrations = kMigrations,
                                      .newerHint = "use a newer tandem-coordinator"});
    if (!db)
        return makeError(db.error().message + " (" + dbPath.string() + ")");
    auto key = net::SigningKey::loadOrCreate(cfg.stateDir / "coordinator_key.pem");
    if (!key)
        return makeError("coordinator key: " + key.error().message);

    auto impl =
        std::make_unique<Impl>(std::move(cfg), std::move(log), std::move(*db), std::move(*key));
    impl->stateLock = std::move(stateLock);
    if (auto st = impl->restore(); !st)
        return st.error();
    auto* raw = impl.get();
    std::unique_ptr<Coordinator> c(new Coordinator(std::move(impl)));
    if (raw->cfg.backgroundThreads) {
        raw->validator = std::thread([raw] { raw->validatorLoop(); });
        raw->ticker = std::thread([raw] {
            std::unique_lock lock(raw->mu);
            while (!raw->stopping) {
                raw->tickCv.wait_for(lock, std::chrono::seconds(1));
                if (raw->stopping)
                    break;
                lock.unlock();
                // tick() takes the lock itself
                Coordinator::tickImpl(*raw);
                lock.lock();
            }
        });
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
}

Status Coordinator::Impl::createRun() {
    if (cfg.corpus.empty())
        return makeError("the state directory " + cfg.stateDir.string() +
                         " holds no run yet; give --corpus with text files or directories");
    auto parsed = ModelConfig::parse(cfg.model);
    if (!parsed)
        return parsed.error();
    if (auto st = parsed->validate(); !st)
        return st.error();
    const ModelConfig m = *parsed;
    const int T = cfg.seqLen > 0 ? cfg.seqLen : m.maxSeqLen;
    if (T > m.maxSeqLen)
        return makeError("sequence length " + std::to_string(T) + " exceeds the model's " +
                         std::to_string(m.maxSeqLen));
    if (cfg.innerSteps < 1 || cfg.batch < 1)
        return makeError("inner steps and batch must be at least 1");
    auto tokens = loadTextCorpus(cfg.corpus);
    if (!tokens)
        return makeError("corpus: " + tokens.error().message);
    const int64_t total = static_cast<int64_t>(tokens->size());
    const int64_t minPart = 2 * (int64_t{T} + 1);
    int64_t valLen = static_cast<int64_t>(static_cast<double>(total) * cfg.validationFraction);
    valLen = std::max(valLen, minPart);
    if (total - valLen < minPart)
        return makeError("the corpus has " + std::to_string(total) + " bytes; at least " +
                         std::to_string(valLen + minPart) +
                         " are needed for training and validation windows of " +
                         std::to_string(T + 1) + " bytes");
    std::span<const uint8_t> all(*tokens);
    auto trainPart = all.first(static_cast<size_t>(total - valLen));
    auto valPart = all.last(static_cast<size_t>(valLen));
    if (auto st = writeFileAtomically(dir("data") / "shard-0.bin", trainPart); !st)
        return st;
    if (auto st = writeFileAtomically(dir("data") / "validation.bin", valPart); !st)
        return st;

    const int64_t count = m.parameterCount();
    std::vector<float> init(static_cast<size_t>(count));
    initParameters(ParameterLayout(m), init, cfg.seed);
    std::vector<float> zeros(static_cast<size_t>(count), 0.0f);
    auto published = publishWeights(0, init, zeros);
    if (!published)
        return published.error();

    json config{{"model", m.describe()},
                {"layers", m.layers},
                {"heads", m.heads},
                {"channels", m.channels},
                {"max_seq_len", m.maxSeqLen},
                {"vocab_size", m.vocabSize},
                {"inner_steps", cfg.innerSteps},
                {"min_inner_steps",
                 cfg.minInnerSteps > 0 ? cfg.minInnerSteps : std::max(1, cfg.innerSteps / 10)},
                {"batch", cfg.batch},
                {"seq_len", T},
                {"peak_lr", cfg.innerPeakLr},
                {"min_lr", cfg.innerMinLr},
                {"lr_warmup_steps", cfg.lrWarmupSteps},
                {"lr_decay_steps", cfg.lrDecaySteps},
                {"seed", cfg.seed & ((uint64_t{1} << 53) - 1)}};
    Transaction tx(db);
    if (!tx.started())
        return tx.started();
    auto ins = db.prepare(
        "INSERT INTO runs(config_json, version, data_cursor, train_bytes, train_sha256, "
        "created_unix) VALUES (?, 0, 0, ?, ?, ?)");
    if (!ins)
        return ins.error();
    ins->bind(1, config.dump())
        .bind(2, static_cast<int64_t>(trainPart.size()))
        .bind(3, net::toHex(net::sha256(trainPart)))
        .bind(4, now());
    if (auto st = ins->run(); !st)
        return st;
    const int64_t id = db.lastInsertId();
    auto round = db.prepare(
        "INSERT INTO rounds(run_id, round, opened_unix, deadline_unix) VALUES (?, 0, ?, ?)");
    if (!round)
        return round.error();
    round->bind(1, id).bind(2, now()).bind(3, now() + cfg.roundTimeoutSeconds);
    if (auto st = round->run(); !st)
        return st;
    if (auto st = tx.commit(); !st)
        return st;
    log("created run " + std::to_string(id) + ": model " + m.describe() + ", " +
        std::to_string(count) + " parameters, " + std::to_string(trainPart.size()) +
        " train bytes, " + std::to_string(valPart.size()) + " validation bytes");
    return {};
}

Expected<ServedFile> Coordinator::Impl::publishWeights(int64_t v, std::span<const float> weights,
                                                       std::span<const float> momentum) {
    Checkpoint ck;
    ck.config = model.layers > 0 ? model : *ModelConfig::parse(cfg.model);
    ck.parameters.assign(weights.begin(), weights.end());
    auto bytes = serializeCheckpoint(ck);
    if (auto st = writeFileAtomically(weightsPath(v), bytes); !st)
        return st.error();
    ServedFile f{weightsPath(v), static_cast<int64_t>(bytes.size()), net::sha256(bytes)};
    ck.parameters.assign(momentum.begin(), momentum.end());
    bytes = serializeCheckpoint(ck);
    if (auto st = writeFileAtomically(momentumPath(v), bytes); !st)
        return st.error();
    return f;
}

Status Coordinator::Impl::restore() {
    std::lock_guard lock(mu);
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
    auto q = db.prepare(
        "SELECT id, config_json, version, train_bytes, train_sha256 FROM runs ORDER BY id LIMIT 1");
    if (!q)
        return q.error();
    if (!q->step())
        return makeError("database: the run vanished");
    runId = q->integer(0);
    json c = json::parse(q->text(1), nullptr, false);
    if (c.is_discarded())
        return makeError("database: the run's configuration is not JSON");
    model.layers = c.at("layers").get<int>();
    model.heads = c.at("heads").get<int>();
    model.channels = c.at("channels").get<int>();
    model.maxSeqLen = c.at("max_seq_len").get<int>();
    model.vocabSize = c.at("vocab_size").get<int>();
    P = model.parameterCount();
    innerSteps = c.at("inner_steps").get<int>();
    minInnerSteps = c.at("min_inner_steps").get<int>();
    batch = c.at("batch").get<int>();
    seqLen = c.at("seq_len").get<int>();
    peakLr = c.at("peak_lr").get<float>();
    minLr = c.at("min_lr").get<float>();
    // Runs created before the run-wide schedule: its defaults.
    lrWarmupSteps = c.value("lr_warmup_steps", int64_t{100});
    lrDecaySteps = c.value("lr_decay_steps", int64_t{0});
    runSeed = c.at("seed").get<uint64_t>();
    version = q->integer(2);
    const int64_t trainBytes = q->integer(3);
    const std::string trainSha = q->text(4);

    if (auto m = ModelConfig::parse(cfg.model); m && !(*m == model))
        log("note: the state directory's run uses model " + model.describe() +
            "; the --model given (" + m->describe() + ") applies to new state directories only");

    auto t = readFile(dir("data") / "shard-0.bin");
    if (!t)
        return t.error();
    train = std::move(*t);
    if (static_cast<int64_t>(train.size()) != trainBytes ||
        net::toHex(net::sha256(train)) != trainSha)
        return makeError((dir("data") / "shard-0.bin").string() +
                         " does not match the run (size or SHA-256 differ); the state directory "
                         "is damaged");
    auto v = readFile(dir("data") / "validation.bin");
    if (!v)
        return v.error();
    validation = std::move(*v);
    shard0 = ServedFile{dir("data") / "shard-0.bin", trainBytes, net::sha256(train)};

    auto w = loadCheckpoint(weightsPath(version), model);
    if (!w)
        return makeError("weights of version " + std::to_string(version) + ": " +
                         w.error().message);
    theta = std::move(w->parameters);
    auto mom = loadCheckpoint(momentumPath(version), model);
    if (!mom)
        return makeError("momentum of version " + std::to_string(version) + ": " +
                         mom.error().message);
    vel = std::move(mom->parameters);
    if (static_cast<int64_t>(theta.size()) != P || static_cast<int64_t>(vel.size()) != P)
        return makeError("weights or momentum have the wrong size for " + model.describe());
    for (int64_t ver = std::max<int64_t>(0, version - cfg.maxStaleness); ver <= version; ++ver) {
        std::error_code ec;
        if (!fs::exists(weightsPath(ver), ec))
            continue;
        int64_t bytes = 0;
        auto h = hashFile(weightsPath(ver), &bytes);
        if (!h)
            return h.error();
        weightFiles[ver] = ServedFile{weightsPath(ver), bytes, *h};
    }
    sum.assign(static_cast<size_t>(P), 0.0f);
    if (auto st = rebuildRoundSum(); !st)
        return st;
    cleanStaleFiles(true);

    // Closed rounds whose validation loss was not recorded before a stop.
    auto pending = db.prepare(
        "SELECT round FROM rounds WHERE run_id = ? AND closed_unix IS NOT NULL AND val_loss IS "
        "NULL ORDER BY round");
    if (!pending)
        return pending.error();
    pending->bind(1, runId);
    while (pending->step()) {
        const int64_t r = pending->integer(0);
        auto ck = loadCheckpoint(weightsPath(r + 1), model);
        if (ck)
            evalQueue.push_back(EvalJob{r, std::move(ck->parameters)});
    }
    log("run " + std::to_string(runId) + ": model " + model.describe() + " (" + std::to_string(P) +
        " parameters), round " + std::to_string(version) + " open");
    return {};
}

Status Coordinator::Impl::rebuildRoundSum() {
    auto q = db.prepare(
        "SELECT work_unit_id, weight, payload_sha256 FROM results WHERE round = ? ORDER BY seq");
    if (!q)
        return q.error();
    q->bind(1, version);
    std::vector<uint16_t> halves(kChunkHalves);
    std::vector<float> decoded(kChunkHalves);
    int count = 0;
    while (q->step()) {
        const int64_t wu = q->integer(0);
        const float weight = static_cast<float>(q->real(1));
        const auto expected = toDigest(q->blob(2));
        const fs::path path = payloadPath(version, wu);
        FILE* f = std::fopen(path.c_str(), "rb");
        if (!f)
            return makeError("accepted result of work unit " + std::to_string(wu) +
                             " is missing its payload " + path.string() +
                             "; the state directory is damaged");
        net::Sha256 h;
        int64_t pos = 0;
        while (pos < P) {
            const size_t n = static_cast<size_t>(std::min<int64_t>(kChunkHalves, P - pos));
            if (std::fread(halves.data(), 2, n, f) != n)
                break;
            h.update(
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(halves.data()), 2 * n));
            // The same two steps as a live upload: decode (accumulate into zeros), then commit.
            std::fill_n(decoded.begin(), n, 0.0f);
            accumulateFp16(std::span(decoded).first(n), std::span(halves).first(n), 1.0f);
            addScaled(std::span(sum).subspan(static_cast<size_t>(pos), n),
                      std::span(decoded).first(n), weight, &pool);
            pos += static_cast<int64_t>(n);
        }
        std::fclose(f);
        if (pos != P || h.finish() != expected)
            return makeError("the stored payload " + path.string() +
                             " is truncated or does not match its SHA-256; the state directory "
                             "is damaged");
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
    std::error_code ec;
    // Staging files of uploads cut short by a stop; while running they belong to live sessions.
    if (startup)
        for (auto& e : fs::directory_iterator(dir("uploads"), ec))
            fs::remove(e.path(), ec);
    std::set<std::string> keep;
    auto q = db.prepare("SELECT work_unit_id FROM results WHERE round = ?");
    if (q) {
        q->bind(1, version);
        while (q->step())
            keep.insert(std::to_string(q->integer(0)) + ".f16");
    }
    for (auto& e : fs::directory_iterator(dir("rounds"), ec)) {
        if (e.path().filename() != std::to_string(version)) {
            fs::remove_all(e.path(), ec);
            continue;
        }
        for (auto& f : fs::directory_iterator(e.path(), ec))
            if (!keep.count(f.path().filename().string()))
                fs::remove(f.path(), ec);
    }
    for (const char* sub : {"weights", "momentum"}) {
        for (auto& e : fs::directory_iterator(dir(sub), ec)) {
            const std::string name = e.path().filename().string();
            if (name.size() < 7 || name[0] != 'v' || !name.ends_with(".ckpt")) {
                if (name.ends_with(".tmp"))
                    fs::remove(e.path(), ec);
                continue;
            }
            const int64_t v = std::atoll(name.c_str() + 1);
            const bool isWeights = std::strcmp(sub, "weights") == 0;
            const int64_t oldest = isWeights ? version - cfg.maxStaleness - 1 : version;
            if (v < oldest || v > version)
                fs::remove(e.path(), ec);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Clients

Outcome<net::RegisterResponse> Coordinator::registerClient(std::string_view body) {
    auto req = net::RegisterRequest::fromJson(body);
    if (!req)
        return refuse(400, "bad_request", req.error().message);
    Impl& c = *m_impl;
    const std::string token = net::toHex(net::randomBytes(32));
    const auto tokenHash = net::sha256(token);
    std::lock_guard lock(c.mu);
    auto ins = c.db.prepare(
        "INSERT INTO clients(name, public_key, hardware, token_sha256, created_unix, "
        "last_seen_unix) VALUES (?, ?, ?, ?, ?, ?)");
    if (!ins)
        return internalError(ins.error().message);
    ins->bind(1, req->name)
        .bind(2, std::span<const uint8_t>(req->publicKey))
        .bind(3, req->hardware)
        .bind(4, std::span<const uint8_t>(tokenHash))
        .bind(5, c.now())
        .bind(6, c.now());
    if (auto st = ins->run(); !st)
        return internalError(st.error().message);
    net::RegisterResponse resp{c.db.lastInsertId(), token, c.key.publicKey()};
    c.log("client " + std::to_string(resp.clientId) + " registered: \"" + req->name + "\" (" +
          req->hardware + ")");
    return resp;
}

Outcome<int64_t> Coordinator::authenticate(std::string_view authorization) {
    constexpr std::string_view kPrefix = "Bearer ";
    if (authorization.empty())
        return refuse(401, "unauthorized",
                      "no bearer token: send 'Authorization: Bearer <token>' with the token "
                      "from POST /v1/clients");
    if (!authorization.starts_with(kPrefix) || authorization.size() > 200)
        return refuse(401, "unauthorized", "the Authorization header must be 'Bearer <token>'");
    const auto hash = net::sha256(authorization.substr(kPrefix.size()));
    Impl& c = *m_impl;
    std::lock_guard lock(c.mu);
    auto q = c.db.prepare("SELECT id FROM clients WHERE token_sha256 = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, std::span<const uint8_t>(hash));
    if (!q->step())
        return refuse(401, "unauthorized",
                      "the bearer token is not known to this coordinator; register again with "
                      "POST /v1/clients");
    const int64_t id = q->integer(0);
    // last_seen is informational: written at most once a minute per client, not on every
    // request (each write is a synced transaction).
    int64_t& written = c.lastSeenWritten[id];
    if (c.now() - written >= 60) {
        written = c.now();
        auto upd = c.db.prepare("UPDATE clients SET last_seen_unix = ? WHERE id = ?");
        if (upd)
            (void)upd->bind(1, written).bind(2, id).run();
    }
    return id;
}

// ---------------------------------------------------------------------------------------------
// Work

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
    const int64_t tokensPerStep = int64_t{c.batch} * c.seqLen;
    int H = c.innerSteps;
    if (req->tokensPerSecond > 0) {
        const double steps =
            req->tokensPerSecond * c.cfg.targetWorkUnitSeconds / static_cast<double>(tokensPerStep);
        H = static_cast<int>(std::clamp<double>(std::floor(steps), c.minInnerSteps, c.innerSteps));
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
            length = std::min<int64_t>(trainBytes,
                                       std::max<int64_t>(c.seqLen + 1, int64_t{H} * tokensPerStep));
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
        Rng rng(c.runSeed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(now));
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
        .bind(7, c.batch)
        .bind(8, c.seqLen)
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
    m.model = c.model;
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
    m.batch = c.batch;
    m.seqLen = c.seqLen;
    m.lr = c.lrDecaySteps > 0 ? LrSchedule{c.peakLr, c.minLr, c.lrWarmupSteps, c.lrDecaySteps}
                              : LrSchedule{c.peakLr, c.peakLr, c.lrWarmupSteps,
                                           std::max<int64_t>(1, c.lrWarmupSteps)};
    m.lrStartStep = c.version * c.innerSteps;
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
        auto upd = c.db.prepare(
            "UPDATE work_units SET state = 'abandoned', abandon_reason = ? WHERE id = ?");
        if (upd)
            (void)upd->bind(1, reply.reason).bind(2, workUnitId).run();
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

// ---------------------------------------------------------------------------------------------
// Uploads

struct UploadSession::State {
    Coordinator::Impl* c = nullptr;
    int64_t clientId = 0, wuId = 0, baseVersion = 0;
    int64_t maxTokens = 0;
    int maxSteps = 0;
    int64_t expectedBytes = 0;
    int64_t startedUnix = 0;
    net::PublicKey clientKey{};
    net::Signature signature{};
    bool wasAccepted = false;
    net::Sha256Digest storedDigest{};
    std::string storedReceipt;

    std::vector<uint8_t> head;
    std::optional<net::ResultHeader> header;
    net::Sha256Digest digest{};
    net::Sha256 payloadHash;
    std::vector<float> scratch;  // (P) decoded delta
    std::vector<uint16_t> chunk;
    size_t chunkBytes = 0;
    int64_t decoded = 0;  // halves decoded into scratch
    int64_t received = 0;
    double sumSquares = 0;
    int fd = -1;
    fs::path tmpPath;
    bool finished = false;

    ~State();
    std::optional<Refusal> flush();
    std::optional<Outcome<std::string>> onHeader();
};

UploadSession::UploadSession(std::unique_ptr<State> state) : m_s(std::move(state)) {}
UploadSession::~UploadSession() = default;

UploadSession::State::~State() {
    if (fd >= 0)
        ::close(fd);
    std::error_code ec;
    if (!tmpPath.empty())
        fs::remove(tmpPath, ec);
    if (c == nullptr)
        return;  // refused before it took a slot
    std::lock_guard lock(c->mu);
    c->uploading.erase(wuId);
    if (--c->uploadsPerClient[clientId] <= 0)
        c->uploadsPerClient.erase(clientId);
    --c->uploadsTotal;
    // Keep one buffer for the next upload; more would hold P floats each while idle.
    if (!scratch.empty() && c->scratchPool.empty())
        c->scratchPool.push_back(std::move(scratch));
}

std::vector<float> Coordinator::Impl::takeScratch() {
    std::vector<float> s;
    if (!scratchPool.empty()) {
        s = std::move(scratchPool.back());
        scratchPool.pop_back();
    }
    return s;
}

Outcome<std::unique_ptr<UploadSession>> Coordinator::beginUpload(int64_t clientId,
                                                                 int64_t workUnitId,
                                                                 int64_t contentLength,
                                                                 std::string_view signature,
                                                                 bool dryRun) {
    Impl& c = *m_impl;
    const int64_t expected = maxUploadBytes();
    auto state = std::make_unique<UploadSession::State>();
    {
        std::lock_guard lock(c.mu);
        auto q = c.db.prepare(
            "SELECT w.client_id, w.state, w.base_version, w.inner_steps, w.batch, w.seq_len, "
            "c.public_key, COALESCE(w.abandon_reason, '') FROM work_units w JOIN clients c ON "
            "c.id = w.client_id WHERE w.id = ?");
        if (!q)
            return internalError(q.error().message);
        q->bind(1, workUnitId);
        if (auto r = stepOwnWorkUnit(*q, workUnitId, clientId))
            return *r;
        if (contentLength < 0)
            return refuse(
                411, "length_required",
                "send Content-Length: a result is exactly " + std::to_string(expected) + " bytes");
        if (contentLength > expected)
            return refuse(413, "too_large",
                          "the body has " + std::to_string(contentLength) +
                              " bytes; a result for " + c.model.describe() + " is exactly " +
                              std::to_string(expected) + " bytes (128-byte header + 2 x " +
                              std::to_string(c.P) + " parameters)");
        if (contentLength != expected)
            return refuse(400, "wrong_size",
                          "the body has " + std::to_string(contentLength) +
                              " bytes; a result for " + c.model.describe() + " is exactly " +
                              std::to_string(expected) + " bytes (128-byte header + 2 x " +
                              std::to_string(c.P) + " parameters)");
        auto sig = net::signatureFromBase64(signature);
        if (signature.empty() || !sig)
            return refuse(400, "bad_signature",
                          signature.empty()
                              ? "the X-Tandem-Signature header (base64 Ed25519 signature of the "
                                "result digest) is missing"
                              : "X-Tandem-Signature: " + sig.error().message);
        const std::string st = q->text(1);
        const int64_t base = q->integer(2);
        if (st != "accepted" && c.version - base > c.cfg.maxStaleness)
            return refuse(409, "stale",
                          "work unit " + std::to_string(workUnitId) + " trained from version " +
                              std::to_string(base) + "; the run is at version " +
                              std::to_string(c.version) + " and accepts results at most " +
                              std::to_string(c.cfg.maxStaleness) + " version(s) old");
        if (st == "abandoned")
            return refuse(409, "work_unit_abandoned",
                          "work unit " + std::to_string(workUnitId) +
                              " was abandoned and its data reassigned: " + q->text(7));
        if (c.uploading.count(workUnitId))
            return refuse(409, "upload_in_progress",
                          "an upload for work unit " + std::to_string(workUnitId) +
                              " is already in progress; retry when it has ended");
        if (c.uploadsPerClient[clientId] >= c.cfg.maxUploadsPerClient) {
            if (c.uploadsPerClient[clientId] == 0)
                c.uploadsPerClient.erase(clientId);
            return refuse(429, "too_many_uploads",
                          "this client already has " + std::to_string(c.cfg.maxUploadsPerClient) +
                              " upload(s) in progress",
                          10);
        }
        if (c.uploadsTotal >= c.cfg.maxConcurrentUploads)
            return refuse(503, "busy",
                          "the coordinator is receiving " + std::to_string(c.uploadsTotal) +
                              " uploads; retry later",
                          15);
        if (dryRun)
            return std::unique_ptr<UploadSession>();
        state->c = &c;
        state->clientId = clientId;
        state->wuId = workUnitId;
        state->baseVersion = base;
        state->maxSteps = static_cast<int>(q->integer(3));
        state->maxTokens = q->integer(3) * q->integer(4) * q->integer(5);
        state->expectedBytes = expected;
        state->startedUnix = c.now();
        auto pk = q->blob(6);
        if (pk.size() == state->clientKey.size())
            std::memcpy(state->clientKey.data(), pk.data(), pk.size());
        state->signature = *sig;
        state->wasAccepted = st == "accepted";
        if (state->wasAccepted) {
            auto r = c.db.prepare(
                "SELECT r.result_sha256, p.json FROM results r JOIN receipts p ON "
                "p.work_unit_id = r.work_unit_id WHERE r.work_unit_id = ?");
            if (!r)
                return internalError(r.error().message);
            r->bind(1, workUnitId);
            if (!r->step())
                return internalError("accepted work unit without a receipt");
            state->storedDigest = toDigest(r->blob(0));
            state->storedReceipt = r->text(1);
        }
        c.uploading.insert(workUnitId);
        ++c.uploadsPerClient[clientId];
        ++c.uploadsTotal;
        if (!state->wasAccepted)
            state->scratch = c.takeScratch();
    }
    // From here the State destructor releases the slot.
    if (!state->wasAccepted) {
        state->scratch.assign(static_cast<size_t>(c.P), 0.0f);
        state->chunk.resize(kChunkHalves);
        state->tmpPath = c.dir("uploads") / (std::to_string(workUnitId) + "-" +
                                             net::toHex(net::randomBytes(6)) + ".part");
        state->fd = ::open(state->tmpPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (state->fd < 0)
            return internalError("cannot create " + state->tmpPath.string());
    }
    return std::unique_ptr<UploadSession>(new UploadSession(std::move(state)));
}

std::optional<Outcome<std::string>> UploadSession::State::onHeader() {
    auto h = net::parseResultHeader(head);
    if (!h)
        return Outcome<std::string>(refuse(400, "bad_header", h.error().message));
    if (h->workUnitId != wuId)
        return Outcome<std::string>(
            refuse(400, "bad_header",
                   "the result header names work unit " + std::to_string(h->workUnitId) +
                       " but was sent to /v1/results/" + std::to_string(wuId)));
    if (h->parameterCount != c->P)
        return Outcome<std::string>(refuse(422, "wrong_size",
                                           "the result has " + std::to_string(h->parameterCount) +
                                               " parameters; the run's model " +
                                               c->model.describe() + " has " +
                                               std::to_string(c->P)));
    digest = net::resultDigest(*h);
    if (!net::verifySignature(clientKey, digest, signature))
        return Outcome<std::string>(
            refuse(403, "bad_signature",
                   "the signature does not verify with this client's registered public key over "
                   "the result digest (SHA-256 of the 128-byte header)"));
    if (wasAccepted) {
        if (digest == storedDigest)
            return Outcome<std::string>(storedReceipt);
        return Outcome<std::string>(
            refuse(409, "duplicate",
                   "work unit " + std::to_string(wuId) +
                       " already has an accepted result with a different digest; a work unit "
                       "counts once"));
    }
    if (h->tokens > maxTokens || h->steps > maxSteps)
        return Outcome<std::string>(refuse(
            422, "bad_header",
            "the result claims " + std::to_string(h->tokens) + " tokens in " +
                std::to_string(h->steps) + " steps; the work unit allows at most " +
                std::to_string(maxTokens) + " tokens in " + std::to_string(maxSteps) + " steps"));
    header = *h;
    return std::nullopt;
}

std::optional<Refusal> UploadSession::State::flush() {
    if (chunkBytes == 0)
        return std::nullopt;
    const size_t n = chunkBytes / 2;
    std::span<const uint16_t> halves(chunk.data(), n);
    const auto* bytes = reinterpret_cast<const uint8_t*>(chunk.data());
    size_t written = 0;
    while (written < n * 2) {
        ssize_t w = ::write(fd, bytes + written, n * 2 - written);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return internalError("cannot write " + tmpPath.string() + ": " + std::strerror(errno));
        written += static_cast<size_t>(w);
    }
    // Start writing back what has arrived, so that the fsync at the end has little left to do.
    ::sync_file_range(fd, 2 * decoded, static_cast<off_t>(n * 2), SYNC_FILE_RANGE_WRITE);
    const Fp16Scan scan = scanFp16(halves);
    if (scan.nonFinite > 0)
        return refuse(422, "non_finite",
                      "the payload holds " + std::to_string(scan.nonFinite) +
                          " NaN or Inf value(s) among parameters " + std::to_string(decoded) +
                          ".." + std::to_string(decoded + static_cast<int64_t>(n) - 1) +
                          "; a worker must not send a failed work unit");
    sumSquares += scan.sumSquares;
    accumulateFp16(std::span(scratch).subspan(static_cast<size_t>(decoded), n), halves, 1.0f);
    decoded += static_cast<int64_t>(n);
    chunkBytes = 0;
    return std::nullopt;
}

std::optional<Outcome<std::string>> UploadSession::feed(std::span<const uint8_t> bytes) {
    State& s = *m_s;
    s.received += static_cast<int64_t>(bytes.size());
    if (s.received > s.expectedBytes)
        return Outcome<std::string>(refuse(400, "wrong_size", "the body is longer than declared"));
    if (s.head.size() < net::kResultHeaderBytes) {
        const size_t take = std::min(bytes.size(), net::kResultHeaderBytes - s.head.size());
        s.head.insert(s.head.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(take));
        bytes = bytes.subspan(take);
        if (s.head.size() < net::kResultHeaderBytes)
            return std::nullopt;
        if (auto answer = s.onHeader())
            return answer;
    }
    if (bytes.empty())
        return std::nullopt;
    s.payloadHash.update(bytes);
    auto* chunkBytes = reinterpret_cast<uint8_t*>(s.chunk.data());
    const size_t capacity = s.chunk.size() * 2;
    while (!bytes.empty()) {
        const size_t take = std::min(bytes.size(), capacity - s.chunkBytes);
        std::memcpy(chunkBytes + s.chunkBytes, bytes.data(), take);
        s.chunkBytes += take;
        bytes = bytes.subspan(take);
        if (s.chunkBytes == capacity)
            if (auto r = s.flush())
                return Outcome<std::string>(*r);
    }
    if (s.c->now() - s.startedUnix > s.c->cfg.maxUploadSeconds)
        return Outcome<std::string>(refuse(
            408, "too_slow",
            "the upload took longer than " + std::to_string(s.c->cfg.maxUploadSeconds) + " s"));
    return std::nullopt;
}

double Coordinator::Impl::normReference() {
    for (int64_t r : {version, version - 1}) {
        auto q = db.prepare("SELECT norm FROM results WHERE round = ? ORDER BY norm");
        if (!q)
            return 0;
        q->bind(1, r);
        std::vector<double> norms;
        while (q->step())
            norms.push_back(q->real(0));
        if (!norms.empty())
            return norms[norms.size() / 2];
    }
    return 0;
}

Outcome<std::string> UploadSession::finish(bool complete) {
    State& s = *m_s;
    Coordinator::Impl& c = *s.c;
    if (s.finished)
        return internalError("upload finished twice");
    s.finished = true;
    if (!complete || s.received != s.expectedBytes)
        return refuse(400, "truncated",
                      "the body ended after " + std::to_string(s.received) + " of " +
                          std::to_string(s.expectedBytes) + " bytes; nothing was counted");
    if (s.wasAccepted || !s.header)
        return internalError("upload state");
    if ((s.chunkBytes % 2) != 0)
        return refuse(400, "truncated", "odd payload length");
    if (auto r = s.flush())
        return *r;
    if (s.payloadHash.finish() != s.header->payloadSha256)
        return refuse(422, "digest_mismatch",
                      "the payload's SHA-256 differs from the one in the result header; the "
                      "data was damaged in transit or the header is wrong");
    if (::fsync(s.fd) != 0)
        return internalError("cannot flush " + s.tmpPath.string());
    ::close(s.fd);
    s.fd = -1;
    const double norm = std::sqrt(s.sumSquares);

    std::unique_lock lock(c.mu);
    c.closeCv.wait(lock, [&] { return !c.closing; });
    const int64_t now = c.now();
    {
        auto q =
            c.db.prepare("SELECT state, COALESCE(abandon_reason, '') FROM work_units WHERE id = ?");
        if (!q)
            return internalError(q.error().message);
        q->bind(1, s.wuId);
        if (!q->step())
            return internalError("work unit vanished");
        if (q->text(0) != "assigned")
            return refuse(409, "work_unit_abandoned",
                          "work unit " + std::to_string(s.wuId) +
                              " was abandoned while uploading: " + q->text(1));
    }
    const int64_t staleness = c.version - s.baseVersion;
    if (staleness > c.cfg.maxStaleness)
        return refuse(409, "stale",
                      "work unit " + std::to_string(s.wuId) + " trained from version " +
                          std::to_string(s.baseVersion) + "; the run moved on to version " +
                          std::to_string(c.version) + " during the upload");
    const double reference = c.normReference();
    if (reference > 0 && norm > c.cfg.maxNormRatio * reference)
        return refuse(422, "outlier_norm",
                      "the delta's norm " + fmt(norm) + " is more than " + fmt(c.cfg.maxNormRatio) +
                          " times the round's median " + fmt(reference) +
                          "; the result is refused as an outlier");
    const double weight =
        static_cast<double>(s.header->tokens) * std::pow(c.cfg.staleWeightFactor, staleness);

    // Durable payload first: a committed row always has its file.
    std::error_code ec;
    fs::create_directories(c.roundDir(c.version), ec);
    const fs::path final = c.payloadPath(c.version, s.wuId);
    if (::rename(s.tmpPath.c_str(), final.c_str()) != 0)
        return internalError("cannot move the payload into " + final.string());
    s.tmpPath.clear();
    (void)fsyncPath(c.roundDir(c.version), true);

    net::Receipt receipt;
    receipt.workUnitId = s.wuId;
    receipt.clientId = s.clientId;
    receipt.round = c.version;
    receipt.weight = weight;
    receipt.timeUnix = now;
    receipt.resultDigest = s.digest;
    receipt.sign(c.key);
    const std::string receiptJson = receipt.toJson();

    auto fail = [&](const std::string& what) {
        std::error_code e2;
        fs::remove(final, e2);
        return internalError(what);
    };
    {
        Transaction tx(c.db);
        if (!tx.started())
            return fail(tx.started().error().message);
        auto ins = c.db.prepare(
            "INSERT INTO results(work_unit_id, seq, round, weight, tokens, steps, loss_last, norm, "
            "payload_sha256, result_sha256, signature, received_unix) VALUES (?, (SELECT "
            "COALESCE(MAX(seq), 0) + 1 FROM results), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        auto rec = c.db.prepare("INSERT INTO receipts(work_unit_id, json) VALUES (?, ?)");
        auto wu = c.db.prepare("UPDATE work_units SET state = 'accepted' WHERE id = ?");
        auto rnd = c.db.prepare(
            "UPDATE rounds SET contributors = contributors + 1, tokens = tokens + ?, weight_sum = "
            "weight_sum + ? WHERE run_id = ? AND round = ?");
        if (!ins || !rec || !wu || !rnd)
            return fail("cannot prepare the result insert");
        ins->bind(1, s.wuId)
            .bind(2, c.version)
            .bind(3, weight)
            .bind(4, s.header->tokens)
            .bind(5, s.header->steps)
            .bind(6, static_cast<double>(s.header->lossLast))
            .bind(7, norm)
            .bind(8, std::span<const uint8_t>(s.header->payloadSha256))
            .bind(9, std::span<const uint8_t>(s.digest))
            .bind(10, std::span<const uint8_t>(s.signature))
            .bind(11, now);
        rec->bind(1, s.wuId).bind(2, receiptJson);
        wu->bind(1, s.wuId);
        rnd->bind(1, s.header->tokens).bind(2, weight).bind(3, c.runId).bind(4, c.version);
        for (Statement* st : {&*ins, &*rec, &*wu, &*rnd})
            if (auto r = st->run(); !r)
                return fail(r.error().message);
        if (auto r = tx.commit(); !r)
            return fail(r.error().message);
    }
    addScaled(c.sum, s.scratch, static_cast<float>(weight), &c.pool);
    int64_t contributors = 0;
    {
        auto q = c.db.prepare("SELECT contributors FROM rounds WHERE run_id = ? AND round = ?");
        if (q) {
            q->bind(1, c.runId).bind(2, c.version);
            if (q->step())
                contributors = q->integer(0);
        }
    }
    const int64_t needed = c.roundQuorum();
    c.log("result of work unit " + std::to_string(s.wuId) + " accepted into round " +
          std::to_string(c.version) + ": " + std::to_string(s.header->tokens) + " tokens, weight " +
          fmt(weight, 6) + ", norm " + fmt(norm) + ", loss " + fmt(s.header->lossFirst) + " -> " +
          fmt(s.header->lossLast) + " (" + std::to_string(contributors) + "/" +
          std::to_string(needed) + ")");
    if (contributors >= needed) {
        if (auto st = c.closeRound(lock); !st)
            c.log("error: closing the round failed: " + st.error().message);
    }
    return receiptJson;
}

// ---------------------------------------------------------------------------------------------
// Rounds

Status Coordinator::Impl::closeRound(std::unique_lock<std::mutex>& lock) {
    const int64_t r = version;
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
    std::vector<std::pair<int64_t, double>> late;  // (base version, weight sum)
    {
        auto q = db.prepare(
            "SELECT w.base_version, SUM(s.weight) FROM results s JOIN work_units w ON w.id = "
            "s.work_unit_id WHERE w.run_id = ? AND s.round = ? AND w.base_version < ? GROUP BY "
            "w.base_version");
        if (!q)
            return q.error();
        q->bind(1, runId).bind(2, r).bind(3, r);
        while (q->step())
            late.emplace_back(q->integer(0), q->real(1));
    }
    // The outer step and the file reads and writes (seconds for a large model) run without the
    // lock, so that heartbeats, downloads and status stay responsive; commits wait on `closing`,
    // and nothing else changes theta, vel or sum.
    closing = true;
    lock.unlock();
    std::vector<float> newTheta, newVel;
    auto published = [&]() -> Expected<ServedFile> {
        std::vector<float> rebased;
        if (!late.empty())
            rebased = sum;
        for (const auto& [base, weight] : late) {
            auto older = loadCheckpoint(weightsPath(base), model);
            if (!older)
                return makeError("re-basing the results trained from version " +
                                 std::to_string(base) + ": " + older.error().message);
            if (older->parameters.size() != theta.size())
                return makeError("weights of version " + std::to_string(base) +
                                 " have the wrong size for " + model.describe());
            coord::rebaseOnto(rebased, older->parameters, theta, static_cast<float>(weight), &pool);
        }
        newTheta = theta;
        newVel = vel;
        outerNesterovStep(newTheta, newVel, late.empty() ? sum : rebased,
                          static_cast<float>(1.0 / weightSum), cfg.outer, &pool);
        return publishWeights(r + 1, newTheta, newVel);
    }();
    lock.lock();
    closing = false;
    closeCv.notify_all();
    if (!published)
        return published.error();
    const int64_t t = now();
    {
        Transaction tx(db);
        if (!tx.started())
            return tx.started();
        auto a = db.prepare("UPDATE rounds SET closed_unix = ? WHERE run_id = ? AND round = ?");
        auto b = db.prepare(
            "INSERT INTO rounds(run_id, round, opened_unix, deadline_unix) VALUES (?, ?, ?, ?)");
        auto d = db.prepare("UPDATE runs SET version = ? WHERE id = ?");
        auto e = db.prepare(
            "UPDATE work_units SET state = 'abandoned', abandon_reason = 'the run moved on; its "
            "base version is beyond the staleness bound' WHERE run_id = ? AND state = 'assigned' "
            "AND base_version < ?");
        if (!a || !b || !d || !e)
            return makeError("cannot prepare the round close");
        a->bind(1, t).bind(2, runId).bind(3, r);
        b->bind(1, runId).bind(2, r + 1).bind(3, t).bind(4, t + cfg.roundTimeoutSeconds);
        d->bind(1, r + 1).bind(2, runId);
        e->bind(1, runId).bind(2, r + 1 - cfg.maxStaleness);
        for (Statement* st : {&*a, &*b, &*d, &*e})
            if (auto s = st->run(); !s)
                return s;
        if (auto s = tx.commit(); !s)
            return s;
    }
    theta.swap(newTheta);
    vel.swap(newVel);
    std::fill(sum.begin(), sum.end(), 0.0f);
    version = r + 1;
    weightFiles[version] = *published;
    while (!weightFiles.empty() && weightFiles.begin()->first < version - cfg.maxStaleness)
        weightFiles.erase(weightFiles.begin());
    cleanStaleFiles(false);
    evalQueue.push_back(EvalJob{r, theta});
    evalCv.notify_all();
    log("round " + std::to_string(r) + " closed: " + std::to_string(contributors) +
        " contributor(s), " + std::to_string(tokens) + " tokens, weight " + fmt(weightSum, 8) +
        (late.empty() ? "" : " (late results re-based onto version " + std::to_string(r) + ")") +
        "; version " + std::to_string(version) + " published");
    return {};
}

int64_t Coordinator::Impl::roundQuorum() {
    if (!cfg.quorumOfActiveWorkers)
        return cfg.quorum;
    auto q = db.prepare(
        "SELECT COUNT(*) FROM (SELECT client_id FROM work_units WHERE run_id = ? AND state = "
        "'assigned' AND heartbeat_unix >= ? UNION SELECT w.client_id FROM results s JOIN "
        "work_units w ON w.id = s.work_unit_id WHERE w.run_id = ? AND s.round = ?)");
    int64_t active = 0;
    if (q) {
        q->bind(1, runId)
            .bind(2, now() - cfg.heartbeatTimeoutSeconds)
            .bind(3, runId)
            .bind(4, version);
        if (q->step())
            active = q->integer(0);
    }
    return std::max<int64_t>(cfg.quorum, active);
}

void Coordinator::Impl::abandonTimedOut() {
    const int64_t t = now();
    auto q = db.prepare(
        "SELECT id, heartbeat_unix, deadline_unix FROM work_units WHERE run_id = ? AND state = "
        "'assigned' AND (heartbeat_unix < ? OR deadline_unix < ?)");
    if (!q)
        return;
    q->bind(1, runId).bind(2, t - cfg.heartbeatTimeoutSeconds).bind(3, t);
    std::vector<std::pair<int64_t, std::string>> victims;
    while (q->step()) {
        const int64_t id = q->integer(0);
        if (uploading.count(id))
            continue;  // its result is arriving
        std::string why = q->integer(2) < t
                              ? "its deadline passed"
                              : "no heartbeat for " + std::to_string(t - q->integer(1)) + " s";
        victims.emplace_back(id, why + "; its data was reassigned");
    }
    for (auto& [id, why] : victims) {
        auto u = db.prepare(
            "UPDATE work_units SET state = 'abandoned', abandon_reason = ? WHERE id = ? AND state "
            "= 'assigned'");
        if (u)
            (void)u->bind(1, why).bind(2, id).run();
        log("work unit " + std::to_string(id) + " abandoned: " + why);
    }
}

void Coordinator::tickImpl(Impl& c) {
    std::unique_lock lock(c.mu);
    if (c.stopping || c.closing)
        return;
    c.abandonTimedOut();
    auto q = c.db.prepare(
        "SELECT deadline_unix, contributors FROM rounds WHERE run_id = ? AND round = ?");
    if (!q)
        return;
    q->bind(1, c.runId).bind(2, c.version);
    if (!q->step())
        return;
    const int64_t deadline = q->integer(0), contributors = q->integer(1);
    // A worker that went silent no longer holds up a round that waits for the active ones.
    if (contributors > 0 && c.cfg.quorumOfActiveWorkers && contributors >= c.roundQuorum()) {
        if (auto st = c.closeRound(lock); !st)
            c.log("error: closing the round failed: " + st.error().message);
        return;
    }
    if (c.now() < deadline)
        return;
    if (contributors > 0) {
        c.log("round " + std::to_string(c.version) + " reached its deadline with " +
              std::to_string(contributors) + " of " + std::to_string(c.roundQuorum()) + " results");
        if (auto st = c.closeRound(lock); !st)
            c.log("error: closing the round failed: " + st.error().message);
    } else {
        auto u = c.db.prepare("UPDATE rounds SET deadline_unix = ? WHERE run_id = ? AND round = ?");
        if (u)
            (void)u->bind(1, c.now() + c.cfg.roundTimeoutSeconds)
                .bind(2, c.runId)
                .bind(3, c.version)
                .run();
    }
}

void Coordinator::tick() {
    tickImpl(*m_impl);
}

// ---------------------------------------------------------------------------------------------
// Validation

std::optional<double> Coordinator::Impl::evaluate(std::span<const float> weights,
                                                  std::string* error) {
    const int T = model.maxSeqLen;
    const int B = std::max(1, cfg.validationBatch);
    const int64_t windows = int64_t{B} * std::max(1, cfg.validationBatches);
    const int64_t len = static_cast<int64_t>(validation.size());
    if (len < T + 1) {
        *error = "the validation text is shorter than one window";
        return std::nullopt;
    }
    auto backend = makeCpuBackend("cpu", std::max(1, cfg.threads));
    if (!backend) {
        *error = backend.error().message;
        return std::nullopt;
    }
    if (auto st = (*backend)->allocate(model, B, T); !st) {
        *error = st.error().message;
        return std::nullopt;
    }
    if (auto st = (*backend)->loadParameters(weights); !st) {
        *error = st.error().message;
        return std::nullopt;
    }
    std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
    double total = 0;
    int batches = 0;
    // Fixed, evenly spaced windows: every round is measured on the same text.
    for (int64_t w0 = 0; w0 < windows; w0 += B) {
        for (int b = 0; b < B; ++b) {
            const int64_t w = w0 + b;
            const int64_t off = windows > 1 ? w * (len - T - 1) / (windows - 1) : 0;
            for (int t = 0; t < T; ++t) {
                inputs[static_cast<size_t>(b) * T + t] = validation[static_cast<size_t>(off + t)];
                targets[static_cast<size_t>(b) * T + t] =
                    validation[static_cast<size_t>(off + t + 1)];
            }
        }
        auto loss = (*backend)->forward(inputs, targets, B, T);
        if (!loss) {
            *error = loss.error().message;
            return std::nullopt;
        }
        total += *loss;
        ++batches;
    }
    return total / batches;
}

void Coordinator::Impl::validatorLoop() {
    std::unique_lock lock(mu);
    while (true) {
        evalCv.wait(lock, [&] { return stopping || !evalQueue.empty(); });
        if (stopping)
            break;
        EvalJob job = std::move(evalQueue.front());
        evalQueue.pop_front();
        ++evalBusy;
        lock.unlock();
        std::string error;
        auto loss = evaluate(job.weights, &error);
        lock.lock();
        --evalBusy;
        if (loss) {
            auto u = db.prepare("UPDATE rounds SET val_loss = ? WHERE run_id = ? AND round = ?");
            if (u)
                (void)u->bind(1, *loss).bind(2, runId).bind(3, job.round).run();
            log("round " + std::to_string(job.round) + ": validation loss " + fmt(*loss, 6));
        } else {
            log("round " + std::to_string(job.round) + ": validation failed: " + error);
        }
        evalDoneCv.notify_all();
    }
}

void Coordinator::waitForValidation() {
    Impl& c = *m_impl;
    std::unique_lock lock(c.mu);
    if (!c.cfg.backgroundThreads) {
        // No validator thread: evaluate here.
        while (!c.evalQueue.empty()) {
            EvalJob job = std::move(c.evalQueue.front());
            c.evalQueue.pop_front();
            std::string error;
            auto loss = c.evaluate(job.weights, &error);
            if (loss) {
                auto u =
                    c.db.prepare("UPDATE rounds SET val_loss = ? WHERE run_id = ? AND round = ?");
                if (u)
                    (void)u->bind(1, *loss).bind(2, c.runId).bind(3, job.round).run();
            } else {
                c.log("validation failed: " + error);
            }
        }
        return;
    }
    c.evalDoneCv.wait(lock, [&] { return c.stopping || (c.evalQueue.empty() && c.evalBusy == 0); });
}

// ---------------------------------------------------------------------------------------------
// Status and files

net::RunStatus Coordinator::status() {
    Impl& c = *m_impl;
    std::lock_guard lock(c.mu);
    net::RunStatus s;
    s.runId = c.runId;
    s.round = c.version;
    s.model = c.model;
    s.workUnitSeconds = c.cfg.targetWorkUnitSeconds;
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
    auto a = c.db.prepare(
        "SELECT COUNT(DISTINCT client_id) FROM work_units WHERE run_id = ? AND state = 'assigned' "
        "AND heartbeat_unix >= ?");
    if (a) {
        a->bind(1, c.runId).bind(2, c.now() - c.cfg.heartbeatTimeoutSeconds);
        if (a->step())
            s.activeWorkers = static_cast<int>(a->integer(0));
    }
    return s;
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
    if (shard != 0)
        return refuse(
            404, "unknown_shard",
            "data shard " + std::to_string(shard) + " does not exist; the run has shard 0");
    return c.shard0;
}

int64_t Coordinator::runId() const {
    return m_impl->runId;
}
int64_t Coordinator::currentVersion() {
    std::lock_guard lock(m_impl->mu);
    return m_impl->version;
}
const ModelConfig& Coordinator::model() const {
    return m_impl->model;
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
int64_t Coordinator::maxUploadBytes() const {
    return static_cast<int64_t>(net::kResultHeaderBytes) + 2 * m_impl->P;
}

}  // namespace tandem::coord
