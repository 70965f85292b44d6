#include "engine.hpp"

#include "checkpoint.hpp"
#include "corpus.hpp"
#include "file_io.hpp"
#include "platform_probe.hpp"
#include "random.hpp"
#include "result_format.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* toString(EngineState state) {
    switch (state) {
        case EngineState::Idle:
            return "Idle";
        case EngineState::Fetching:
            return "Fetching";
        case EngineState::Downloading:
            return "Downloading";
        case EngineState::Training:
            return "Training";
        case EngineState::Uploading:
            return "Uploading";
        case EngineState::Paused:
            return "Paused";
        case EngineState::Snoozed:
            return "Snoozed";
        case EngineState::Waiting:
            return "Waiting";
        case EngineState::Backoff:
            return "Backoff";
        case EngineState::Stopped:
            return "Stopped";
    }
    return "?";
}

int64_t backoffDelayMs(const EngineConfig& config, int attempt, double u,
                       std::optional<int64_t> retryAfterMs) {
    if (retryAfterMs)
        return std::clamp<int64_t>(*retryAfterMs, 0, config.maxRetryAfterMs);
    double b = static_cast<double>(config.backoffInitialMs);
    for (int i = 1; i < attempt && b < static_cast<double>(config.backoffMaxMs); ++i)
        b *= 2;
    b = std::min(b, static_cast<double>(config.backoffMaxMs));
    const double jitter = std::clamp(config.backoffJitter, 0.0, 1.0);
    return static_cast<int64_t>(b - b * jitter * std::clamp(u, 0.0, 1.0));
}

Status writePrivateFileAtomically(const fs::path& path, std::string_view bytes) {
    const std::string tmp = path.string() + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return makeError("cannot create " + tmp + ": " + std::strerror(errno));
    ::fchmod(fd, 0600);
    size_t written = 0;
    while (written < bytes.size()) {
        ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            std::string why = std::strerror(errno);
            ::close(fd);
            return makeError("cannot write " + tmp + ": " + why);
        }
        written += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0)
        return makeError("cannot flush " + tmp + ": " + std::strerror(errno));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
        return makeError("cannot rename " + tmp + " to " + path.string() + ": " +
                         std::strerror(errno));
    const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
    return {};
}

