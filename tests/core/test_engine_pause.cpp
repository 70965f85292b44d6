// Pausing never wastes work (DESIGN.md §6), against the fake coordinator: "pause now" after the
// coordinator's stated minimum uploads the partial result (its steps, weighted by its tokens);
// below the minimum, or when none is stated, the unit keeps its checkpoint and resumes only if
// the coordinator still wants it, else it is abandoned with a reason code; quitting mid-unit
// leaves the partial result for the next start; pause and snooze survive a restart.
#include "engine_harness.hpp"
#include "hold_file.hpp"
#include "result_format.hpp"
#include "unit_end.hpp"
#include "unit_runner.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kTokensPerStep = 2 * 16;  // the fake's B x T

// Pauses (or quits) the engine at the first step >= atStep once the coordinator's minimum is
// known to it; the step it stopped at.
struct StopWhenMinimumKnown {
    Harness& h;
    int64_t atStep;
    bool quit = false;
    std::atomic<int64_t> stoppedAt{-1};
    void arm() {
        Engine* e = h.engine.get();
        h.recorder.onProgress = [this, e](const std::string&, int64_t step) {
            if (stoppedAt.load() >= 0 || step < atStep)
                return;
            const auto s = e->snapshot();
            if (!s.current || !s.current->minSteps)
                return;
            stoppedAt = step;
            quit ? e->quit() : e->pause();
        };
    }
};

std::optional<net::ResultHeader> acceptedHeader(FakeCoordinator& api, int64_t id) {
    std::lock_guard lock(api.mu);
    const auto it = api.accepted.find(id);
    if (it == api.accepted.end())
        return std::nullopt;
    auto h = net::parseResultHeader(it->second);
    return h ? std::optional<net::ResultHeader>(*h) : std::nullopt;
}

}  // namespace

class TestEnginePause : public QObject {
    Q_OBJECT

  private slots:
    void choiceOnStopFollowsTheStatedMinimum() {
        QCOMPARE(choiceOnStop(3, 8, 2), StopChoice::UploadPartial);
        QCOMPARE(choiceOnStop(2, 8, 2), StopChoice::UploadPartial);
        QCOMPARE(choiceOnStop(1, 8, 2), StopChoice::KeepCheckpoint);
        QCOMPARE(choiceOnStop(5, 8, std::nullopt), StopChoice::KeepCheckpoint);  // not stated
        QCOMPARE(choiceOnStop(0, 8, 0), StopChoice::KeepCheckpoint);
        QCOMPARE(choiceOnStop(8, 8, 2), StopChoice::KeepCheckpoint);  // finished: not partial
    }

