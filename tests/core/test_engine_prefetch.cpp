// The next unit's prefetch (core/unit_prefetch.hpp): asked for and downloaded while the unit
// before it trains, so that training goes on without a download in between; off without upload
// overlap or when disabled; and a kill with a prefetched unit beside the one in training resumes
// the one in training.
#include "engine_harness.hpp"

#include <QtTest>

#include <atomic>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

// Whether a second unit was assigned before the first one's last step was over: the test holds
// the engine thread in its last step's progress callback for up to waitMs.
struct LastStepWatch {
    std::atomic<bool> assignedBeforeEnd{false};
    std::atomic<bool> checked{false};
    void install(Harness& h, FakeCoordinator& api, const std::string& firstId, int steps,
                 int waitMs) {
        h.recorder.onProgress = [this, &api, firstId, steps, waitMs](const std::string& id,
                                                                     int64_t step) {
            if (id != firstId || step != steps || checked.exchange(true))
                return;
            assignedBeforeEnd = eventually(
                [&] {
                    std::lock_guard lock(api.mu);
                    return api.assigned.size() >= 2;
                },
                waitMs);
        };
    }
};

int downloadingStates(Recorder& r) {
    std::lock_guard lock(r.mu);
    int n = 0;
    for (const auto& [state, reason] : r.states)
        n += state == EngineState::Downloading;
    return n;
}

}  // namespace

class TestEnginePrefetch : public QObject {
    Q_OBJECT

  private slots:
    // Units 2 and 3 are asked for and downloaded while 1 and 2 train: the engine shows the
    // Downloading state for unit 1 only, and every unit is accepted once.
    void nextUnitIsFetchedWhileTraining() {
        FakeCoordinator api;
        api.maxWorkUnits = 3;
        Harness h(api);
        h.cfg.maxWorkUnits = 3;
        LastStepWatch watch;
        watch.install(h, api, "1", 6, 10000);
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        h.engine->wait();
        QVERIFY(watch.checked.load());
        QVERIFY2(watch.assignedBeforeEnd.load(), "unit 2 was not asked for while 1 trained");
        QCOMPARE(api.acceptCount.size(), size_t{3});
        for (const auto& [id, count] : api.acceptCount)
            QCOMPARE(count, 1);
        QCOMPARE(downloadingStates(h.recorder), 1);
        QVERIFY(h.recorder.logged("prefetched work unit 2"));
        // The last unit prefetches nothing: no fourth unit was asked for.
        QCOMPARE(api.workRequests.load(), 3);
    }

    // Without upload overlap, or with the prefetch off, the next unit is asked for only after
    // the last one is trained (the check the test above passes fails here).
    void noPrefetchWithoutOverlapOrWhenOff() {
        for (const bool overlap : {false, true}) {
            FakeCoordinator api;
            api.maxWorkUnits = 2;
            Harness h(api);
            h.cfg.maxWorkUnits = 2;
            h.cfg.overlapUploads = overlap;
            h.cfg.prefetch = false;
            LastStepWatch watch;
            watch.install(h, api, "1", 6, 1500);
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Stopped));
            h.engine->wait();
            QVERIFY(watch.checked.load());
            QVERIFY(!watch.assignedBeforeEnd.load());
            QCOMPARE(api.acceptCount.size(), size_t{2});
            QCOMPARE(downloadingStates(h.recorder), 2);
        }
    }

    // Paused in unit 1's last step, with unit 2 fetched ahead: unit 1 is finished and uploaded,
    // unit 2 is given back untrained (released, recorded as such, its files gone), and the pause
    // holds.
    void pauseGivesThePrefetchedUnitBack() {
        FakeCoordinator api;
        Harness h(api);
        Engine* engine = nullptr;
        h.recorder.onProgress = [&](const std::string& id, int64_t step) {
            if (id != "1" || step != 6)
                return;
            eventually([&] {
                std::lock_guard lock(api.mu);
                return api.assigned.size() >= 2;
            });
            engine->pause();
        };
        QVERIFY(h.make().ok());
        engine = h.engine.get();
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Paused));
        QVERIFY(eventually([&] { return h.snap().totals.workUnitsAccepted == 1; }));
        QVERIFY(eventually([&] {
            std::lock_guard lock(api.mu);
            return api.released == std::vector<int64_t>{2};
        }));
        QCOMPARE(unit(*h.engine, "1")->steps, int64_t{6});
        QCOMPARE(unit(*h.engine, "2")->state, WorkUnitState::Abandoned);
        QCOMPARE(unit(*h.engine, "2")->steps, int64_t{0});
        QVERIFY(!fs::exists(h.dataDir / "work" / "2"));
        QVERIFY(h.recorder.logged("work unit 2: fetched ahead, given back before it started"));
        QCOMPARE(api.workRequests.load(), 2);
        QCOMPARE(h.snap().state, EngineState::Paused);
        h.recorder.onProgress = nullptr;
        h.engine->quit();
        h.engine->wait();
    }

    // Killed in unit 9's last step with unit 10 prefetched beside it: the restart resumes unit
    // 9 (ids compare as numbers, not as the names "10" < "9"), whose result is accepted with
    // all its steps.
    void restartResumesTheUnitInTraining() {
        FakeCoordinator api;
        api.setNextId(9);
        QTemporaryDir dir;
        const fs::path dataDir = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, dataDir);
            h.cfg.checkpointEverySteps = 1;
            Engine* engine = nullptr;
            h.recorder.onProgress = [&](const std::string& id, int64_t step) {
                if (id != "9" || step != 5)
                    return;
                // Unit 10's data is in cache/ beside unit 9's (both share the weights).
                eventually([&] {
                    int files = 0;
                    std::error_code ec;
                    for (const auto& e : fs::directory_iterator(dataDir / "cache", ec))
                        files += e.path().extension() != ".part";
                    return files >= 3;
                });
                engine->crashForTesting();
            };
            QVERIFY(h.make().ok());
            engine = h.engine.get();
            h.engine->start();
            h.engine->wait();
            QVERIFY(fs::exists(dataDir / "work" / "10"));
            QVERIFY(fs::exists(dataDir / "work" / "9"));
        }
        Harness h(api, dataDir);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        h.engine->wait();
        QVERIFY(h.recorder.logged("work unit 9: resuming at step 4"));
        QCOMPARE(api.acceptCount.count(9), size_t{1});
        auto u = unit(*h.engine, "9");
        QVERIFY(u.has_value());
        QCOMPARE(u->steps, int64_t{6});
    }
};

QTEST_GUILESS_MAIN(TestEnginePrefetch)
#include "test_engine_prefetch.moc"
