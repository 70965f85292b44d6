// Work units lost between the coordinator and the worker: a worker killed after the coordinator
// committed a unit but before its own record of it (the fake's onAssigned seam) gets the same
// unit back with its stored request id; units nothing here can resume are released on start
// instead of blocking new work for the heartbeat timeout (409 too_many_work_units, 180 s);
// a unit the coordinator no longer holds is dropped here; a finished result is never dropped by
// that comparison (its upload answers for it).
#include "engine_harness.hpp"

#include "unit_files.hpp"

#include <QTemporaryDir>
#include <QtTest>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

// Runs an engine on `data` until the fake's onAssigned seam kills it: the coordinator has
// committed the unit, the worker has recorded nothing of it.
void killAfterAssignment(FakeCoordinator& api, const fs::path& data) {
    Harness h(api, data);
    QVERIFY(h.make().ok());
    Engine* e = h.engine.get();
    api.onAssigned = [e](int64_t) { e->crashForTesting(); };
    h.engine->start();
    QVERIFY(eventually([&] { return h.engine->finished(); }));
    api.onAssigned = nullptr;
}

std::string storedRequestId(const fs::path& data) {
    auto id = readUnitRequest(DataDir(data));
    return id && *id ? **id : std::string();
}

}  // namespace

class TestEngineOrphans : public QObject {
    Q_OBJECT

