// The rule gate: whether the engine may work now. Pause, snooze, "finish then pause" and the
// scheduling rules (core/rules.hpp) with the machine's state (the probe) and the bytes moved
// today (the ledger). The engine thread waits at the gate before every unit, before downloads
// and between training steps; the upload thread asks it about the upload cap only.
// Internal to core/.
#pragma once

#include "engine_shared.hpp"
#include "rules.hpp"

#include <atomic>
#include <climits>
#include <cstdint>
#include <functional>

namespace tandem::core {

class RuleGate {
  public:
    explicit RuleGate(EngineShared& shared) : m_shared(shared) {}

    // Engine thread. Blocks while paused, snoozed or held by a rule, showing why. onHold runs
    // once before the first wait (the checkpoint of a unit in training). haveUnit: a unit is in
    // hand, so "finish then pause" does not pause yet. nextDownloadBytes > 0: the download cap
    // applies too. The rules are checked every rulesCheckIntervalMs, or now when forceRules.
    // Returns false when the engine is to quit.
    bool waitUntilClear(bool haveUnit, int64_t nextDownloadBytes,
                        const std::function<void()>& onHold, bool forceRules);
    // Any thread, never waiting: whether work may go on now (no pause, snooze, quit or "finish
    // then pause", and the rules allow a download of nextDownloadBytes). The prefetch asks it.
    bool clearNow(int64_t nextDownloadBytes);
    // Any thread: uploads of finished work answer only to the daily upload cap.
    RulesVerdict checkUpload(int64_t uploadBytes) { return evaluate(0, uploadBytes, true); }

  private:
    RulesVerdict evaluate(int64_t nextDownloadBytes, int64_t nextUploadBytes, bool forUpload);

    EngineShared& m_shared;
    std::atomic<bool> m_heldByTemperature{false};  // written by the engine thread, read by both
    int64_t m_lastRulesCheckMs = INT64_MIN;        // engine thread
};

}  // namespace tandem::core
