// What the parts of the engine share: its configuration and injected dependencies, and the one
// mutex that guards everything both of its threads touch (the commands, the rules, the snapshot,
// the upload queue). Also the small helpers every part uses: the clock, the log, state changes,
// waiting for a command or the clock, and the ledger rows of a work unit.
// Internal to core/.
#pragma once

#include "engine.hpp"
#include "heartbeat_sender.hpp"
#include "random.hpp"
#include "unit_files.hpp"
#include "upload_queue.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace tandem::core {

// Thrown by crashForTesting's checks: unwinds the engine thread without writing anything.
struct CrashStop {};

struct EngineShared {
    EngineShared(EngineConfig config, Engine::Dependencies dependencies, Ledger& ledgerRef,
                 net::SigningKey signingKey);

    const EngineConfig cfg;
    const Engine::Dependencies deps;
    Ledger& ledger;
    const net::SigningKey key;
    const DataDir files;

    mutable std::mutex mu;
    std::condition_variable cv;
    // Guarded by mu.
    uint64_t generation = 0;  // bumped by every command, wake and settled upload
    bool pauseRequested = false;
    bool quitRequested = false;
    bool finishFlag = false;  // "finish then pause"
    std::optional<int64_t> snoozeUntil;
    bool threadEnded = false;
    RulesConfig rules;
    EngineSnapshot snap;
    int trainedThisSession = 0;
    Rng jitter{1};  // both threads draw from it: jitterUnit()

    UploadQueue uploads;  // results waiting for their receipt, under mu
    // Heartbeats for the unit in training and the queued results, on their own thread.
    HeartbeatSender heartbeats;

    std::atomic<bool> crashed{false};
    std::mutex holdFileMu;  // one writer of hold.json at a time (commands, engine thread)

    int64_t now() const { return deps.clock->nowMs(); }
    std::string describe(int64_t atMs) const { return describeLocalTime(atMs, now(), *deps.zone); }

    void hook(const char* point) const {
        if (cfg.testHook)
            cfg.testHook(point);
    }
    void checkCrash() const {
        if (crashed.load())
            throw CrashStop{};
    }

    // Runs change under the mutex, then wakes every waiter: how commands, wakes and settled
    // uploads reach the threads.
    void command(const std::function<void()>& change);
    void notifyAll() {
        command([] {});
    }

    void log(EventLevel level, const std::string& message);
    // The pause or snooze in force to hold.json (hold_file.hpp), so that it survives a restart;
    // call after changing pauseRequested or snoozeUntil (not under mu).
    void saveHold();
    // At start: the pause or snooze of the last session (a snooze that has ended holds nothing).
    void loadHold();
    // Any state but Backoff clears the snapshot's problem; setProblem sets it for a Backoff.
    // hold: the rule that holds a Waiting state.
    void setState(EngineState state, std::string reason, NextAction next = {},
                  std::optional<Hold> hold = std::nullopt);
    // The next action alone (the upload thread's), under mu.
    void setNextLocked(NextAction next);
    void setProblem(Problem problem, std::string detail);
    // Waits one poll interval of real time, or less when a command arrives or the clock reaches
    // untilMs.
    void waitOnce(std::optional<int64_t> untilMs = std::nullopt);
    // A uniform number in [0, 1) for the jitter of a backoff.
    double jitterUnit();

    // Results waiting for their receipt.
    size_t pendingUploads() const {
        std::lock_guard lock(mu);
        return uploads.sizeLocked();
    }
    // The ledger's totals and the session's counts into the snapshot.
    void refreshTotals();
    // At start: the snapshot's last upload from the ledger (the newest settled unit among the
    // recent ones), so the Overview does not say "none yet" after a restart.
    void loadLastUpload();
    void recordTransfer(Direction direction, const std::string& purpose, int64_t bytes,
                        int64_t startMs, bool ok, int64_t workUnitId, const std::string& detail);
    void transition(int64_t workUnitId, WorkUnitState state, const std::string& detail = {});
    // The unit's first ledger row (Assigned).
    void recordNewUnit(const net::Manifest& m);
};

}  // namespace tandem::core
