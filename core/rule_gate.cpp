// The rule gate: pause, snooze and the scheduling rules, checked before work and while training
// (the caps only before transfers).
#include "rule_gate.hpp"

#include <algorithm>

namespace tandem::core {

RulesVerdict RuleGate::evaluate(int64_t nextDownloadBytes, int64_t nextUploadBytes,
                                bool forUpload) {
    RuleInputs in;
    in.nowMs = m_shared.now();
    if (m_shared.deps.probe) {
        const RuleProbe p = m_shared.deps.probe();
        in.idleSeconds = p.idleSeconds;
        in.power = p.power;
        in.temperatureC = p.temperatureC;
    }
    in.heldByTemperature = m_heldByTemperature;
    if (auto used = m_shared.ledger.bytesUsedToday(in.nowMs, *m_shared.deps.zone)) {
        in.bytesUpToday = used->up;
        in.bytesDownToday = used->down;
    }
    in.nextDownloadBytes = nextDownloadBytes;
    in.nextUploadBytes = nextUploadBytes;
    RulesConfig rc;
    {
        std::lock_guard lock(m_shared.mu);
        rc = m_shared.rules;
    }
    if (forUpload) {
        // Uploads of finished work only answer to the upload cap.
        RulesConfig only;
        only.pauseOnBattery = false;
        only.dailyUploadCapBytes = rc.dailyUploadCapBytes;
        return evaluateRules(only, in, *m_shared.deps.zone);
    }
    // The caps hold transfers, not compute: the download cap only before a download.
    rc.dailyUploadCapBytes = 0;
    if (nextDownloadBytes <= 0)
        rc.dailyDownloadCapBytes = 0;
    RulesVerdict v = evaluateRules(rc, in, *m_shared.deps.zone);
    m_heldByTemperature = std::any_of(v.holds.begin(), v.holds.end(),
                                      [](const Hold& h) { return h.rule == Rule::TooHot; });
    {
        std::lock_guard lock(m_shared.mu);
        m_shared.snap.temperatureUnknown = !in.temperatureC;
    }
    return v;
}

bool RuleGate::clearNow(int64_t nextDownloadBytes) {
    {
        std::lock_guard lock(m_shared.mu);
        if (m_shared.quitRequested || m_shared.pauseRequested || m_shared.finishFlag ||
            m_shared.snoozeUntil)
            return false;
    }
    return evaluate(nextDownloadBytes, 0, false).allowed();
}

bool RuleGate::waitUntilClear(bool haveUnit, int64_t nextDownloadBytes,
                              const std::function<void()>& onHold, bool forceRules) {
    bool held = false;
    auto hold = [&] {
        if (!held && onHold)
            onHold();
        held = true;
    };
    bool rulesDue = forceRules;
    for (;;) {
        m_shared.checkCrash();
        bool quit = false, pause = false, snoozed = false, finished = false;
        int64_t until = 0;
        {
            std::lock_guard lock(m_shared.mu);
            quit = m_shared.quitRequested;
            if (!haveUnit && m_shared.finishFlag) {
                m_shared.finishFlag = false;
                m_shared.pauseRequested = true;
                finished = true;
            }
            pause = m_shared.pauseRequested;
            if (m_shared.snoozeUntil && m_shared.now() >= *m_shared.snoozeUntil)
                m_shared.snoozeUntil.reset();
            snoozed = m_shared.snoozeUntil.has_value();
            until = m_shared.snoozeUntil.value_or(0);
        }
        if (finished)
            m_shared.saveHold();  // "finish then pause" became a pause
        if (quit)
            return false;
        if (pause) {
            hold();
            m_shared.setState(EngineState::Paused, "Paused", NextAction(NextStep::ResumeByHand));
            m_shared.waitOnce();
            rulesDue = true;
            continue;
        }
        if (snoozed) {
            hold();
            m_shared.setState(EngineState::Snoozed, "Snoozed, resumes " + m_shared.describe(until),
                              NextAction(NextStep::ResumeAt, until));
            m_shared.waitOnce(until);
            rulesDue = true;
            continue;
        }
        if (rulesDue || m_shared.cfg.rulesCheckIntervalMs <= 0 ||
            m_shared.now() >= m_lastRulesCheckMs + m_shared.cfg.rulesCheckIntervalMs) {
            m_lastRulesCheckMs = m_shared.now();
            RulesVerdict v = evaluate(nextDownloadBytes, 0, false);
            if (!v.allowed()) {
                hold();
                const auto& h = v.holds.front();
                m_shared.setState(EngineState::Waiting, h.reason,
                                  NextAction(h.mayChangeAtMs ? NextStep::CheckRulesAt
                                                             : NextStep::CheckRulesOnChange,
                                             h.mayChangeAtMs),
                                  h);
                m_shared.waitOnce(h.mayChangeAtMs);
                rulesDue = true;
                continue;
            }
        }
        return true;
    }
}

}  // namespace tandem::core