namespace {

// Thrown by crashForTesting's checks: unwinds the engine thread without writing anything.
struct CrashStop {};

Status writeTextAtomically(const fs::path& path, const std::string& text) {
    return writeFileAtomically(
        path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

Expected<std::string> readText(const fs::path& path) {
    auto bytes = readFile(path);
    if (!bytes)
        return bytes.error();
    return std::string(bytes->begin(), bytes->end());
}

Expected<json> readJson(const fs::path& path) {
    auto text = readText(path);
    if (!text)
        return text.error();
    auto j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError(path.string() + " is not a JSON object");
    return j;
}

bool fileHasDigest(const fs::path& path, const net::Sha256Digest& digest) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
        return false;
    std::ifstream in(path, std::ios::binary);
    net::Sha256 h;
    std::vector<uint8_t> buf(1 << 16);
    while (in) {
        in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
        const auto n = in.gcount();
        if (n > 0)
            h.update(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
    }
    return h.finish() == digest;
}

std::string wuKey(int64_t id) {
    return std::to_string(id);
}

struct Registration {
    std::string coordinatorUrl;
    int64_t clientId = 0;
    std::string token;
    net::PublicKey coordinatorKey{};
};

// A finished result on disk, waiting for its receipt.
struct PendingResult {
    int64_t workUnitId = 0;
    std::string uploadUrl;
    fs::path file;
    fs::path infoFile;
    int64_t bytes = 0;
    net::Sha256Digest digest{};
    net::Signature signature{};
    int64_t steps = 0;
    float lossLast = 0;
    bool stillWantedChecked = false;  // asked the coordinator before the first upload
};

// The unit in training.
struct ActiveUnit {
    net::Manifest manifest;
    fs::path dir;
    bool downloaded = false;
    int64_t step = 0;
    uint64_t samplerState = 0;
    std::optional<float> lossFirst, lossLast;
    double lossSum = 0;
    int64_t tokens = 0;
    double computeSeconds = 0;
    std::string checkpointFile;  // within dir; empty: start from the downloaded weights
};

enum class TrainOutcome { Finished, Interrupted, Abandoned, Failed, Retry };

}  // namespace

struct Engine::Impl {
    EngineConfig cfg;
    Dependencies deps;
    Ledger* ledger = nullptr;
    std::optional<net::SigningKey> key;
    // Device samples are spaced by the clock across work units (units are often shorter than
    // the interval); set when training first starts. Engine thread only.
    std::optional<int64_t> lastSampleMs;

    mutable std::mutex mu;
    std::condition_variable cv;
    uint64_t generation = 0;  // bumped by every command, wake and settled upload
    bool pauseRequested = false;
    bool quitRequested = false;
    bool finishFlag = false;
    std::optional<int64_t> snoozeUntil;
    std::atomic<bool> crashed{false};
    bool threadEnded = false;
    bool uploadStop = false;
    RulesConfig rules;
    EngineSnapshot snap;
    std::deque<PendingResult> queue;

    // Engine thread only.
    std::optional<Registration> reg;
    std::optional<ActiveUnit> active;
    std::unique_ptr<Backend> backend;
    ModelConfig backendModel;
    int backendB = 0, backendT = 0;
    Rng jitter{1};
    int backoffAttempt = 0;
    int64_t notBeforeMs = 0;
    EngineState notBeforeState = EngineState::Backoff;
    std::string notBeforeReason;
    std::atomic<bool> heldByTemperature{false};  // written by the engine thread, read by both
    int64_t lastRulesCheckMs = INT64_MIN;
    double measuredTokensPerSecond = 0;
    int trainedThisSession = 0;
    int settledThisSession = 0;

    std::thread engineThread;
    std::thread uploadThread;

    // --- helpers ---
    int64_t now() const { return deps.clock->nowMs(); }
    fs::path dir() const { return cfg.dataDir; }

    void hook(const char* point) const {
        if (cfg.testHook)
            cfg.testHook(point);
    }

    void checkCrash() const {
        if (crashed.load())
            throw CrashStop{};
    }

    void log(EventLevel level, const std::string& message) {
        if (crashed.load())
            return;
        if (level >= EventLevel::Info)
            (void)ledger->recordEvent(now(), level, message);
        if (level >= EventLevel::Warning) {
            std::lock_guard lock(mu);
            if (level == EventLevel::Error)
                snap.lastError = message;
        }
        if (deps.observer)
            deps.observer->logLine(level, message);
    }

    void notifyAll() {
        {
            std::lock_guard lock(mu);
            ++generation;
        }
        cv.notify_all();
    }

    std::string describe(int64_t atMs) const { return describeLocalTime(atMs, now(), *deps.zone); }

    void setState(EngineState state, std::string reason, std::string nextAction = {},
                  std::optional<int64_t> nextAtMs = std::nullopt) {
        bool changed = false;
        {
            std::lock_guard lock(mu);
            changed = snap.state != state || snap.reason != reason;
            snap.state = state;
            snap.reason = reason;
            switch (state) {
                case EngineState::Waiting:
                case EngineState::Backoff:
                case EngineState::Idle:
                case EngineState::Snoozed:
                    snap.stateText = reason.empty() ? toString(state) : reason;
                    break;
                default:
                    snap.stateText = toString(state);
            }
            snap.nextAction = std::move(nextAction);
            snap.nextActionAtMs = nextAtMs;
            snap.finishThenPause = finishFlag;
            snap.snoozedUntilMs = snoozeUntil;
        }
        if (changed && deps.observer && !crashed.load())
            deps.observer->stateChanged(state, reason);
    }

    // Waits one poll interval of real time, or less when a command arrives or the clock reaches
    // untilMs.
    void waitOnce(std::optional<int64_t> untilMs = std::nullopt) {
        std::unique_lock lock(mu);
        const uint64_t seen = generation;
        const auto end = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(std::max<int64_t>(1, cfg.pollIntervalMs));
        while (generation == seen && std::chrono::steady_clock::now() < end) {
            if (untilMs && now() >= *untilMs)
                return;
            cv.wait_for(lock, std::chrono::milliseconds(
                                  std::clamp<int64_t>(cfg.pollIntervalMs / 4, 1, 50)));
        }
    }

    void refreshTotals() {
        auto t = ledger->totals();
        std::lock_guard lock(mu);
        if (t)
            snap.totals = *t;
        snap.pendingUploads = static_cast<int>(queue.size());
        snap.workUnitsThisSession = trainedThisSession;
    }

    void recordTransfer(Direction direction, const std::string& purpose, int64_t bytes,
                        int64_t startMs, bool ok, int64_t workUnitId, const std::string& detail) {
        if (crashed.load())
            return;
        Transfer t;
        t.atMs = startMs;
        t.direction = direction;
        t.purpose = purpose;
        t.bytes = bytes;
        t.durationMs = std::max<int64_t>(0, now() - startMs);
        t.ok = ok;
        t.workUnitId = workUnitId > 0 ? wuKey(workUnitId) : std::string();
        t.detail = detail;
        (void)ledger->recordTransfer(t);
    }

    void transition(int64_t workUnitId, WorkUnitState state, const std::string& detail = {}) {
        if (crashed.load())
            return;
        if (auto st = ledger->recordTransition(wuKey(workUnitId), state, now(), detail); !st)
            log(EventLevel::Warning, "ledger: " + st.error().message);
    }

    // --- rules ---
    RulesVerdict evaluate(int64_t nextDownloadBytes, int64_t nextUploadBytes, bool forUpload) {
        RuleInputs in;
        in.nowMs = now();
        if (deps.probe) {
            const RuleProbe p = deps.probe();
            in.idleSeconds = p.idleSeconds;
            in.power = p.power;
            in.temperatureC = p.temperatureC;
        }
        in.heldByTemperature = heldByTemperature;
        if (auto used = ledger->bytesUsedToday(in.nowMs, *deps.zone)) {
            in.bytesUpToday = used->up;
            in.bytesDownToday = used->down;
        }
        in.nextDownloadBytes = nextDownloadBytes;
        in.nextUploadBytes = nextUploadBytes;
        RulesConfig rc;
        {
            std::lock_guard lock(mu);
            rc = rules;
        }
        if (forUpload) {
            // Uploads of finished work only answer to the upload cap.
            RulesConfig only;
            only.pauseOnBattery = false;
            only.dailyUploadCapBytes = rc.dailyUploadCapBytes;
            return evaluateRules(only, in, *deps.zone);
        }
        // The caps hold transfers, not compute: the download cap only before a download.
        rc.dailyUploadCapBytes = 0;
        if (nextDownloadBytes <= 0)
            rc.dailyDownloadCapBytes = 0;
        RulesVerdict v = evaluateRules(rc, in, *deps.zone);
        heldByTemperature = std::any_of(v.holds.begin(), v.holds.end(),
                                        [](const Hold& h) { return h.rule == Rule::TooHot; });
        return v;
    }

    // Blocks while paused, snoozed or held by a rule. onHold runs once before the first wait
    // (the checkpoint of a unit in training). haveUnit: a unit is in hand, so "finish then
    // pause" does not pause yet. Returns false when the engine is to quit.
    bool gate(bool haveUnit, int64_t nextDownloadBytes, const std::function<void()>& onHold,
              bool forceRules) {
        bool held = false;
        auto hold = [&] {
            if (!held && onHold)
                onHold();
            held = true;
        };
        bool rulesDue = forceRules;
        for (;;) {
            checkCrash();
            bool quit = false, pause = false, snoozed = false;
            int64_t until = 0;
            {
                std::lock_guard lock(mu);
                quit = quitRequested;
                if (!haveUnit && finishFlag) {
                    finishFlag = false;
                    pauseRequested = true;
                }
                pause = pauseRequested;
                if (snoozeUntil && now() >= *snoozeUntil)
                    snoozeUntil.reset();
                snoozed = snoozeUntil.has_value();
                until = snoozeUntil.value_or(0);
            }
            if (quit)
                return false;
            if (pause) {
                hold();
                setState(EngineState::Paused, "Paused", "resume to continue");
                waitOnce();
                rulesDue = true;
                continue;
            }
            if (snoozed) {
                hold();
                setState(EngineState::Snoozed, "Snoozed until " + describe(until),
                         "resume at " + describe(until), until);
                waitOnce(until);
                rulesDue = true;
                continue;
            }
            if (rulesDue || cfg.rulesCheckIntervalMs <= 0 ||
                now() >= lastRulesCheckMs + cfg.rulesCheckIntervalMs) {
                lastRulesCheckMs = now();
                RulesVerdict v = evaluate(nextDownloadBytes, 0, false);
                if (!v.allowed()) {
                    hold();
                    const auto& h = v.holds.front();
                    setState(EngineState::Waiting, h.reason,
                             h.mayChangeAtMs ? "check again at " + describe(*h.mayChangeAtMs)
                                             : "check again when it changes",
                             h.mayChangeAtMs);
                    waitOnce(h.mayChangeAtMs);
                    rulesDue = true;
                    continue;
                }
            }
            return true;
        }
    }

    void backoff(const std::string& what, const ApiFailure& failure) {
        ++backoffAttempt;
        double u;
        {
            std::lock_guard lock(mu);
            u = static_cast<double>(jitter.next() >> 11) * 0x1.0p-53;
        }
        const int64_t delay = backoffDelayMs(cfg, backoffAttempt, u, failure.retryAfterMs);
        notBeforeMs = now() + delay;
        notBeforeState = EngineState::Backoff;
        notBeforeReason = what + ": " + failure.message;
        log(EventLevel::Warning,
            notBeforeReason + " (retry in " + std::to_string(delay / 1000) + " s)");
    }
    void backoffLocal(const std::string& message) {
        ApiFailure f;
        f.message = message;
        backoff("error", f);
    }

    // --- registration ---
    fs::path registrationFile() const { return dir() / "registration.json"; }

    void loadRegistration() {
        auto j = readJson(registrationFile());
        if (!j)
            return;
        try {
            Registration r;
            r.coordinatorUrl = (*j).at("coordinator_url").get<std::string>();
            r.clientId = (*j).at("client_id").get<int64_t>();
            r.token = (*j).at("token").get<std::string>();
            auto k = net::publicKeyFromBase64((*j).at("coordinator_public_key").get<std::string>());
            if (!k)
                return;
            r.coordinatorKey = *k;
            if (r.coordinatorUrl != cfg.coordinatorUrl) {
                log(EventLevel::Info, "the registration is for " + r.coordinatorUrl +
                                          "; registering with " + cfg.coordinatorUrl);
                return;
            }
            reg = r;
            deps.api->setToken(r.token);
            deps.api->setCoordinatorKey(r.coordinatorKey);
            std::lock_guard lock(mu);
            snap.registered = true;
        } catch (const std::exception&) {
            log(EventLevel::Warning, "registration.json is unreadable; registering again");
        }
    }

    bool doRegister() {
        setState(EngineState::Fetching, "registering", "register with " + cfg.coordinatorUrl);
        net::RegisterRequest req;
        req.name = cfg.clientName.empty() ? "tandem-worker" : cfg.clientName.substr(0, 100);
        req.publicKey = key->publicKey();
        req.hardware = cfg.hardwareSummary.substr(0, 2000);
        auto res = deps.api->registerClient(req);
        checkCrash();
        if (!res) {
            backoff("registration failed", res.error());
            return false;
        }
        Registration r;
        r.coordinatorUrl = cfg.coordinatorUrl;
        r.clientId = res->clientId;
        r.token = res->token;
        r.coordinatorKey = res->coordinatorPublicKey;
        json j = {{"coordinator_url", r.coordinatorUrl},
                  {"client_id", r.clientId},
                  {"token", r.token},
                  {"coordinator_public_key", net::toBase64(r.coordinatorKey)}};
        if (auto st = writePrivateFileAtomically(registrationFile(), j.dump(2)); !st) {
            backoffLocal(st.error().message);
            return false;
        }
        reg = r;
        deps.api->setToken(r.token);
        backoffAttempt = 0;
        {
            std::lock_guard lock(mu);
            snap.registered = true;
        }
        log(EventLevel::Info, "registered with " + cfg.coordinatorUrl + " as client " +
                                  std::to_string(r.clientId) + "; coordinator key " +
                                  net::toBase64(r.coordinatorKey) + " pinned");
        return true;
    }

    void dropRegistration(const std::string& why) {
        log(EventLevel::Warning, why + "; registering again");
        reg.reset();
        std::error_code ec;
        fs::remove(registrationFile(), ec);
        std::lock_guard lock(mu);
        snap.registered = false;
    }

    // --- recovery after a restart ---
    Expected<PendingResult> loadPending(const fs::path& infoFile) {
        auto j = readJson(infoFile);
        if (!j)
            return j.error();
        PendingResult p;
        try {
            p.workUnitId = (*j).at("work_unit_id").get<int64_t>();
            p.uploadUrl = (*j).at("upload_url").get<std::string>();
        } catch (const std::exception& e) {
            return makeError(infoFile.string() + ": " + e.what());
        }
        p.infoFile = infoFile;
        p.file = dir() / "results" / (wuKey(p.workUnitId) + ".result");
        auto bytes = readFile(p.file);
        if (!bytes)
            return bytes.error();
        auto header = net::parseResultHeader(*bytes);
        if (!header)
            return makeError(p.file.string() + ": " + header.error().message);
        if (net::sha256(std::span<const uint8_t>(*bytes).subspan(net::kResultHeaderBytes)) !=
                header->payloadSha256 ||
            static_cast<int64_t>(bytes->size()) != header->totalBytes())
            return makeError(p.file.string() + " is damaged (payload digest or size)");
        p.bytes = static_cast<int64_t>(bytes->size());
        p.digest = net::resultDigest(*header);
        p.steps = header->steps;
        p.lossLast = header->lossLast;
        p.signature = key->sign(p.digest);
        return p;
    }

    void removePending(const PendingResult& p) {
        std::error_code ec;
        fs::remove(p.file, ec);
        fs::remove(p.infoFile, ec);
    }

    void recover() {
        std::error_code ec;
        fs::create_directories(dir() / "results", ec);
        fs::create_directories(dir() / "work", ec);
        fs::create_directories(dir() / "cache", ec);
        std::set<int64_t> haveResult;
        // Finished results.
        std::vector<fs::path> infos;
        for (const auto& e : fs::directory_iterator(dir() / "results", ec))
            if (e.path().extension() == ".json")
                infos.push_back(e.path());
        std::sort(infos.begin(), infos.end());
        for (const auto& info : infos) {
            auto p = loadPending(info);
            if (!p) {
                log(EventLevel::Error,
                    "dropping a result that cannot be sent: " + p.error().message);
                fs::remove(info, ec);
                continue;
            }
            haveResult.insert(p->workUnitId);
            auto row = ledger->workUnit(wuKey(p->workUnitId));
            if (row && *row &&
                ((*row)->state == WorkUnitState::Accepted ||
                 (*row)->state == WorkUnitState::Rejected)) {
                removePending(*p);  // settled before the crash; only the files were left
                continue;
            }
            if (row && *row && (*row)->state != WorkUnitState::Trained)
                transition(p->workUnitId, WorkUnitState::Trained, "restart: upload again");
            log(EventLevel::Info,
                "work unit " + wuKey(p->workUnitId) + ": result on disk, waiting for its receipt");
            // It may have reached the coordinator before the restart: upload again (idempotent,
            // the stored receipt comes back) rather than ask, since the coordinator would answer
            // "abandon: already accepted" and the receipt would be lost.
            p->stillWantedChecked = true;
            std::lock_guard lock(mu);
            queue.push_back(*p);
        }
        // The unit in training.
        std::vector<fs::path> dirs;
        for (const auto& e : fs::directory_iterator(dir() / "work", ec))
            if (e.is_directory())
                dirs.push_back(e.path());
        std::sort(dirs.begin(), dirs.end());
        for (const auto& d : dirs) {
            const auto manifestText = readText(d / "manifest.json");
            std::optional<net::Manifest> m;
            if (manifestText) {
                auto parsed = net::Manifest::fromJson(*manifestText);
                if (parsed && reg && parsed->verify(reg->coordinatorKey))
                    m = *parsed;
            }
            if (!m || haveResult.count(m->workUnitId) || active) {
                if (m && !haveResult.count(m->workUnitId)) {
                    transition(m->workUnitId, WorkUnitState::Abandoned,
                               "restart: another unit was in progress");
                }
                fs::remove_all(d, ec);
                continue;
            }
            ActiveUnit a;
            a.manifest = *m;
            a.dir = d;
            if (auto pj = readJson(d / "progress.json")) {
                try {
                    a.step = (*pj).at("step").get<int64_t>();
                    a.samplerState = std::stoull((*pj).at("sampler").get<std::string>());
                    if ((*pj).contains("loss_first"))
                        a.lossFirst = (*pj)["loss_first"].get<float>();
                    if ((*pj).contains("loss_last"))
                        a.lossLast = (*pj)["loss_last"].get<float>();
                    a.lossSum = (*pj).at("loss_sum").get<double>();
                    a.tokens = (*pj).at("tokens").get<int64_t>();
                    a.computeSeconds = (*pj).at("compute_seconds").get<double>();
                    a.checkpointFile = (*pj).at("checkpoint").get<std::string>();
                } catch (const std::exception&) {
                    a = ActiveUnit{};
                    a.manifest = *m;
                    a.dir = d;
                }
            }
            if (!a.checkpointFile.empty() && !fs::exists(d / a.checkpointFile, ec)) {
                a = ActiveUnit{};
                a.manifest = *m;
                a.dir = d;
            }
            // Make sure the ledger has the unit (a crash may have come before its row).
            auto row = ledger->workUnit(wuKey(m->workUnitId));
            if (row && !*row)
                recordNewUnit(*m);
            log(EventLevel::Info, "work unit " + wuKey(m->workUnitId) + ": resuming at step " +
                                      std::to_string(a.step) + " of " +
                                      std::to_string(m->innerSteps));
            active = a;
        }
        // Rows the files cannot back any more.
        if (auto rows = ledger->workUnits(100000)) {
            for (const auto& r : *rows) {
                const auto s = r.unit.state;
                const bool open = s == WorkUnitState::Assigned || s == WorkUnitState::Downloading ||
                                  s == WorkUnitState::Training;
                const bool pendingState = s == WorkUnitState::Trained ||
                                          s == WorkUnitState::Uploading ||
                                          s == WorkUnitState::Uploaded;
                int64_t id = 0;
                try {
                    id = std::stoll(r.unit.id);
                } catch (...) {
                    continue;
                }
                if (open && !(active && active->manifest.workUnitId == id))
                    transition(id, WorkUnitState::Abandoned, "restart: its files were gone");
                if (pendingState && !haveResult.count(id))
                    transition(id, WorkUnitState::Failed, "restart: its result file was gone");
            }
        }
        refreshTotals();
    }

    void recordNewUnit(const net::Manifest& m) {
        WorkUnitRecord r;
        r.id = wuKey(m.workUnitId);
        r.run = std::to_string(m.runId);
        r.baseVersion = m.baseVersion;
        r.config = m.model.describe();
        r.device = cfg.device;
        r.innerSteps = m.innerSteps;
        r.batchSize = m.batch;
        r.seqLen = m.seqLen;
        r.state = WorkUnitState::Assigned;
        r.createdAtMs = now();
        r.updatedAtMs = r.createdAtMs;
        if (auto st = ledger->recordWorkUnit(r); !st)
            log(EventLevel::Warning, "ledger: " + st.error().message);
    }

    // --- fetching ---
    void fetch() {
        setState(EngineState::Fetching, "asking for work", "request a work unit");
        net::WorkRequest req;
        req.device = cfg.deviceDescription.empty() ? cfg.device : cfg.deviceDescription;
        req.memoryBytes = cfg.deviceMemoryBytes;
        req.tokensPerSecond = measuredTokensPerSecond;
        if (auto d = PlatformProbe::diskSpace(dir()))
            req.freeDiskBytes = d->freeBytes;
        const int64_t startMs = now();
        auto res = deps.api->requestWork(req);
        checkCrash();
        if (!res) {
            if (res.error().httpStatus == 401) {
                dropRegistration("the coordinator does not know our token");
                return;
            }
            backoff("asking for work failed", res.error());
            return;
        }
        if (!res->manifest) {
            backoffAttempt = 0;
            notBeforeMs = now() + std::max<int64_t>(res->retryAfterMs, 1000);
            notBeforeState = EngineState::Idle;
            notBeforeReason = "no work available";
            log(EventLevel::Info, "no work available; asking again at " + describe(notBeforeMs));
            return;
        }
        const net::Manifest& m = *res->manifest;
        recordTransfer(Direction::Down, "manifest", static_cast<int64_t>(res->manifestJson.size()),
                       startMs, true, m.workUnitId, {});
        if (!m.verify(reg->coordinatorKey)) {
            backoffLocal("the manifest of work unit " + wuKey(m.workUnitId) +
                         " is not signed by the coordinator key pinned at registration; refused");
            return;
        }
        if (m.seqLen > m.model.maxSeqLen || m.batch <= 0 || m.innerSteps <= 0 ||
            m.dataLength <= m.seqLen) {
            backoffLocal("work unit " + wuKey(m.workUnitId) + " has an impossible shape (B=" +
                         std::to_string(m.batch) + ", T=" + std::to_string(m.seqLen) + ", data " +
                         std::to_string(m.dataLength) + " bytes)");
            return;
        }
        ActiveUnit a;
        a.manifest = m;
        a.dir = dir() / "work" / wuKey(m.workUnitId);
        std::error_code ec;
        fs::create_directories(a.dir, ec);
        if (auto st = writeTextAtomically(a.dir / "manifest.json", res->manifestJson); !st) {
            backoffLocal(st.error().message);
            return;
        }
        recordNewUnit(m);
        backoffAttempt = 0;
        log(EventLevel::Info,
            "work unit " + wuKey(m.workUnitId) + ": " + std::to_string(m.innerSteps) +
                " steps of " + std::to_string(m.batch) + "x" + std::to_string(m.seqLen) + " on " +
                m.model.describe() + ", from version " + std::to_string(m.baseVersion));
        active = a;
    }

    // --- downloading ---
    fs::path weightsPath(const net::Manifest& m) const {
        return dir() / "cache" / (net::toHex(m.weightsSha256) + ".weights");
    }
    fs::path dataPath(const net::Manifest& m) const {
        return dir() / "cache" / (net::toHex(m.dataSha256) + ".data");
    }

    bool download() {
        const net::Manifest& m = active->manifest;
        const fs::path wp = weightsPath(m), dp = dataPath(m);
        const bool haveWeights = fileHasDigest(wp, m.weightsSha256);
        const bool haveData = fileHasDigest(dp, m.dataSha256);
        if (haveWeights && haveData) {
            active->downloaded = true;
            return true;
        }
        const int64_t need = (haveWeights ? 0 : m.weightsBytes) + (haveData ? 0 : m.dataLength);
        if (!gate(true, need, nullptr, true))
            return false;
        // Keep the cache to what this unit needs.
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(dir() / "cache", ec)) {
            if (e.path() != wp && e.path() != dp &&
                e.path().string().find(".part") == std::string::npos)
                fs::remove(e.path(), ec);
        }
        transition(m.workUnitId, WorkUnitState::Downloading);
        setState(EngineState::Downloading, "downloading weights and data",
                 "train work unit " + wuKey(m.workUnitId));
        {
            std::lock_guard lock(mu);
            snap.current = currentInfo();
            snap.current->downloadBytesTotal = need;
        }
        int64_t doneBefore = 0;
        auto progress = [&](int64_t done, int64_t, double) {
            hook("download");
            if (crashed.load())
                return false;
            std::lock_guard lock(mu);
            if (snap.current)
                snap.current->downloadBytesDone = doneBefore + done;
            return !quitRequested && !pauseRequested;
        };
        auto one = [&](bool isWeights) -> bool {
            const int64_t startMs = now();
            auto res = isWeights ? deps.api->downloadWeights(m, wp, progress)
                                 : deps.api->downloadData(m, dp, progress);
            checkCrash();
            const char* what = isWeights ? "weights" : "data";
            if (!res) {
                recordTransfer(Direction::Down, what, res.error().bytesTransferred, startMs, false,
                               m.workUnitId, res.error().message);
                bool stopping;
                {
                    std::lock_guard lock(mu);
                    stopping = quitRequested || pauseRequested;
                }
                if (!stopping)
                    backoff(std::string("downloading the ") + what + " failed", res.error());
                return false;
            }
            recordTransfer(Direction::Down, what, res->bytesTransferred, startMs, true,
                           m.workUnitId, {});
            doneBefore += isWeights ? m.weightsBytes : m.dataLength;
            return true;
        };
        if (!haveWeights && !one(true))
            return false;
        if (!haveData && !one(false))
            return false;
        if (!fileHasDigest(wp, m.weightsSha256) || !fileHasDigest(dp, m.dataSha256)) {
            fs::remove(wp, ec);
            fs::remove(dp, ec);
            backoffLocal("a download does not match the SHA-256 of the manifest; removed it");
            return false;
        }
        active->downloaded = true;
        return true;
    }

    CurrentWorkUnit currentInfo() const {
        CurrentWorkUnit c;
        const auto& m = active->manifest;
        c.id = wuKey(m.workUnitId);
        c.runId = m.runId;
        c.baseVersion = m.baseVersion;
        c.model = m.model.describe();
        c.step = active->step;
        c.innerSteps = m.innerSteps;
        c.tokens = active->tokens;
        c.lossFirst = active->lossFirst;
        c.lossLast = active->lossLast;
        return c;
    }

    // --- training ---
    fs::path optimizerFile() const { return dir() / "optimizer.ckpt"; }
    fs::path optimizerInfo() const { return dir() / "optimizer.json"; }

    std::optional<OptimizerState> carriedMoments(const net::Manifest& m) {
        auto j = readJson(optimizerInfo());
        if (!j)
            return std::nullopt;
        try {
            if ((*j).at("run_id").get<int64_t>() != m.runId ||
                (*j).at("device").get<std::string>() != cfg.device ||
                (*j).at("model").get<std::string>() != m.model.describe())
                return std::nullopt;
        } catch (const std::exception&) {
            return std::nullopt;
        }
        auto ck = loadCheckpoint(optimizerFile(), m.model);
        if (!ck || !ck->optimizer)
            return std::nullopt;
        return ck->optimizer;
    }

    Status saveMoments(const net::Manifest& m, const Checkpoint& ck) {
        if (auto st = saveCheckpoint(optimizerFile(), ck); !st)
            return st;
        json j = {{"run_id", m.runId}, {"device", cfg.device}, {"model", m.model.describe()}};
        return writeTextAtomically(optimizerInfo(), j.dump());
    }

    Status checkpoint(uint64_t samplerState) {
        if (crashed.load())
            return {};
        ActiveUnit& a = *active;
        const ModelConfig& model = a.manifest.model;
        Checkpoint ck;
        ck.config = model;
        ck.parameters.resize(static_cast<size_t>(model.parameterCount()));
        if (auto st = backend->storeParameters(ck.parameters); !st)
            return st;
        auto opt = backend->storeOptimizerState();
        if (!opt)
            return opt.error();
        ck.optimizer = std::move(*opt);
        const std::string name = "ckpt-" + std::to_string(a.step) + ".ckpt";
        if (auto st = saveCheckpoint(a.dir / name, ck); !st)
            return st;
        hook("checkpoint");
        checkCrash();
        json j = {{"step", a.step},
                  {"sampler", std::to_string(samplerState)},
                  {"loss_sum", a.lossSum},
                  {"tokens", a.tokens},
                  {"compute_seconds", a.computeSeconds},
                  {"checkpoint", name}};
        if (a.lossFirst)
            j["loss_first"] = *a.lossFirst;
        if (a.lossLast)
            j["loss_last"] = *a.lossLast;
        if (auto st = writeTextAtomically(a.dir / "progress.json", j.dump()); !st)
            return st;
        checkCrash();
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(a.dir, ec)) {
            const std::string f = e.path().filename().string();
            if (f.rfind("ckpt-", 0) == 0 && f != name)
                fs::remove(e.path(), ec);
        }
        a.samplerState = samplerState;
        a.checkpointFile = name;
        (void)ledger->updateWorkUnitProgress(wuKey(a.manifest.workUnitId), a.tokens, a.step,
                                             a.computeSeconds, a.lossFirst, a.lossLast, now());
        return {};
    }

