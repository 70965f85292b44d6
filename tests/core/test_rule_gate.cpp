// The rule gate (core/rule_gate.hpp) alone: it lets work through when nothing holds, blocks while
// paused, snoozed or held by a rule (showing why, running the hold action once), ends a snooze by
// the clock, turns "finish then pause" into a pause only without a unit in hand, checks the rules
// at their interval, keeps the temperature hold until it is 5 degrees below the limit, holds
// downloads (not compute) at the download cap and uploads only at the upload cap.
#include "engine_parts_fixture.hpp"
#include "rule_gate.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;

namespace {

// waitUntilClear on its own thread; asks the gate to quit before joining, so a failed check
// cannot hang the test.
class GateOnThread {
  public:
    GateOnThread(EnginePartsFixture& f, RuleGate& gate, bool haveUnit, int64_t downloadBytes = 0)
        : m_f(f) {
        m_thread = std::thread([this, &gate, haveUnit, downloadBytes] {
            const bool r = gate.waitUntilClear(
                haveUnit, downloadBytes, [this] { ++holds; }, true);
            result = r ? 1 : 0;
        });
    }
    ~GateOnThread() {
        m_f.shared->command([this] { m_f.shared->quitRequested = true; });
        m_thread.join();
    }
    bool running() const { return result.load() < 0; }
    bool returned(bool value) {
        return eventually([&] { return result.load() == (value ? 1 : 0); });
    }

    std::atomic<int> result{-1};
    std::atomic<int> holds{0};

  private:
    EnginePartsFixture& m_f;
    std::thread m_thread;
};

}  // namespace

class TestRuleGate : public QObject {
    Q_OBJECT

  private slots:
    void freeWorkPassesAtOnce() {
        EnginePartsFixture f;
        QVERIFY(f.shared);
        RuleGate gate(*f.shared);
        int holds = 0;
        QVERIFY(gate.waitUntilClear(
            false, 0, [&] { ++holds; }, true));
        QCOMPARE(holds, 0);
        QCOMPARE(f.probes.load(), 1);
        QCOMPARE(f.snap().state, EngineState::Idle);  // nothing shown
    }

    void quitEndsTheWait() {
        EnginePartsFixture f;
        QVERIFY(f.shared);
        RuleGate gate(*f.shared);
        f.shared->command([&] { f.shared->quitRequested = true; });
        int holds = 0;
        QVERIFY(!gate.waitUntilClear(
            true, 0, [&] { ++holds; }, true));
        QCOMPARE(holds, 0);
    }

    void pauseHoldsUntilResumed() {
        EnginePartsFixture f;
        QVERIFY(f.shared);
        RuleGate gate(*f.shared);
        f.shared->command([&] { f.shared->pauseRequested = true; });
        GateOnThread run(f, gate, true);
        QVERIFY(eventually([&] { return f.snap().state == EngineState::Paused; }));
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // several polls
        QVERIFY(run.running());
        QCOMPARE(run.holds.load(), 1);  // the hold action runs once, not once per poll
        f.shared->command([&] { f.shared->pauseRequested = false; });
        QVERIFY(run.returned(true));
        QCOMPARE(run.holds.load(), 1);
    }

    void finishThenPausePausesOnlyWithoutAUnit() {
        EnginePartsFixture f;
        QVERIFY(f.shared);
        RuleGate gate(*f.shared);
        f.shared->command([&] { f.shared->finishFlag = true; });
        QVERIFY(gate.waitUntilClear(true, 0, nullptr, true));  // a unit in hand: go on
        {
            std::lock_guard lock(f.shared->mu);
            QVERIFY(f.shared->finishFlag);
            QVERIFY(!f.shared->pauseRequested);
        }
        GateOnThread run(f, gate, false);
        QVERIFY(eventually([&] { return f.snap().state == EngineState::Paused; }));
        {
            std::lock_guard lock(f.shared->mu);
            QVERIFY(!f.shared->finishFlag);
            QVERIFY(f.shared->pauseRequested);
        }
    }

    void snoozeEndsByTheClock() {
        EnginePartsFixture f;
        QVERIFY(f.shared);
        RuleGate gate(*f.shared);
        const int64_t until = kPartsStart + 3600 * 1000;
        f.shared->command([&] { f.shared->snoozeUntil = until; });
        GateOnThread run(f, gate, false);
        QVERIFY(eventually([&] { return f.snap().state == EngineState::Snoozed; }));
        QCOMPARE(f.snap().nextActionAtMs, std::optional<int64_t>(until));
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        QVERIFY(run.running());  // real time passing does not end it; the clock does
        f.clock.advanceMs(3600 * 1000);
        QVERIFY(run.returned(true));
        std::lock_guard lock(f.shared->mu);
        QVERIFY(!f.shared->snoozeUntil);
    }

    void ruleHoldsThenReleases() {
        EnginePartsFixture f;
        QVERIFY(f.shared);
        RuleGate gate(*f.shared);
        f.setProbe({std::nullopt, PowerSource::Battery, std::nullopt});
        GateOnThread run(f, gate, true);
        QVERIFY(eventually([&] { return f.snap().state == EngineState::Waiting; }));
        QVERIFY2(f.snap().reason.find("battery") != std::string::npos, f.snap().reason.c_str());
        QCOMPARE(f.snap().hold.value().rule, Rule::OnBattery);
        QCOMPARE(run.holds.load(), 1);
        f.setProbe({std::nullopt, PowerSource::Mains, std::nullopt});
        QVERIFY(run.returned(true));
    }

