// The rule gate: pause, snooze and the scheduling rules, checked before work and while training.
#include "engine_impl.hpp"

#include <algorithm>

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

RulesVerdict Engine::Impl::evaluate(int64_t nextDownloadBytes, int64_t nextUploadBytes,
                                    bool forUpload) {
    RuleInputs in;
    in.nowMs = now();
    if (deps.probe) {
        const RuleProbe p = deps.probe();
        in.idleSeconds = p.idleSeconds;
        in.power = p.power;
        in.temperatureC = p.temperatureC;
    }
    in.heldByTemperature = heldByTemperature;
    if (auto used = ledger.bytesUsedToday(in.nowMs, *deps.zone)) {
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
bool Engine::Impl::gate(bool haveUnit, int64_t nextDownloadBytes,
                        const std::function<void()>& onHold, bool forceRules) {
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

}  // namespace tandem::core