    void failUnit(const std::string& why) {
        const int64_t id = active->manifest.workUnitId;
        log(EventLevel::Error, "work unit " + wuKey(id) + " failed: " + why + "; nothing was sent");
        transition(id, WorkUnitState::Failed, why);
        std::error_code ec;
        fs::remove_all(active->dir, ec);
        active.reset();
        std::lock_guard lock(mu);
        snap.current.reset();
    }

    void abandonUnit(const std::string& why) {
        const int64_t id = active->manifest.workUnitId;
        log(EventLevel::Info, "work unit " + wuKey(id) + " abandoned: " + why);
        transition(id, WorkUnitState::Abandoned, why);
        std::error_code ec;
        fs::remove_all(active->dir, ec);
        active.reset();
        std::lock_guard lock(mu);
        snap.current.reset();
    }

    // While held, the backend's memory (parameters, moments, activations: tens of MB to GB) goes
    // back to the system. Between units it holds nothing unsaved (the moments are kept on disk);
    // during one, train() releases it only once the hold's checkpoint is written.
    void releaseBackend() {
        backend.reset();
        backendB = 0;
    }

    Status ensureBackend(const ModelConfig& model, int B, int T) {
        if (!backend) {
            auto b = deps.backends(cfg.device);
            if (!b)
                return b.error();
            backend = std::move(*b);
            backendB = 0;
        }
        if (backendB == B && backendT == T && backendModel == model)
            return {};
        if (auto st = backend->canRun(model, B, T); !st)
            return st;
        if (auto st = backend->allocate(model, B, T); !st)
            return st;
        backendModel = model;
        backendB = B;
        backendT = T;
        return {};
    }