  private slots:
    // Killed between the coordinator's commit and the ledger: the request id was on disk before
    // the request left, so the restarted worker asks again with it and trains the same unit; the
    // coordinator never hands out a second one and the limit is never hit.
    void killedAfterTheCommitGetsTheSameUnitBack() {
        FakeCoordinator api;
        api.maxHeldUnits = 2;
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        killAfterAssignment(api, data);
        const std::string id = storedRequestId(data);
        QVERIFY(net::isRequestId(id));
        QCOMPARE(api.requests.size(), size_t{1});
        QCOMPARE(api.requestIds[0], id);  // stored before it was sent
        QCOMPARE(api.held.size(), size_t{1});
        {
            Harness h(api, data);
            h.cfg.maxWorkUnits = 1;
            QVERIFY(h.make().ok());
            QVERIFY(!unit(*h.engine, "1"));  // nothing recorded before the kill
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Stopped));
            QVERIFY(h.recorder.logged("answer was cut off; asking for it again"));
            QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
            QCOMPARE(h.engine->ledger().workUnits(100)->size(), size_t{1});
        }
        QCOMPARE(api.assigned, (std::vector<int64_t>{1, 1}));
        QCOMPARE(api.requestIds[1], id);
        QCOMPARE(api.acceptCount[1], 1);
        QVERIFY(api.released.empty());
        QCOMPARE(api.tooManyRefusals.load(), 0);
        QVERIFY(api.held.empty());
        QVERIFY(!fs::exists(data / "work_request.json"));  // answered and recorded
    }

    // Two units the worker knows nothing of (killed after the commit by a worker that kept no
    // request id: the file is gone) fill the coordinator's limit of two. On start the worker
    // releases both and gets new work at once, instead of 409 for the heartbeat timeout.
    void orphansAreReleasedOnStart() {
        FakeCoordinator api;
        api.maxHeldUnits = 2;
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        for (int i = 0; i < 2; ++i) {
            // A coordinator (or worker) of before the list: nothing released on the way.
            api.listFailures.push_back(apiFailure("no route", false, {}, "not_found", 404));
            killAfterAssignment(api, data);
            QVERIFY(fs::remove(data / "work_request.json"));
        }
        QCOMPARE(api.held.size(), size_t{2});
        {
            Harness h(api, data);
            h.cfg.maxWorkUnits = 1;
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Stopped));
            QVERIFY(
                h.recorder.logged("work unit 1: the coordinator held it for us, but nothing "
                                  "here can resume it; released it"));
            QCOMPARE(unit(*h.engine, "3")->state, WorkUnitState::Accepted);
        }
        QCOMPARE(api.released, (std::vector<int64_t>{1, 2}));
        QCOMPARE(api.tooManyRefusals.load(), 0);
        QCOMPARE(api.acceptCount.size(), size_t{1});
        QVERIFY(api.held.empty());
    }

    // The unit in work/ that the coordinator no longer holds (it timed out while the worker was
    // down) is dropped with a log line, not trained on and uploaded for nothing.
    void unitTheCoordinatorDroppedIsDroppedHere() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 10);
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            h.cfg.checkpointEverySteps = 3;
            QVERIFY(h.make().ok());
            Engine* e = h.engine.get();
            h.recorder.onProgress = [e](const std::string&, int64_t step) {
                if (step == 5)
                    e->crashForTesting();
            };
            h.engine->start();
            QVERIFY(eventually([&] { return h.engine->finished(); }));
            QVERIFY(fs::exists(data / "work" / "1" / "ckpt-3.ckpt"));
        }
        api.held.erase(1);  // abandoned by the coordinator's heartbeat timeout
        {
            Harness h(api, data);
            h.cfg.maxWorkUnits = 1;
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Stopped));
            QVERIFY(h.recorder.logged("work unit 1: the coordinator no longer holds it"));
            QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Abandoned);
            QCOMPARE(unit(*h.engine, "2")->state, WorkUnitState::Accepted);
        }
        QVERIFY(!fs::exists(data / "work" / "1"));
        QCOMPARE(api.acceptCount.count(1), size_t{0});
        QCOMPARE(api.uploadAttempts.load(), 1);  // unit 2 only
    }

    // A finished result whose unit the coordinator no longer lists is not dropped by the
    // comparison: it uploads, and the coordinator's refusal settles it (Rejected, with its
    // words), as an upload after any abandonment does.
    void resultOfAnUnlistedUnitStillUploads() {
        FakeCoordinator api;
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            Engine* e = h.engine.get();
            api.uploadFailures.push_back(apiFailure("cut", true));
            {
                std::lock_guard lock(api.mu);
                api.blockUploads = true;
            }
            h.engine->start();
            QVERIFY(eventually([&] { return api.uploadAttempts.load() == 1; }));
            e->crashForTesting();
            {
                std::lock_guard lock(api.mu);
                api.blockUploads = false;
            }
            api.cv.notify_all();
            QVERIFY(eventually([&] { return h.engine->finished(); }));
            QVERIFY(fs::exists(data / "results" / "1.result"));
            QVERIFY(fs::exists(data / "results" / "1.json"));
        }
        api.held.clear();  // unit 1 abandoned; a unit 2 the worker was fetching is gone too
        const int attemptsBefore = api.uploadAttempts.load();
        {
            Harness h(api, data);
            h.cfg.maxWorkUnits = 1;
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(eventually([&] {
                return h.recorder.logged("work unit 1 was refused: work unit 1 was abandoned");
            }));
            QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Rejected);
            QVERIFY(!h.recorder.logged("work unit 1: the coordinator no longer holds it"));
            h.engine->quit();
            h.engine->wait();
        }
        QVERIFY(api.uploadAttempts.load() > attemptsBefore);
        QVERIFY(!fs::exists(data / "results" / "1.result"));
        QVERIFY(!fs::exists(data / "results" / "1.json"));
    }

    // A stored request id whose unit was recorded (killed after the ledger row, before the file
    // went) must not fetch that unit a second time: the comparison on start removes it; when the
    // coordinator cannot list units, the fetch sees the unit is ours and asks with a new id.
    void answeredRequestIdIsNotReused() {
        for (const bool canList : {true, false}) {
            FakeCoordinator api("L=1,NH=2,C=16,T=16", 10);
            QTemporaryDir dir;
            const fs::path data = fs::path(dir.path().toStdString()) / "data";
            {
                Harness h(api, data);
                h.cfg.checkpointEverySteps = 3;
                QVERIFY(h.make().ok());
                Engine* e = h.engine.get();
                h.recorder.onProgress = [e](const std::string&, int64_t step) {
                    if (step == 5)
                        e->crashForTesting();
                };
                h.engine->start();
                QVERIFY(eventually([&] { return h.engine->finished(); }));
            }
            QVERIFY(!fs::exists(data / "work_request.json"));
            QVERIFY(writeUnitRequest(DataDir(data), api.held.at(1)).ok());
            if (!canList)
                api.listFailures.push_back(apiFailure("no route", false, {}, "not_found", 404));
            {
                // Uploads wait until the next unit was asked for, so unit 1 is still held then.
                std::unique_lock lock(api.mu);
                api.blockUploads = true;
            }
            {
                Harness h(api, data);
                h.cfg.maxWorkUnits = 2;
                QVERIFY(h.make().ok());
                h.engine->start();
                QVERIFY(eventually([&] {
                    std::lock_guard lock(api.mu);
                    return api.assigned.size() == (canList ? 2u : 3u);
                }));
                {
                    std::lock_guard lock(api.mu);
                    api.blockUploads = false;
                }
                api.cv.notify_all();
                QVERIFY(h.waitState(EngineState::Stopped));
                QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
                QCOMPARE(unit(*h.engine, "2")->state, WorkUnitState::Accepted);
                QCOMPARE(h.recorder.logged("is already ours; asking again with a new request id"),
                         !canList);
            }
            // Without the checks the stale id would have brought unit 1 back to be trained again.
            QCOMPARE(api.assigned,
                     canList ? (std::vector<int64_t>{1, 2}) : (std::vector<int64_t>{1, 1, 2}));
            QCOMPARE(api.acceptCount[1], 1);
            QCOMPARE(api.acceptCount[2], 1);
            QVERIFY(api.released.empty());
        }
    }

    // The result's .json cannot be written (a directory in its place): the unit fails and its
    // .result goes with it, so no result file is left without its .json.
    void resultInfoWriteFailureLeavesNoResultFile() {
        FakeCoordinator api;
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        fs::create_directories(data / "results" / "1.json" / "blocker");
        Harness h(api, data);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Failed);
        QVERIFY(!fs::exists(data / "results" / "1.result"));
        QCOMPARE(unit(*h.engine, "2")->state, WorkUnitState::Accepted);
    }

    // A damaged work_request.json is replaced with a new id (and said so), never sent.
    void damagedRequestIdIsReplaced() {
        FakeCoordinator api;
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        fs::create_directories(data);
        QVERIFY(writeTextAtomically(data / "work_request.json", "{\"request_id\":\"a b\"}").ok());
        Harness h(api, data);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        QVERIFY(h.recorder.logged("work_request.json: field 'request_id' must be a request id"));
        QVERIFY(net::isRequestId(api.requestIds.at(0)));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
    }
};

QTEST_GUILESS_MAIN(TestEngineOrphans)
#include "test_engine_orphans.moc"
