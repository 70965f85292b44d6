#include "engine.hpp"
#include "engine_impl.hpp"
#include "recovery.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

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

void Engine::Impl::engineMain() {
    const std::function<void()> releaseWhileHeld = [this] { runner.releaseBackend(); };
    try {
        active = recoverDataDir(*this, registrar.coordinatorKey());
        for (;;) {
            checkCrash();
            // With a unit in hand, "finish then pause" waits for it to be trained.
            if (!ruleGate.waitUntilClear(active.has_value(), 0, releaseWhileHeld, true))
                break;
            if (backoff.waitIfEarly())
                continue;
            if (cfg.maxWorkUnits > 0 && trainedThisSession >= cfg.maxWorkUnits && !active) {
                size_t pending;
                {
                    std::lock_guard lock(mu);
                    pending = uploads.sizeLocked();
                }
                if (pending == 0) {
                    log(EventLevel::Info,
                        "finished " + std::to_string(trainedThisSession) + " work units; stopping");
                    break;
                }
                setState(EngineState::Uploading, "uploading results", "stop after the uploads");
                waitOnce();
                continue;
            }
            if (!registrar.registered()) {
                registrar.registerNow();
                continue;
            }
            if (!active) {
                size_t pending;
                {
                    std::lock_guard lock(mu);
                    pending = uploads.sizeLocked();
                }
                if (pending >= (cfg.overlapUploads ? 2u : 1u)) {
                    setState(EngineState::Uploading, "uploading results",
                             "next work unit after the upload");
                    waitOnce();
                    continue;
                }
                active = fetcher.fetch(runner.tokensPerSecond());
                continue;
            }
            if (!active->downloaded) {
                fetcher.download(*active);
                continue;
            }
            const TrainOutcome outcome = runner.train(*active);
            if (outcome == TrainOutcome::Finished || outcome == TrainOutcome::Failed ||
                outcome == TrainOutcome::Abandoned)
                active.reset();
        }
    } catch (const CrashStop&) {
    }
    uploads.stop();
    if (!crashed.load())
        setState(EngineState::Stopped, "Stopped");
    command([this] { threadEnded = true; });
}

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
    e->m_impl =
        std::make_unique<Impl>(std::move(config), std::move(deps), *e->m_ledger, std::move(*key));
    Impl& i = *e->m_impl;
    i.registrar.load();
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
    i.uploads.start([&i](const PendingResult& result) { return i.uploader.run(result); });
    i.engineThread = std::thread([&i] { i.engineMain(); });
}

// Each command changes the shared state under the one mutex and wakes both threads.
void Engine::pause() {
    EngineShared& s = *m_impl;
    s.command([&] { s.pauseRequested = true; });
}

void Engine::resume() {
    EngineShared& s = *m_impl;
    s.command([&] {
        s.pauseRequested = false;
        s.snoozeUntil.reset();
    });
}

void Engine::snooze(int64_t untilMs) {
    EngineShared& s = *m_impl;
    s.command([&] {
        s.snoozeUntil = untilMs;
        s.pauseRequested = false;
    });
}

void Engine::setFinishThenPause(bool on) {
    EngineShared& s = *m_impl;
    s.command([&] {
        s.finishFlag = on;
        s.snap.finishThenPause = on;
    });
}

void Engine::quit() {
    EngineShared& s = *m_impl;
    s.command([&] { s.quitRequested = true; });
}

void Engine::wake() {
    m_impl->notifyAll();
}

void Engine::setRules(const RulesConfig& rules) {
    EngineShared& s = *m_impl;
    s.command([&] { s.rules = rules; });
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
    s.pendingUploads = static_cast<int>(m_impl->uploads.sizeLocked());
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