    TrainOutcome train() {
        ActiveUnit& a = *active;
        const net::Manifest& m = a.manifest;
        const int B = m.batch, T = m.seqLen;
        const std::string id = wuKey(m.workUnitId);
        if (auto st = ensureBackend(m.model, B, T); !st) {
            failUnit("the model does not fit on " + cfg.device + ": " + st.error().message);
            return TrainOutcome::Failed;
        }
        auto start = loadCheckpoint(weightsPath(m), m.model);
        if (!start) {
            std::error_code ec;
            fs::remove(weightsPath(m), ec);
            a.downloaded = false;
            backoffLocal("the downloaded weights are unusable: " + start.error().message);
            return TrainOutcome::Retry;
        }
        auto data = readFile(dataPath(m));
        if (!data || static_cast<int64_t>(data->size()) <= T) {
            a.downloaded = false;
            backoffLocal("the downloaded data is unusable");
            return TrainOutcome::Retry;
        }
        BatchSampler sampler(*data, m.seed);
        const size_t P = start->parameters.size();
        if (!a.checkpointFile.empty()) {
            auto ck = loadCheckpoint(a.dir / a.checkpointFile, m.model);
            if (!ck || !ck->optimizer) {
                log(EventLevel::Warning, "work unit " + id + ": checkpoint unusable (" +
                                             (ck ? std::string("no moments") : ck.error().message) +
                                             "); starting it again");
                {
                    const fs::path keep = a.dir;
                    a = ActiveUnit{};
                    a.manifest = m;
                    a.dir = keep;
                    a.downloaded = true;
                }
            } else {
                if (auto st = backend->loadParameters(ck->parameters); !st) {
                    failUnit(st.error().message);
                    return TrainOutcome::Failed;
                }
                if (auto st = backend->loadOptimizerState(*ck->optimizer); !st) {
                    failUnit(st.error().message);
                    return TrainOutcome::Failed;
                }
                sampler.setState(a.samplerState);
            }
        }
        if (a.checkpointFile.empty()) {
            if (auto st = backend->loadParameters(start->parameters); !st) {
                failUnit(st.error().message);
                return TrainOutcome::Failed;
            }
            auto carried = carriedMoments(m);
            OptimizerState opt;
            if (carried) {
                opt = std::move(*carried);
                log(EventLevel::Debug, "work unit " + id + ": AdamW moments carried over");
            } else {
                opt.m.assign(P, 0.0f);
                opt.v.assign(P, 0.0f);
            }
            if (auto st = backend->loadOptimizerState(opt); !st) {
                failUnit(st.error().message);
                return TrainOutcome::Failed;
            }
            a.step = 0;
            a.tokens = 0;
            a.lossSum = 0;
            a.lossFirst.reset();
            a.lossLast.reset();
            a.computeSeconds = 0;
        }
        transition(m.workUnitId, WorkUnitState::Training);
        setState(EngineState::Training, "training",
                 "upload work unit " + id + " after step " + std::to_string(m.innerSteps));
        std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
        int64_t lastCheckpointMs = now();
        int64_t lastHeartbeatMs = INT64_MIN;
        if (!lastSampleMs)
            lastSampleMs = now();
        int64_t stepsSinceCheckpoint = 0;
        double stepSecondsAvg = 0;
        bool checkpointed = !a.checkpointFile.empty() && a.step > 0;
        int64_t savedStep = a.checkpointFile.empty() ? -1 : a.step;  // on disk as a checkpoint
        bool released = false;
        auto holdCheckpoint = [&] {
            if (!checkpointed && a.step > 0) {
                if (auto st = checkpoint(sampler.state()); !st) {
                    log(EventLevel::Warning, "checkpoint failed: " + st.error().message);
                } else {
                    savedStep = a.step;
                    log(EventLevel::Info,
                        "work unit " + id + ": checkpoint at step " + std::to_string(a.step));
                }
            }
            checkpointed = true;
            // train() starts over from the checkpoint, or from the start weights before the
            // first step; the backend is kept if the checkpoint could not be written.
            if (savedStep == a.step || (a.step == 0 && a.checkpointFile.empty())) {
                releaseBackend();
                released = true;
            }
        };
        bool firstStep = true;
        while (a.step < m.innerSteps) {
            if (!gate(true, 0, holdCheckpoint, firstStep)) {
                holdCheckpoint();
                return TrainOutcome::Interrupted;
            }
            if (released)
                return TrainOutcome::Interrupted;  // back from a hold: train() starts over
            if (checkpointed && !firstStep) {
                // Back from a hold.
                setState(EngineState::Training, "training",
                         "upload work unit " + id + " after step " + std::to_string(m.innerSteps));
            }
            setState(EngineState::Training, "training",
                     "upload work unit " + id + " after step " + std::to_string(m.innerSteps));
            firstStep = false;
            // Heartbeat (and the coordinator's word on whether to go on).
            const int64_t hbEveryMs = std::max<int64_t>(1000, m.heartbeatSeconds * 1000LL / 2);
            if (lastHeartbeatMs == INT64_MIN || now() >= lastHeartbeatMs + hbEveryMs) {
                lastHeartbeatMs = now();
                net::ProgressReport report;
                report.step = a.step;
                report.loss = a.lossLast.value_or(0.0f);
                report.tokensPerSecond = measuredTokensPerSecond;
                auto reply = deps.api->reportProgress(m.workUnitId, report);
                checkCrash();
                if (reply && reply->action == "abandon") {
                    abandonUnit(reply->reason.empty() ? "the coordinator abandoned it"
                                                      : reply->reason);
                    return TrainOutcome::Abandoned;
                }
                if (!reply)
                    log(EventLevel::Warning, "heartbeat failed: " + reply.error().message);
            }
            const auto t0 = std::chrono::steady_clock::now();
            sampler.next(B, T, inputs, targets);
            auto loss = backend->forward(inputs, targets, B, T);
            if (!loss) {
                failUnit("forward: " + loss.error().message);
                return TrainOutcome::Failed;
            }
            if (!std::isfinite(*loss)) {
                failUnit("the training loss became " + std::to_string(*loss) + " at step " +
                         std::to_string(a.step));
                return TrainOutcome::Failed;
            }
            if (auto st = backend->backward(); !st) {
                failUnit("backward: " + st.error().message);
                return TrainOutcome::Failed;
            }
            auto stats = backend->adamwStep(cfg.adamw, m.learningRate(a.step));
            if (!stats) {
                failUnit("AdamW: " + stats.error().message);
                return TrainOutcome::Failed;
            }
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            checkCrash();
            ++a.step;
            ++stepsSinceCheckpoint;
            checkpointed = false;
            a.tokens += int64_t{B} * T;
            a.computeSeconds += seconds;
            if (!a.lossFirst)
                a.lossFirst = *loss;
            a.lossLast = *loss;
            a.lossSum += *loss;
            stepSecondsAvg = stepSecondsAvg == 0 ? seconds : 0.8 * stepSecondsAvg + 0.2 * seconds;
            if (stepSecondsAvg > 0)
                measuredTokensPerSecond = static_cast<double>(B) * T / stepSecondsAvg;
            {
                std::lock_guard lock(mu);
                snap.current = currentInfo();
                snap.current->etaMs =
                    static_cast<int64_t>(stepSecondsAvg * 1000.0 * (m.innerSteps - a.step));
                snap.tokensPerSecond = measuredTokensPerSecond;
                snap.stepLoss = *loss;
            }
            if (deps.observer)
                deps.observer->progress(id, a.step, m.innerSteps, *loss);
            checkCrash();
            if (a.step < m.innerSteps && ((cfg.checkpointEverySteps > 0 &&
                                           stepsSinceCheckpoint >= cfg.checkpointEverySteps) ||
                                          now() >= lastCheckpointMs + cfg.checkpointIntervalMs)) {
                if (auto st = checkpoint(sampler.state()); !st)
                    log(EventLevel::Warning, "checkpoint failed: " + st.error().message);
                else
                    savedStep = a.step;
                checkpointed = true;
                lastCheckpointMs = now();
                stepsSinceCheckpoint = 0;
            }
            if (now() >= *lastSampleMs + cfg.sampleIntervalMs) {
                lastSampleMs = now();
                DeviceSample s;
                s.atMs = now();
                s.device = cfg.device;
                s.tokensPerSecond = measuredTokensPerSecond;
                if (deps.probe)
                    s.temperatureC = deps.probe().temperatureC;
                (void)ledger->recordSample(s);
                if (deps.observer)
                    deps.observer->sample(s);
            }
        }
        return finishUnit(start->parameters);
    }