    // "Only when idle" with no idle source: no work until the idle time can be told.
    void unknownIdleTimeHoldsWork() {
        EngineConfig cfg;
        cfg.rules.onlyWhenIdle = true;
        cfg.rules.idleThresholdSeconds = 300;
        EnginePartsFixture f(cfg);
        QVERIFY(f.shared);
        RuleGate gate(*f.shared);
        f.setProbe({std::nullopt, PowerSource::Mains, std::nullopt});
        GateOnThread run(f, gate, true);
        QVERIFY(eventually([&] { return f.snap().state == EngineState::Waiting; }));
        QCOMPARE(f.snap().hold.value().rule, Rule::IdleUnknown);
        QCOMPARE(f.snap().next.step, NextStep::CheckRulesOnChange);
        const int before = f.probes.load();
        QVERIFY(eventually([&] { return f.probes.load() > before + 2; }));
        QVERIFY(run.running());
        f.setProbe({int64_t{600}, PowerSource::Mains, std::nullopt});
        QVERIFY(run.returned(true));
    }

    void rulesAreCheckedAtTheirInterval() {
        EngineConfig cfg;
        cfg.rulesCheckIntervalMs = 10000;
        EnginePartsFixture f(cfg);
        QVERIFY(f.shared);
        RuleGate gate(*f.shared);
        QVERIFY(gate.waitUntilClear(true, 0, nullptr, true));
        QCOMPARE(f.probes.load(), 1);
        f.setProbe({std::nullopt, PowerSource::Battery, std::nullopt});
        // Between steps, before the interval: not asked again, so training goes on.
        f.clock.advanceMs(9999);
        QVERIFY(gate.waitUntilClear(true, 0, nullptr, false));
        QCOMPARE(f.probes.load(), 1);
        f.clock.advanceMs(1);
        GateOnThread run(f, gate, true);
        QVERIFY(eventually([&] { return f.snap().state == EngineState::Waiting; }));
        QVERIFY(f.probes.load() >= 2);
    }

    void temperatureHoldHasHysteresis() {
        EngineConfig cfg;
        cfg.rules.maxTemperatureC = 80;
        EnginePartsFixture f(cfg);
        QVERIFY(f.shared);
        RuleGate gate(*f.shared);
        QVERIFY(gate.waitUntilClear(true, 0, nullptr, true));  // no temperature reported
        QVERIFY(f.snap().temperatureUnknown);  // the limit cannot be applied: the UI says so
        f.setProbe({std::nullopt, PowerSource::Mains, 82.0});
        GateOnThread run(f, gate, true);
        QVERIFY(eventually([&] { return f.snap().state == EngineState::Waiting; }));
        QVERIFY(!f.snap().temperatureUnknown);
        f.setProbe({std::nullopt, PowerSource::Mains, 77.0});  // below the limit, not by 5
        const int before = f.probes.load();
        QVERIFY(eventually([&] { return f.probes.load() > before + 2; }));
        QVERIFY(run.running());
        f.setProbe({std::nullopt, PowerSource::Mains, 74.0});
        QVERIFY(run.returned(true));
    }

    void downloadCapHoldsDownloadsNotCompute() {
        EngineConfig cfg;
        cfg.rules.dailyDownloadCapBytes = 1000;
        EnginePartsFixture f(cfg);
        QVERIFY(f.shared);
        Transfer t;
        t.atMs = kPartsStart - 1000;  // the same local day
        t.direction = Direction::Down;
        t.purpose = "weights";
        t.bytes = 999;
        QVERIFY(f.ledger->recordTransfer(t));
        RuleGate gate(*f.shared);
        QVERIFY(gate.waitUntilClear(true, 0, nullptr, true));  // training is not a download
        GateOnThread run(f, gate, true, 10);
        QVERIFY(eventually([&] { return f.snap().state == EngineState::Waiting; }));
        QVERIFY2(f.snap().reason.find("download cap") != std::string::npos,
                 f.snap().reason.c_str());
        QVERIFY(f.snap().nextActionAtMs.has_value());  // the next local day
    }

    void uploadsAnswerOnlyToTheUploadCap() {
        EngineConfig cfg;
        cfg.rules.pauseOnBattery = true;
        cfg.rules.dailyUploadCapBytes = 1000;
        cfg.rules.maxTemperatureC = 50;
        EnginePartsFixture f(cfg);
        QVERIFY(f.shared);
        f.setProbe({std::nullopt, PowerSource::Battery, 90.0});
        f.shared->command([&] { f.shared->pauseRequested = true; });
        RuleGate gate(*f.shared);
        QVERIFY(gate.checkUpload(200).allowed());  // battery, heat and pause do not hold it
        Transfer t;
        t.atMs = kPartsStart - 1000;
        t.direction = Direction::Up;
        t.purpose = "result";
        t.bytes = 900;
        QVERIFY(f.ledger->recordTransfer(t));
        QVERIFY(gate.checkUpload(100).allowed());
        const RulesVerdict v = gate.checkUpload(200);
        QVERIFY(!v.allowed());
        QCOMPARE(v.holds.size(), size_t{1});
        QCOMPARE(v.holds.front().rule, Rule::UploadCap);
        // The rules changed while running (setRules): the gate reads them each time.
        f.shared->command([&] { f.shared->rules.dailyUploadCapBytes = 0; });
        QVERIFY(gate.checkUpload(200).allowed());
    }
};

QTEST_APPLESS_MAIN(TestRuleGate)
#include "test_rule_gate.moc"
