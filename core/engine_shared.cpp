// The helpers every part of the engine uses: the log, state changes, waits, ledger rows.
#include "engine_shared.hpp"

#include "hold_file.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace tandem::core {

EngineShared::EngineShared(EngineConfig config, Engine::Dependencies dependencies,
                           Ledger& ledgerRef, net::SigningKey signingKey)
    : cfg(std::move(config)),
      deps(std::move(dependencies)),
      ledger(ledgerRef),
      key(std::move(signingKey)),
      files(cfg.dataDir),
      rules(cfg.rules),
      jitter(cfg.jitterSeed ? cfg.jitterSeed : [] {
          auto b = net::randomBytes(8);
          uint64_t s = 0;
          std::memcpy(&s, b.data(), 8);
          return s;
      }()),
      uploads(mu, cv, [this] { return now(); }, std::clamp<int64_t>(cfg.pollIntervalMs, 1, 1000)),
      heartbeats(deps.api, deps.clock, std::clamp<int64_t>(cfg.pollIntervalMs, 1, 1000)) {
    snap.device = cfg.deviceDescription.empty() ? cfg.device : cfg.deviceDescription;
}

void EngineShared::log(EventLevel level, const std::string& message) {
    if (crashed.load())
        return;
    if (level >= EventLevel::Info)
        (void)ledger.recordEvent(now(), level, message);
    if (level >= EventLevel::Warning) {
        std::lock_guard lock(mu);
        if (level == EventLevel::Error)
            snap.lastError = message;
    }
    if (deps.observer)
        deps.observer->logLine(level, message);
}

void EngineShared::saveHold() {
    if (crashed.load())
        return;
    std::lock_guard fileLock(holdFileMu);
    HoldState h;
    {
        std::lock_guard lock(mu);
        h.paused = pauseRequested;
        h.snoozeUntilMs = snoozeUntil;
    }
    if (auto st = writeHold(files.holdFile(), h); !st)
        log(EventLevel::Warning, "cannot keep the pause across a restart: " + st.error().message);
}

void EngineShared::loadHold() {
    auto h = readHold(files.holdFile());
    if (!h) {
        log(EventLevel::Warning, "ignoring the saved pause: " + h.error().message);
        return;
    }
    std::lock_guard lock(mu);
    pauseRequested = h->paused;
    if (h->snoozeUntilMs && *h->snoozeUntilMs > now())
        snoozeUntil = h->snoozeUntilMs;
}

void EngineShared::command(const std::function<void()>& change) {
    {
        std::lock_guard lock(mu);
        change();
        ++generation;
    }
    cv.notify_all();
}

double EngineShared::jitterUnit() {
    std::lock_guard lock(mu);
    return static_cast<double>(jitter.next() >> 11) * 0x1.0p-53;
}

void EngineShared::setNextLocked(NextAction next) {
    snap.nextAction = describeNextAction(next, now(), *deps.zone);
    snap.nextActionAtMs = next.atMs;
    snap.next = std::move(next);
}

void EngineShared::setState(EngineState state, std::string reason, NextAction next,
                            std::optional<Hold> hold) {
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
        snap.hold = state == EngineState::Waiting ? std::move(hold) : std::nullopt;
        setNextLocked(std::move(next));
        if (state != EngineState::Backoff) {
            snap.problem = Problem::None;
            snap.problemDetail.clear();
        }
        snap.finishThenPause = finishFlag;
        snap.snoozedUntilMs = snoozeUntil;
    }
    if (changed && deps.observer && !crashed.load())
        deps.observer->stateChanged(state, reason);
}

void EngineShared::setProblem(Problem problem, std::string detail) {
    std::lock_guard lock(mu);
    snap.problem = problem;
    snap.problemDetail = std::move(detail);
}

void EngineShared::waitOnce(std::optional<int64_t> untilMs) {
    std::unique_lock lock(mu);
    const uint64_t seen = generation;
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(std::max<int64_t>(1, cfg.pollIntervalMs));
    while (generation == seen && std::chrono::steady_clock::now() < end) {
        if (untilMs && now() >= *untilMs)
            return;
        cv.wait_for(lock,
                    std::chrono::milliseconds(std::clamp<int64_t>(cfg.pollIntervalMs / 4, 1, 50)));
    }
}

void EngineShared::refreshTotals() {
    auto t = ledger.totals();
    std::lock_guard lock(mu);
    if (t)
        snap.totals = *t;
    snap.pendingUploads = static_cast<int>(uploads.sizeLocked());
    snap.workUnitsThisSession = trainedThisSession;
}

void EngineShared::loadLastUpload() {
    auto rows = ledger.workUnits(50);
    if (!rows)
        return;
    const WorkUnitRow* newest = nullptr;
    for (const auto& r : *rows) {
        const WorkUnitState st = r.unit.state;
        if (st != WorkUnitState::Accepted && st != WorkUnitState::Rejected &&
            st != WorkUnitState::Abandoned)
            continue;
        if (st == WorkUnitState::Abandoned && !r.unit.trainedAtMs)
            continue;  // never trained: nothing was to be uploaded
        if (!newest || r.unit.updatedAtMs > newest->unit.updatedAtMs)
            newest = &r;
    }
    if (!newest)
        return;
    LastUpload last;
    last.id = newest->unit.id;
    last.state = newest->unit.state;
    last.atMs = newest->receipt ? newest->receipt->receivedAtMs : newest->unit.updatedAtMs;
    if (newest->receipt) {
        last.round = newest->receipt->roundApplied;
        last.credit = newest->receipt->credit;
    } else if (auto tr = ledger.transitions(newest->unit.id); tr && !tr->empty()) {
        last.detail = tr->back().detail;
    }
    std::lock_guard lock(mu);
    snap.lastUpload = last;
}

void EngineShared::recordTransfer(Direction direction, const std::string& purpose, int64_t bytes,
                                  int64_t startMs, bool ok, int64_t workUnitId,
                                  const std::string& detail) {
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
    (void)ledger.recordTransfer(t);
}

void EngineShared::transition(int64_t workUnitId, WorkUnitState state, const std::string& detail) {
    if (crashed.load())
        return;
    if (auto st = ledger.recordTransition(wuKey(workUnitId), state, now(), detail); !st)
        log(EventLevel::Warning, "ledger: " + st.error().message);
}

void EngineShared::recordNewUnit(const net::Manifest& m) {
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
    if (auto st = ledger.recordWorkUnit(r); !st)
        log(EventLevel::Warning, "ledger: " + st.error().message);
}

}  // namespace tandem::core