    TrainOutcome finishUnit(const std::vector<float>& start) {
        ActiveUnit& a = *active;
        const net::Manifest& m = a.manifest;
        const std::string id = wuKey(m.workUnitId);
        std::vector<uint16_t> payload(start.size());
        auto enc = backend->encodePseudoGradient(start, payload);
        if (!enc) {
            failUnit("the pseudo-gradient is not finite (" + enc.error().message + ")");
            return TrainOutcome::Failed;
        }
        if (enc->nonFinite > 0) {
            failUnit("the pseudo-gradient has " + std::to_string(enc->nonFinite) +
                     " NaN or Inf values");
            return TrainOutcome::Failed;
        }
        net::ResultHeader h;
        h.workUnitId = m.workUnitId;
        h.parameterCount = static_cast<int64_t>(start.size());
        h.tokens = a.tokens;
        h.steps = static_cast<int32_t>(a.step);
        h.lossFirst = a.lossFirst.value_or(0);
        h.lossLast = a.lossLast.value_or(0);
        h.lossMean = a.step > 0 ? static_cast<float>(a.lossSum / static_cast<double>(a.step)) : 0;
        h.saturated = enc->saturated;
        const std::vector<uint8_t> body = net::buildResult(h, payload);
        auto header = net::parseResultHeader(body);
        if (!header) {
            failUnit(header.error().message);
            return TrainOutcome::Failed;
        }
        PendingResult p;
        p.workUnitId = m.workUnitId;
        p.uploadUrl = m.uploadUrl;
        p.file = dir() / "results" / (id + ".result");
        p.infoFile = dir() / "results" / (id + ".json");
        p.bytes = static_cast<int64_t>(body.size());
        p.digest = net::resultDigest(*header);
        p.steps = header->steps;
        p.lossLast = header->lossLast;
        p.signature = key->sign(p.digest);
        checkCrash();
        if (auto st = writeFileAtomically(p.file, body); !st) {
            failUnit("cannot write the result: " + st.error().message);
            return TrainOutcome::Failed;
        }
        hook("result");
        checkCrash();
        json info = {{"work_unit_id", m.workUnitId},
                     {"upload_url", m.uploadUrl},
                     {"run_id", m.runId},
                     {"base_version", m.baseVersion}};
        if (auto st = writeTextAtomically(p.infoFile, info.dump()); !st) {
            failUnit("cannot write the result: " + st.error().message);
            return TrainOutcome::Failed;
        }
        checkCrash();
        (void)ledger->updateWorkUnitProgress(id, a.tokens, a.step, a.computeSeconds, a.lossFirst,
                                             a.lossLast, now());
        transition(m.workUnitId, WorkUnitState::Trained);
        // Moments for the next unit of this run.
        Checkpoint ck;
        ck.config = m.model;
        ck.parameters.resize(start.size());
        if (backend->storeParameters(ck.parameters)) {
            if (auto opt = backend->storeOptimizerState()) {
                ck.optimizer = std::move(*opt);
                if (auto st = saveMoments(m, ck); !st)
                    log(EventLevel::Warning,
                        "cannot keep the AdamW moments: " + st.error().message);
            }
        }
        checkCrash();
        std::error_code ec;
        fs::remove_all(a.dir, ec);
        char lossText[64];
        std::snprintf(lossText, sizeof lossText, "loss %.3f -> %.3f", h.lossFirst, h.lossLast);
        log(EventLevel::Info, "work unit " + id + " trained: " + std::to_string(a.step) +
                                  " steps, " + std::to_string(a.tokens) + " tokens, " + lossText +
                                  "; result " + std::to_string(p.bytes) + " bytes");
        active.reset();
        {
            std::lock_guard lock(mu);
            queue.push_back(p);
            snap.current.reset();
            ++trainedThisSession;
            if (finishFlag) {
                finishFlag = false;
                pauseRequested = true;
            }
        }
        notifyAll();
        refreshTotals();
        return TrainOutcome::Finished;
    }

