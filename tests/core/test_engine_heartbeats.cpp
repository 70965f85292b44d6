// Heartbeats on their own thread (core/heartbeat_sender.hpp): a result queued behind an upload
// that does not move is kept alive through several heartbeat timeouts and accepted afterwards,
// and a training unit does not wait for a heartbeat that hangs.
#include "engine_harness.hpp"

#include <QTest>

using namespace tandem;
using namespace tandem::testing;

class TestEngineHeartbeats : public QObject {
    Q_OBJECT

  private slots:
    // Unit 1's upload is held; unit 2 is trained and waits behind it. The fake coordinator applies
    // a 60 s heartbeat timeout (as the real one's tick does, sparing the unit whose upload is
    // arriving) while the clock runs 150 s. Unit 2 must still be wanted, and accepted once the
    // upload moves. Before the heartbeat thread, nothing spoke for unit 2 once it was trained.
    void queuedResultOutlivesTheHeartbeatTimeout() {
        FakeCoordinator api;
        api.blockUploads = true;
        Harness h(api);
        api.heartbeatClock = &h.clock;
        h.cfg.maxWorkUnits = 2;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(eventually([&] {
            auto u2 = unit(*h.engine, "2");
            return api.uploadAttempts.load() == 1 && u2 && u2->state == WorkUnitState::Trained &&
                   h.snap().pendingUploads == 2;
        }));
        constexpr int64_t kTimeoutMs = 60000;
        // The manifest asks for heartbeats every 30 s; the engine reports every 15 s.
        constexpr int64_t kPeriodMs = 15000;
        auto lastBeat = [&](int64_t id) {
            std::lock_guard lock(api.mu);
            return api.lastHeartbeatMs[id];
        };
        for (int i = 0; i < 30; ++i) {
            h.clock.advanceMs(5000);
            // Give the heartbeat thread the chance to catch up with the clock before the tick.
            (void)eventually([&] { return lastBeat(2) + kPeriodMs >= h.clock.nowMs(); }, 2000);
            QCOMPARE(api.expireSilent(kTimeoutMs), 0);
        }
        {
            std::lock_guard lock(api.mu);
            QVERIFY(api.abandonedUnits.empty());
            api.blockUploads = false;
        }
        api.cv.notify_all();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
        QCOMPARE(unit(*h.engine, "2")->state, WorkUnitState::Accepted);
        QCOMPARE(api.acceptCount[2], 1);
    }

    // The oracle of the test above: with the same schedule, a unit nobody reports for is
    // abandoned by the fake's timeout, and its result is then settled as Abandoned, unsent.
    void silentUnitIsAbandonedByTheFake() {
        FakeCoordinator api;
        api.blockUploads = true;
        Harness h(api);
        api.heartbeatClock = &h.clock;
        h.cfg.maxWorkUnits = 2;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(eventually([&] {
            auto u2 = unit(*h.engine, "2");
            return api.uploadAttempts.load() == 1 && u2 && u2->state == WorkUnitState::Trained;
        }));
        h.engine->crashForTesting();  // the heartbeat thread stops with the engine's threads
        h.clock.advanceMs(61000);
        QVERIFY(api.expireSilent(60000) >= 1);
        std::lock_guard lock(api.mu);
        QVERIFY(api.abandonedUnits.count(2));
        QVERIFY(!api.abandonedUnits.count(1));  // its upload is arriving
        api.blockUploads = false;
        api.cv.notify_all();
    }

    // A heartbeat that hangs (a stalled connection) does not stop training: the unit is trained
    // and queued while the coordinator has not answered.
    void trainingDoesNotWaitForHeartbeats() {
        FakeCoordinator api;
        api.blockProgress = true;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(eventually([&] {
            auto u = unit(*h.engine, "1");
            return u && u->state == WorkUnitState::Trained;
        }));
        QCOMPARE(api.uploadAttempts.load(), 0);  // the question before the upload waits too
        QVERIFY(api.progressReports.load() >= 1);
        {
            std::lock_guard lock(api.mu);
            api.blockProgress = false;
        }
        api.cv.notify_all();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
    }
};

QTEST_GUILESS_MAIN(TestEngineHeartbeats)
#include "test_engine_heartbeats.moc"
