// The worker engine across restarts, against the fake coordinator: resume after a simulated
// crash (bit-identical result), a crash between the coordinator's acceptance and the stored
// receipt, quit with a checkpoint, and a checkpoint that cannot be read back.
#include "engine_harness.hpp"

#include <QTemporaryDir>
#include <QtTest>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;
namespace fs = std::filesystem;

class TestEngineRestart : public QObject {
    Q_OBJECT

  private slots:
    // Destroy the engine mid-unit like a crash (no checkpoint on the way out), start a new one on
    // the same data directory: it resumes from the last periodic checkpoint and its result is
    // bit-identical to an uninterrupted run.
    void resumesAfterCrash() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 10);
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            h.cfg.checkpointEverySteps = 3;
            QVERIFY(h.make().ok());
            Engine* e = h.engine.get();
            h.recorder.onProgress = [&](const std::string&, int64_t step) {
                if (step == 5)
                    e->crashForTesting();
            };
            h.engine->start();
            QVERIFY(eventually([&] { return h.engine->finished(); }));
            QVERIFY(fs::exists(data / "work" / "1" / "ckpt-3.ckpt"));
            QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Training);
        }
        int firstStepSeen = -1;
        {
            Harness h(api, data);
            h.cfg.maxWorkUnits = 1;
            h.cfg.checkpointEverySteps = 3;
            h.recorder.onProgress = [&](const std::string&, int64_t step) {
                if (firstStepSeen < 0)
                    firstStepSeen = static_cast<int>(step);
            };
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Stopped));
            QCOMPARE(firstStepSeen, 4);  // resumed after step 3
            QVERIFY(h.recorder.logged("resuming at step 3"));
            QCOMPARE(api.registrations.load(), 1);  // the registration survived
            auto u = unit(*h.engine, "1");
            QCOMPARE(u->state, WorkUnitState::Accepted);
            QCOMPARE(u->steps, int64_t{10});
            QVERIFY(h.engine->ledger().integrityCheck().ok());
            auto rows = h.engine->ledger().workUnits(100);
            QCOMPARE(rows->size(), size_t{1});
        }
        FakeCoordinator ref("L=1,NH=2,C=16,T=16", 10);
        Harness r(ref);
        r.cfg.maxWorkUnits = 1;
        QVERIFY(r.make().ok());
        r.engine->start();
        QVERIFY(r.waitState(EngineState::Stopped));
        QVERIFY(api.accepted[1] == ref.accepted[1]);
    }

    // Crash after the coordinator accepted the upload but before the receipt was stored: the
    // restart uploads again, the coordinator counts it once, the ledger gets the receipt once.
    void crashAfterUploadBeforeReceipt() {
        FakeCoordinator api;
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            Engine* e = h.engine.get();
            api.onUploadAccepted = [e](int64_t) { e->crashForTesting(); };
            h.engine->start();
            QVERIFY(eventually([&] { return h.engine->finished(); }));
            QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Uploading);
            QVERIFY(fs::exists(data / "results" / "1.result"));
        }
        api.onUploadAccepted = nullptr;
        {
            Harness h(api, data);
            h.cfg.maxWorkUnits = 1;
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(
                eventually([&] { return unit(*h.engine, "1")->state == WorkUnitState::Accepted; }));
            QCOMPARE(api.acceptCount[1], 1);
            QVERIFY(api.uploadAttempts.load() >= 2);
            QVERIFY(eventually([&] { return !fs::exists(data / "results" / "1.result"); }));
            h.engine->quit();
            h.engine->wait();
            QVERIFY(h.engine->ledger().integrityCheck().ok());
        }
    }

    void quitCheckpointsAndResumes() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 8);
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            Engine* e = h.engine.get();
            h.recorder.onProgress = [&](const std::string&, int64_t step) {
                if (step == 2)
                    e->quit();
            };
            h.engine->start();
            h.engine->wait();
            QCOMPARE(h.snap().state, EngineState::Stopped);
            QVERIFY(fs::exists(data / "work" / "1" / "ckpt-2.ckpt"));
        }
        Harness h(api, data);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        QVERIFY(h.recorder.logged("resuming at step 2"));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
    }

    // A checkpoint that cannot be read back starts the unit over from its start weights, the
    // same unit (its manifest kept): the result equals that of an uninterrupted run.
    void unusableCheckpointStartsOver() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 8);
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            Engine* e = h.engine.get();
            h.recorder.onProgress = [&](const std::string&, int64_t step) {
                if (step == 2)
                    e->quit();
            };
            h.engine->start();
            h.engine->wait();
            QVERIFY(fs::exists(data / "work" / "1" / "ckpt-2.ckpt"));
        }
        fs::resize_file(data / "work" / "1" / "ckpt-2.ckpt", 10);  // truncated
        {
            Harness h(api, data);
            h.cfg.maxWorkUnits = 1;
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Stopped));
            QVERIFY(h.recorder.logged("work unit 1: checkpoint unusable"));
            auto u = unit(*h.engine, "1");
            QVERIFY(u);
            QCOMPARE(u->state, WorkUnitState::Accepted);
            QCOMPARE(u->steps, int64_t{8});
            QVERIFY(!unit(*h.engine, "0"));
        }
        FakeCoordinator ref("L=1,NH=2,C=16,T=16", 8);
        Harness r(ref);
        r.cfg.maxWorkUnits = 1;
        QVERIFY(r.make().ok());
        r.engine->start();
        QVERIFY(r.waitState(EngineState::Stopped));
        QCOMPARE(api.accepted.count(1), size_t{1});
        QVERIFY(api.accepted[1] == ref.accepted[1]);
    }

    // "Last upload" after a restart comes from the ledger, not "none yet".
    void lastUploadComesFromTheLedgerAfterARestart() {
        FakeCoordinator api;
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            h.cfg.maxWorkUnits = 2;
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Stopped));
            h.engine->wait();
        }
        Harness h(api, data);
        QVERIFY(h.make().ok());
        const auto last = h.snap().lastUpload;
        QVERIFY(last);
        QCOMPARE(last->state, WorkUnitState::Accepted);
        QCOMPARE(last->id, std::string("2"));
        QCOMPARE(last->credit, double(6 * 2 * 16));  // the receipt's credit: its tokens
    }
};

QTEST_APPLESS_MAIN(TestEngineRestart)
#include "test_engine_restart.moc"