    // --- the engine thread ---
    void engineMain() {
        const std::function<void()> releaseWhileHeld = [this] { releaseBackend(); };
        try {
            recover();
            for (;;) {
                checkCrash();
                // With a unit in hand, "finish then pause" waits for it to be trained.
                if (!gate(active.has_value(), 0, releaseWhileHeld, true))
                    break;
                if (now() < notBeforeMs) {
                    setState(notBeforeState, notBeforeReason,
                             "try again at " + describe(notBeforeMs), notBeforeMs);
                    waitOnce(notBeforeMs);
                    continue;
                }
                if (cfg.maxWorkUnits > 0 && trainedThisSession >= cfg.maxWorkUnits && !active) {
                    size_t pending;
                    {
                        std::lock_guard lock(mu);
                        pending = queue.size();
                    }
                    if (pending == 0) {
                        log(EventLevel::Info, "finished " + std::to_string(trainedThisSession) +
                                                  " work units; stopping");
                        break;
                    }
                    setState(EngineState::Uploading, "uploading results", "stop after the uploads");
                    waitOnce();
                    continue;
                }
                if (!reg) {
                    doRegister();
                    continue;
                }
                if (!active) {
                    size_t pending;
                    {
                        std::lock_guard lock(mu);
                        pending = queue.size();
                    }
                    if (pending >= (cfg.overlapUploads ? 2u : 1u)) {
                        setState(EngineState::Uploading, "uploading results",
                                 "next work unit after the upload");
                        waitOnce();
                        continue;
                    }
                    fetch();
                    continue;
                }
                if (!active->downloaded) {
                    download();
                    continue;
                }
                train();
            }
        } catch (const CrashStop&) {
        }
        {
            std::lock_guard lock(mu);
            uploadStop = true;
            ++generation;
        }
        cv.notify_all();
        if (uploadThread.joinable())
            uploadThread.join();
        if (!crashed.load())
            setState(EngineState::Stopped, "Stopped");
        {
            std::lock_guard lock(mu);
            threadEnded = true;
            ++generation;
        }
        cv.notify_all();
    }