    void pauseNowUploadsThePartialResult() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 40);
        api.minSteps = 2;
        Harness h(api);
        QVERIFY(h.make().ok());
        StopWhenMinimumKnown stop{h, 2};
        stop.arm();
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Paused));
        QVERIFY(eventually([&] { return h.snap().totals.workUnitsAccepted == 1; }));
        const int64_t steps = stop.stoppedAt.load();
        QVERIFY(steps >= 2 && steps < 40);
        const auto header = acceptedHeader(api, 1);
        QVERIFY(header);
        QCOMPARE(int64_t{header->steps}, steps);
        QCOMPARE(header->tokens, steps * kTokensPerStep);
        const auto u = unit(*h.engine, "1");
        QCOMPARE(u->state, WorkUnitState::Accepted);
        QCOMPARE(u->steps, steps);
        QCOMPARE(u->innerSteps, int64_t{40});
        // Nothing of the unit is left to resume, the box shows no unit, and the pause holds:
        // no second unit is asked for.
        QVERIFY(!fs::exists(h.dataDir / "work" / "1"));
        QVERIFY(!h.snap().current);
        QVERIFY(h.recorder.logged("work unit 1 stopped at step " + std::to_string(steps) +
                                  " of 40 (paused), a partial result"));
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        QCOMPARE(h.snap().state, EngineState::Paused);
        QCOMPARE(api.workRequests.load(), 1);
        h.recorder.onProgress = nullptr;
        h.engine->quit();
        h.engine->wait();
    }

    // A snooze stops the unit the same way.
    void snoozeUploadsThePartialResult() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 40);
        api.minSteps = 2;
        Harness h(api);
        QVERIFY(h.make().ok());
        Engine* e = h.engine.get();
        std::atomic<int64_t> at{-1};
        h.recorder.onProgress = [&](const std::string&, int64_t step) {
            const auto s = e->snapshot();
            if (at.load() < 0 && step >= 2 && s.current && s.current->minSteps) {
                at = step;
                e->snooze(kStart + 3600000);
            }
        };
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Snoozed));
        QVERIFY(eventually([&] { return h.snap().totals.workUnitsAccepted == 1; }));
        QCOMPARE(int64_t{acceptedHeader(api, 1)->steps}, at.load());
        QVERIFY(h.recorder.logged("(snoozed), a partial result"));
        h.recorder.onProgress = nullptr;
        h.engine->quit();
        h.engine->wait();
    }

    // Below the minimum the unit keeps its checkpoint, asks on resume whether it is still
    // wanted, and finishes.
    void belowTheMinimumKeepsTheCheckpointAndResumes() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 40);
        api.minSteps = 30;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        StopWhenMinimumKnown stop{h, 2};
        stop.arm();
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Paused));
        const int64_t steps = stop.stoppedAt.load();
        QVERIFY(steps < 30);
        QVERIFY(fs::exists(h.dataDir / "work" / "1" / ("ckpt-" + std::to_string(steps) + ".ckpt")));
        QCOMPARE(api.uploadAttempts.load(), 0);
        const int reportsBefore = api.progressReports.load();
        h.recorder.onProgress = nullptr;
        h.engine->resume();
        QVERIFY(h.waitState(EngineState::Stopped));
        QVERIFY(api.progressReports.load() > reportsBefore);
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
        QCOMPARE(int64_t{acceptedHeader(api, 1)->steps}, int64_t{40});
    }

    // Paused longer than the coordinator keeps a unit: on resume the unit is dropped with the
    // reason's code (the Contributions page words it), and the engine goes on with new work.
    void resumeAfterTheCoordinatorGaveUpAbandonsWithAReason() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 40);
        api.minSteps = 30;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        StopWhenMinimumKnown stop{h, 2};
        stop.arm();
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Paused));
        {
            std::lock_guard lock(api.mu);
            api.abandonedUnits[1] = "no heartbeat for 200 s; its data was reassigned";
            api.held.erase(1);
        }
        h.recorder.onProgress = nullptr;
        h.engine->resume();
        QVERIFY(
            eventually([&] { return unit(*h.engine, "1")->state == WorkUnitState::Abandoned; }));
        auto tr = h.engine->ledger().transitions("1");
        QVERIFY(tr.ok());
        QCOMPARE(tr->back().detail, std::string("held_too_long"));
        QVERIFY(h.recorder.logged("work unit 1 abandoned: no heartbeat for 200 s"));
        QVERIFY(eventually([&] { return !fs::exists(h.dataDir / "work" / "1"); }));
        QVERIFY(h.waitState(EngineState::Stopped));  // unit 2 trained instead
        QVERIFY(acceptedHeader(api, 2).has_value());
    }

    // Quitting mid-unit leaves the partial result on disk; the next start uploads it.
    void quitLeavesThePartialResultForTheNextStart() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 40);
        api.minSteps = 2;
        // Its first upload fails and waits for a retry time the test clock never reaches.
        api.uploadFailures.push_back(apiFailure("connection refused", true));
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        int64_t steps = -1;
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            StopWhenMinimumKnown stop{h, 2, true};
            stop.arm();
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Stopped));
            h.engine->wait();
            steps = stop.stoppedAt.load();
            h.recorder.onProgress = nullptr;
            QVERIFY(h.recorder.logged("(quitting), a partial result"));
            QVERIFY(!fs::exists(data / "work" / "1"));
            QVERIFY(fs::exists(data / "results" / "1.result"));
        }
        QVERIFY(steps >= 2);
        QVERIFY(!acceptedHeader(api, 1));
        Harness h(api, data);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(eventually([&] { return acceptedHeader(api, 1).has_value(); }));
        QCOMPARE(int64_t{acceptedHeader(api, 1)->steps}, steps);
        QVERIFY(eventually([&] { return unit(*h.engine, "1")->state == WorkUnitState::Accepted; }));
        h.engine->quit();
        h.engine->wait();
    }

    void pauseSurvivesARestart() {
        FakeCoordinator api;
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            h.engine->pause();
        }
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Paused));
            QCOMPARE(api.workRequests.load(), 0);
            h.engine->resume();
            QVERIFY(eventually([&] { return api.workRequests.load() > 0; }));
            h.engine->quit();
            h.engine->wait();
        }
        auto hold = readHold(data / "hold.json");
        QVERIFY(hold.ok());
        QCOMPARE(*hold, HoldState{});
    }

    void snoozeSurvivesARestartUntilItEnds() {
        FakeCoordinator api;
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            h.engine->snooze(kStart + 3600000);
        }
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Snoozed));
            QCOMPARE(h.snap().snoozedUntilMs, std::optional<int64_t>(kStart + 3600000));
            h.engine->quit();
            h.engine->wait();
        }
        // Started after the snooze's end: nothing holds.
        Harness h(api, data);
        h.clock.setMs(kStart + 3600000);
        QVERIFY(h.make().ok());
        QVERIFY(!h.snap().snoozedUntilMs);
        h.engine->start();
        QVERIFY(eventually([&] { return api.workRequests.load() > 0; }));
        h.engine->quit();
        h.engine->wait();
    }

    // A damaged hold.json loses nothing else: a warning, and the engine works.
    void damagedHoldFileIsIgnoredWithAWarning() {
        FakeCoordinator api;
        Harness h(api);
        fs::create_directories(h.dataDir);
        std::ofstream(h.dataDir / "hold.json") << "{\"paused\": tru";
        QVERIFY(h.make().ok());
        QVERIFY(h.recorder.logged("ignoring the saved pause"));
        h.engine->start();
        QVERIFY(eventually([&] { return api.workRequests.load() > 0; }));
        h.engine->quit();
        h.engine->wait();
    }

    void unitEndCodes() {
        QCOMPARE(std::string(unitEndCode(
                     classifyAbandonReason("no heartbeat for 181 s; its data was reassigned"))),
                 std::string("held_too_long"));
        QCOMPARE(classifyAbandonReason("its deadline passed; its data was reassigned"),
                 UnitEndReason::HeldTooLong);
        QCOMPARE(classifyAbandonReason("the run is at version 3; results based on version 1 are "
                                       "no longer accepted (staleness bound 1)"),
                 UnitEndReason::RunMovedOn);
        QCOMPARE(classifyAbandonReason(
                     "the run moved on; its base version is beyond the staleness bound"),
                 UnitEndReason::RunMovedOn);
        QCOMPARE(classifyAbandonReason("heartbeats without progress for 600 s (still at step 0)"),
                 UnitEndReason::Stalled);
        QCOMPARE(classifyAbandonReason("released by its client"), UnitEndReason::Released);
        QCOMPARE(classifyAbandonReason("the result of this work unit was already accepted"),
                 UnitEndReason::AlreadyAccepted);
        QCOMPARE(classifyAbandonReason("something new"), UnitEndReason::Other);
        QCOMPARE(unitEndReasonFromCode("run_moved_on"), std::optional(UnitEndReason::RunMovedOn));
        QVERIFY(!unitEndReasonFromCode("connection reset"));
        QCOMPARE(refusalDetail(apiFailure("the run moved on", false, {}, "stale", 409)),
                 std::string("run_moved_on"));
        QCOMPARE(refusalDetail(apiFailure("bad norm", false, {}, "outlier_norm", 422)),
                 std::string("bad norm"));
    }
};

QTEST_GUILESS_MAIN(TestEnginePause)
#include "test_engine_pause.moc"
