// The Engine's public API and the engine thread's main loop, which decides what runs next:
// the gate (pause, snooze, rules), the backoff's wait, registering, fetching, downloading,
// training. The parts are in engine_shared, rule_gate, engine_backoff, registration, recovery,
// work_fetcher, unit_runner, result_writer, upload_queue and result_uploader (see README.md).
#include "engine.hpp"

#include "engine_backoff.hpp"
#include "engine_shared.hpp"
#include "file_io.hpp"
#include "profile_sync.hpp"
#include "reconcile.hpp"
#include "recovery.hpp"
#include "registration.hpp"
#include "result_uploader.hpp"
#include "result_writer.hpp"
#include "rule_gate.hpp"
#include "unit_prefetch.hpp"
#include "unit_runner.hpp"
#include "work_fetcher.hpp"

#include <chrono>
#include <thread>

namespace tandem::core {

namespace fs = std::filesystem;

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
    return tandem::writePrivateFileAtomically(
        path, std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// The engine's parts, wired together over the shared state; the engine thread runs
// engineMain(), the upload queue its own thread.
struct Engine::Impl {
    Impl(EngineConfig config, Dependencies deps, Ledger& ledger, net::SigningKey key)
        : shared(std::move(config), std::move(deps), ledger, std::move(key)) {}

    EngineShared shared;
    RuleGate gate{shared};
    EngineBackoff backoff{shared};
    Registrar registrar{shared, backoff};
    ProfileSync profile{shared};  // display name and team
    ResultUploader uploader{shared, gate, registrar};
    WorkFetcher fetcher{shared, gate, backoff, registrar};
    ResultWriter writer{shared};
    UnitRunner runner{shared, gate, backoff, writer};
    UnitPrefetch prefetch{shared, fetcher};
    std::optional<ActiveUnit> active;  // engine thread
    bool reconciled = false;           // engine thread: compared units with the coordinator
    std::thread engineThread;

    void engineMain();
    // Engine thread, after every training step: starts the next unit's prefetch once the unit
    // in training is past half its steps and within the prefetch's lead time of its end, and a
    // next unit will be wanted.
    void maybePrefetch(const ActiveUnit& unit, int64_t etaMs);
};

void Engine::Impl::maybePrefetch(const ActiveUnit& unit, int64_t etaMs) {
    const EngineConfig& c = shared.cfg;
    // Past half of the unit too: a short unit does not take its successor's base version early.
    if (!c.prefetch || !c.overlapUploads || prefetch.started() || etaMs > prefetch.leadMs() ||
        unit.step * 2 < unit.manifest.innerSteps)
        return;
    if (c.maxWorkUnits > 0 && shared.trainedThisSession + 1 >= c.maxWorkUnits)
        return;  // this unit is the last one
    // A result still uploading: when this unit ends there are two, and the engine waits for one
    // before it starts the next, which could wait too long; that one is fetched afterwards.
    if (shared.pendingUploads() > 0 || !gate.clearNow(0))
        return;
    prefetch.start(runner.tokensPerSecond(), unit.manifest);
}

void Engine::Impl::engineMain() {
    const std::function<void()> releaseWhileHeld = [this] { runner.releaseBackend(); };
    runner.setStepHook(
        [this](const ActiveUnit& unit, int64_t etaMs) { maybePrefetch(unit, etaMs); });
    auto realMs = [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    };
    int64_t fetchStartMs = -1;  // of a foreground fetch, in real time
    try {
        active = recoverDataDir(shared, registrar.coordinatorKey());
        for (;;) {
            shared.checkCrash();
            // A unit fetched ahead is given back when the engine is about to hold: it would sit
            // without heartbeats until the coordinator reclaims it.
            if (!active && prefetch.started() && !gate.clearNow(0))
                prefetch.giveBack();
            // With a unit in hand, "finish then pause" waits for it to be trained.
            if (!gate.waitUntilClear(active.has_value(), 0, releaseWhileHeld, true))
                break;
            if (backoff.waitIfEarly())
                continue;
            if (shared.cfg.maxWorkUnits > 0 &&
                shared.trainedThisSession >= shared.cfg.maxWorkUnits && !active) {
                const size_t pending = shared.pendingUploads();
                if (pending == 0) {
                    shared.log(EventLevel::Info, "finished " +
                                                     std::to_string(shared.trainedThisSession) +
                                                     " work units; stopping");
                    break;
                }
                shared.setState(EngineState::Uploading, "uploading results",
                                NextAction(NextStep::StopAfterUploads));
                shared.waitOnce();
                continue;
            }
            if (!registrar.registered()) {
                registrar.registerNow();
                profile.reset();
                continue;
            }
            profile.sync();
            // Once per start, before asking for work: units lost in a crash go back.
            if (!reconciled)
                reconciled =
                    reconcileWithCoordinator(shared, registrar, active) == ReconcileOutcome::Done;
            if (!active) {
                const size_t pending = shared.pendingUploads();
                if (pending >= (shared.cfg.overlapUploads ? 2u : 1u)) {
                    shared.setState(EngineState::Uploading, "uploading results",
                                    NextAction(NextStep::NextUnitAfterUpload));
                    shared.waitOnce();
                    continue;
                }
                if (prefetch.started() && (active = prefetch.take()))
                    continue;
                fetchStartMs = realMs();
                active = fetcher.fetch(runner.tokensPerSecond());
                continue;
            }
            if (!active->downloaded) {
                if (fetcher.download(*active) && fetchStartMs >= 0)
                    prefetch.noteFetchMs(realMs() - fetchStartMs);
                fetchStartMs = -1;
                continue;
            }
            const TrainOutcome outcome = runner.train(*active);
            if (outcome == TrainOutcome::Finished || outcome == TrainOutcome::Failed ||
                outcome == TrainOutcome::Abandoned)
                active.reset();
        }
    } catch (const CrashStop&) {
    }
    // A unit prefetched but not started stays in work/: the next start resumes it.
    prefetch.take();
    if (!shared.crashed.load())
        runner.releaseBackend();  // the moments kept in memory go to disk
    shared.uploads.stop();
    shared.heartbeats.stop();
    if (!shared.crashed.load())
        shared.setState(EngineState::Stopped, "Stopped");
    shared.command([this] { shared.threadEnded = true; });
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
    e->m_impl->registrar.load();
    e->m_impl->shared.loadHold();
    e->m_impl->shared.loadLastUpload();
    e->m_impl->shared.refreshTotals();
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
    i.shared.uploads.start([&i](const PendingResult& result) { return i.uploader.run(result); });
    EngineShared& s = i.shared;
    s.heartbeats.start(
        [&s] {
            std::vector<HeartbeatTarget> out;
            std::lock_guard lock(s.mu);
            for (const PendingResult& p : s.uploads.jobsLocked()) {
                net::ProgressReport r;
                r.step = p.steps;
                r.loss = p.lossLast;
                out.push_back({p.workUnitId, p.heartbeatMs, r});
            }
            return out;
        },
        [&s](EventLevel level, const std::string& m) { s.log(level, m); },
        [&s] { return s.crashed.load(); });
    i.engineThread = std::thread([&i] { i.engineMain(); });
}

// Each command changes the shared state under the one mutex and wakes both threads.
void Engine::pause() {
    EngineShared& s = m_impl->shared;
    s.command([&] { s.pauseRequested = true; });
    s.saveHold();
}

void Engine::resume() {
    EngineShared& s = m_impl->shared;
    s.command([&] {
        s.pauseRequested = false;
        s.snoozeUntil.reset();
    });
    s.saveHold();
}

void Engine::snooze(int64_t untilMs) {
    EngineShared& s = m_impl->shared;
    s.command([&] {
        s.snoozeUntil = untilMs;
        s.pauseRequested = false;
    });
    s.saveHold();
}

void Engine::setFinishThenPause(bool on) {
    EngineShared& s = m_impl->shared;
    s.command([&] {
        s.finishFlag = on;
        s.snap.finishThenPause = on;
    });
}

void Engine::quit() {
    EngineShared& s = m_impl->shared;
    s.command([&] { s.quitRequested = true; });
}

void Engine::wake() {
    m_impl->shared.notifyAll();
}

void Engine::setRules(const RulesConfig& rules) {
    EngineShared& s = m_impl->shared;
    s.command([&] { s.rules = rules; });
}

void Engine::wait() {
    // The engine thread joins the upload thread before it ends.
    if (m_impl->engineThread.joinable())
        m_impl->engineThread.join();
}

bool Engine::finished() const {
    const EngineShared& s = m_impl->shared;
    std::lock_guard lock(s.mu);
    return s.threadEnded;
}

void Engine::crashForTesting() {
    m_impl->shared.crashed.store(true);
    m_impl->shared.notifyAll();
}

EngineSnapshot Engine::snapshot() const {
    const EngineShared& shared = m_impl->shared;
    std::lock_guard lock(shared.mu);
    EngineSnapshot s = shared.snap;
    s.pendingUploads = static_cast<int>(shared.uploads.sizeLocked());
    s.finishThenPause = shared.finishFlag;
    s.snoozedUntilMs = shared.snoozeUntil;
    return s;
}

std::string formatSnapshot(const EngineSnapshot& s, int64_t nowMs, const TimeZone& zone) {
    std::string out = "state: " + s.stateText + "\n";
    if (s.state == EngineState::Backoff || s.state == EngineState::Idle)
        out += "reason: " + s.reason + "\n";
    if (s.problem != Problem::None)
        out += std::string("problem: ") + toString(s.problem) +
               (needsAttention(s.problem) ? " (needs attention)" : " (retrying)") + "\n";
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