    // --- the upload thread ---
    void uploadMain() {
        int attempt = 0;
        int64_t retryAtMs = 0;
        for (;;) {
            PendingResult p;
            {
                std::unique_lock lock(mu);
                if (uploadStop || crashed.load())
                    return;
                // Pause and snooze stop compute and downloads; finished results still go out
                // (a result only ages toward the staleness bound while it waits).
                if (queue.empty() || now() < retryAtMs) {
                    cv.wait_for(lock, std::chrono::milliseconds(
                                          std::clamp<int64_t>(cfg.pollIntervalMs, 1, 1000)));
                    continue;
                }
                p = queue.front();
            }
            RulesVerdict v = evaluate(0, p.bytes, true);
            if (!v.allowed()) {
                {
                    std::lock_guard lock(mu);
                    snap.nextAction =
                        "upload of work unit " + wuKey(p.workUnitId) + " waits: " + v.reason();
                }
                std::unique_lock lock(mu);
                cv.wait_for(lock, std::chrono::milliseconds(
                                      std::clamp<int64_t>(cfg.pollIntervalMs, 1, 1000)));
                continue;
            }
            // Ask first whether the result is still wanted (a heartbeat): a unit the coordinator
            // abandoned meanwhile (too stale, lease expired) is not worth the uplink.
            if (!p.stillWantedChecked) {
                net::ProgressReport report;
                report.step = p.steps;
                report.loss = p.lossLast;
                auto reply = deps.api->reportProgress(p.workUnitId, report);
                if (crashed.load())
                    return;
                {
                    std::lock_guard lock(mu);
                    if (!queue.empty() && queue.front().workUnitId == p.workUnitId)
                        queue.front().stillWantedChecked = true;
                }
                if (reply && reply->action == "abandon") {
                    settle(p, WorkUnitState::Abandoned,
                           reply->reason.empty() ? "the coordinator abandoned it" : reply->reason,
                           nullptr);
                    continue;
                }
            }
            transition(p.workUnitId, WorkUnitState::Uploading);
            {
                std::lock_guard lock(mu);
                snap.upload = UploadInFlight{wuKey(p.workUnitId), 0, p.bytes, 0};
            }
            const int64_t startMs = now();
            auto res = deps.api->uploadResult(p.uploadUrl, p.file, p.signature,
                                              [&](int64_t done, int64_t total, double rate) {
                                                  if (done > 0)
                                                      hook("upload");
                                                  std::lock_guard lock(mu);
                                                  if (snap.upload) {
                                                      snap.upload->bytesDone = done;
                                                      if (total > 0)
                                                          snap.upload->bytesTotal = total;
                                                      snap.upload->bytesPerSecond = rate;
                                                  }
                                                  return !uploadStop && !crashed.load();
                                              });
            if (crashed.load())
                return;
            {
                std::lock_guard lock(mu);
                snap.upload.reset();
            }
            if (!res) {
                recordTransfer(Direction::Up, "result", res.error().bytesTransferred, startMs,
                               false, p.workUnitId, res.error().message);
                bool stopping;
                {
                    std::lock_guard lock(mu);
                    stopping = uploadStop;
                }
                if (stopping) {
                    transition(p.workUnitId, WorkUnitState::Trained, "upload interrupted");
                    return;
                }
                if (res.error().transient) {
                    ++attempt;
                    double u;
                    {
                        std::lock_guard lock(mu);
                        u = static_cast<double>(jitter.next() >> 11) * 0x1.0p-53;
                    }
                    const int64_t delay = backoffDelayMs(cfg, attempt, u, res.error().retryAfterMs);
                    retryAtMs = now() + delay;
                    transition(p.workUnitId, WorkUnitState::Trained, res.error().message);
                    log(EventLevel::Warning, "upload of work unit " + wuKey(p.workUnitId) +
                                                 " failed: " + res.error().message + " (retry in " +
                                                 std::to_string(delay / 1000) + " s)");
                    {
                        std::lock_guard lock(mu);
                        snap.nextAction = "retry the upload of work unit " + wuKey(p.workUnitId) +
                                          " at " + describe(retryAtMs);
                    }
                    continue;
                }
                settle(p, WorkUnitState::Rejected, res.error().message, nullptr);
                attempt = 0;
                continue;
            }
            hook("receipt");
            recordTransfer(Direction::Up, "result", res->bytesSent, startMs, true, p.workUnitId,
                           {});
            attempt = 0;
            retryAtMs = 0;
            const net::Receipt& r = res->receipt;
            std::string problem;
            if (!reg || !r.verify(reg->coordinatorKey))
                problem = "the receipt is not signed by the coordinator key pinned at registration";
            else if (r.workUnitId != p.workUnitId)
                problem = "the receipt is for work unit " + wuKey(r.workUnitId);
            else if (r.resultDigest != p.digest)
                problem = "the receipt names another result digest (" +
                          net::toHex(r.resultDigest).substr(0, 16) + "...)";
            if (!problem.empty()) {
                settle(p, WorkUnitState::Rejected, problem, nullptr);
                continue;
            }
            settle(p, WorkUnitState::Accepted, {}, &*res);
        }
    }

    void settle(const PendingResult& p, WorkUnitState state, const std::string& detail,
                const UploadOutcome* outcome) {
        if (crashed.load())
            return;
        const std::string id = wuKey(p.workUnitId);
        LastUpload last;
        last.id = id;
        last.atMs = now();
        last.state = state;
        last.detail = detail;
        if (state == WorkUnitState::Accepted) {
            Receipt rec;
            rec.workUnitId = id;
            rec.roundApplied = outcome->receipt.round;
            rec.weight = outcome->receipt.weight;
            rec.credit = outcome->receipt.weight;
            rec.receivedAtMs = now();
            rec.signature.assign(outcome->receipt.signature.begin(),
                                 outcome->receipt.signature.end());
            rec.body.assign(outcome->receiptJson.begin(), outcome->receiptJson.end());
            if (auto st = ledger->recordReceipt(rec); !st) {
                log(EventLevel::Error, "ledger: cannot store the receipt of work unit " + id +
                                           ": " + st.error().message);
                return;  // stays pending; the upload is idempotent
            }
            last.round = rec.roundApplied;
            last.credit = rec.credit;
            log(EventLevel::Info, "work unit " + id + " accepted into round " +
                                      std::to_string(rec.roundApplied) + " (weight " +
                                      std::to_string(static_cast<int64_t>(rec.weight)) + ")");
        } else if (state == WorkUnitState::Abandoned) {
            transition(p.workUnitId, WorkUnitState::Abandoned, detail);
            log(EventLevel::Warning,
                "work unit " + id + ": result not sent, the coordinator abandoned it: " + detail);
        } else {
            transition(p.workUnitId, WorkUnitState::Rejected, detail);
            log(EventLevel::Error, "work unit " + id + " was refused: " + detail);
        }
        removePending(p);
        {
            std::lock_guard lock(mu);
            if (!queue.empty() && queue.front().workUnitId == p.workUnitId)
                queue.pop_front();
            snap.lastUpload = last;
            ++settledThisSession;
        }
        refreshTotals();
        if (deps.observer)
            deps.observer->workUnitSettled(id, state);
        notifyAll();
    }
};

Expected<std::unique_ptr<Engine>> Engine::create(EngineConfig config, Dependencies deps) {
    if (!deps.api || !deps.clock || !deps.zone || !deps.backends)
        return makeError(
            "engine: the coordinator API, clock, time zone and backend factory are "
            "required");
    if (config.dataDir.empty())
        return makeError("engine: no data directory given");
    std::error_code ec;
    fs::create_directories(config.dataDir, ec);
    if (ec)
        return makeError("cannot create the data directory " + config.dataDir.string() + ": " +
                         ec.message());
    fs::permissions(config.dataDir, fs::perms::owner_all, ec);
    auto key = net::SigningKey::loadOrCreate(config.dataDir / "identity.pem");
    if (!key)
        return makeError("identity: " + key.error().message);
    auto ledger = Ledger::open(config.dataDir / "ledger.db");
    if (!ledger)
        return ledger.error();
    std::unique_ptr<Engine> e(new Engine());
    e->m_ledger = std::move(*ledger);
    e->m_publicKey = key->publicKey();
    e->m_impl = std::make_unique<Impl>();
    Impl& i = *e->m_impl;
    i.cfg = std::move(config);
    i.deps = std::move(deps);
    i.ledger = e->m_ledger.get();
    i.key.emplace(std::move(*key));
    i.rules = i.cfg.rules;
    i.jitter = Rng(i.cfg.jitterSeed ? i.cfg.jitterSeed : [] {
        auto b = net::randomBytes(8);
        uint64_t s = 0;
        std::memcpy(&s, b.data(), 8);
        return s;
    }());
    i.snap.device = i.cfg.deviceDescription.empty() ? i.cfg.device : i.cfg.deviceDescription;
    i.loadRegistration();
    i.refreshTotals();
    return e;
}

Engine::~Engine() {
    if (!m_impl)
        return;
    quit();
    wait();
}

void Engine::start() {
    Impl& i = *m_impl;
    if (i.engineThread.joinable())
        return;
    i.uploadThread = std::thread([&i] { i.uploadMain(); });
    i.engineThread = std::thread([&i] { i.engineMain(); });
}

void Engine::pause() {
    {
        std::lock_guard lock(m_impl->mu);
        m_impl->pauseRequested = true;
        ++m_impl->generation;
    }
    m_impl->cv.notify_all();
}

void Engine::resume() {
    {
        std::lock_guard lock(m_impl->mu);
        m_impl->pauseRequested = false;
        m_impl->snoozeUntil.reset();
        ++m_impl->generation;
    }
    m_impl->cv.notify_all();
}

void Engine::snooze(int64_t untilMs) {
    {
        std::lock_guard lock(m_impl->mu);
        m_impl->snoozeUntil = untilMs;
        m_impl->pauseRequested = false;
        ++m_impl->generation;
    }
    m_impl->cv.notify_all();
}

void Engine::setFinishThenPause(bool on) {
    {
        std::lock_guard lock(m_impl->mu);
        m_impl->finishFlag = on;
        m_impl->snap.finishThenPause = on;
        ++m_impl->generation;
    }
    m_impl->cv.notify_all();
}

void Engine::quit() {
    {
        std::lock_guard lock(m_impl->mu);
        m_impl->quitRequested = true;
        ++m_impl->generation;
    }
    m_impl->cv.notify_all();
}

void Engine::wake() {
    m_impl->notifyAll();
}

void Engine::setRules(const RulesConfig& rules) {
    {
        std::lock_guard lock(m_impl->mu);
        m_impl->rules = rules;
        ++m_impl->generation;
    }
    m_impl->cv.notify_all();
}

void Engine::wait() {
    // The engine thread joins the upload thread before it ends.
    if (m_impl->engineThread.joinable())
        m_impl->engineThread.join();
}

bool Engine::finished() const {
    std::lock_guard lock(m_impl->mu);
    return m_impl->threadEnded;
}

void Engine::crashForTesting() {
    m_impl->crashed.store(true);
    m_impl->notifyAll();
}

EngineSnapshot Engine::snapshot() const {
    std::lock_guard lock(m_impl->mu);
    EngineSnapshot s = m_impl->snap;
    s.pendingUploads = static_cast<int>(m_impl->queue.size());
    s.finishThenPause = m_impl->finishFlag;
    s.snoozedUntilMs = m_impl->snoozeUntil;
    return s;
}

}  // namespace tandem::core

namespace tandem::core {

std::string formatSnapshot(const EngineSnapshot& s, int64_t nowMs, const TimeZone& zone) {
    std::string out = "state: " + s.stateText + "\n";
    if (s.state == EngineState::Backoff || s.state == EngineState::Idle)
        out += "reason: " + s.reason + "\n";
    out += "device: " + s.device + "\n";
    out += std::string("registered: ") + (s.registered ? "yes" : "no") + "\n";
    if (s.finishThenPause)
        out += "finish then pause: yes\n";
    if (s.current) {
        const auto& c = *s.current;
        char loss[48] = "";
        if (c.lossLast)
            std::snprintf(loss, sizeof loss, ", loss %.3f", *c.lossLast);
        out += "work unit: " + c.id + " (run " + std::to_string(c.runId) + ", version " +
               std::to_string(c.baseVersion) + ", " + c.model + "), step " +
               std::to_string(c.step) + " of " + std::to_string(c.innerSteps) + loss;
        if (c.etaMs)
            out += ", about " + std::to_string((*c.etaMs + 999) / 1000) + " s left";
        out += "\n";
    }
    if (s.tokensPerSecond > 0)
        out += "throughput: " + std::to_string(static_cast<int64_t>(s.tokensPerSecond)) +
               " tokens/s\n";
    out += "results waiting for a receipt: " + std::to_string(s.pendingUploads) + "\n";
    if (s.upload)
        out += "uploading: work unit " + s.upload->id + ", " + formatBytes(s.upload->bytesDone) +
               " of " + formatBytes(s.upload->bytesTotal) + "\n";
    if (s.lastUpload) {
        out += "last result: work unit " + s.lastUpload->id + " " + toString(s.lastUpload->state);
        if (s.lastUpload->state == WorkUnitState::Accepted)
            out += " into round " + std::to_string(s.lastUpload->round);
        else
            out += " (" + s.lastUpload->detail + ")";
        out += ", " + describeLocalTime(s.lastUpload->atMs, nowMs, zone) + "\n";
    }
    if (!s.nextAction.empty())
        out += "next: " + s.nextAction + "\n";
    const auto& t = s.totals;
    out += "totals: " + std::to_string(t.workUnitsAccepted) + " accepted, " +
           std::to_string(t.workUnitsPending) + " pending, " + std::to_string(t.tokens) +
           " tokens, " + std::to_string(static_cast<int64_t>(t.computeSeconds)) +
           " s compute, sent " + formatBytes(t.bytesUp) + ", received " + formatBytes(t.bytesDown) +
           "\n";
    if (!s.lastError.empty())
        out += "last error: " + s.lastError + "\n";
    return out;
}

}  // namespace tandem::core
