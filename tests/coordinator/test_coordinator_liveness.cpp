// Liveness of work units in memory (coordinator/unit_liveness.hpp): the table alone; heartbeats
// over HTTPS that commit nothing to the database (a second connection's PRAGMA data_version
// stays put) while GET /v1/work and the status read their values, then one batch that writes
// them; timeouts and active workers from the values in memory with the hand-driven clock; and a
// restart that gives every assigned unit a fresh grace period.
#include "api_helpers.hpp"
#include "direct.hpp"
#include "sqlite.hpp"
#include "unit_liveness.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::testing;

namespace {

// A second connection to the coordinator's database: data_version changes exactly when another
// connection commits (https://sqlite.org/pragma.html#pragma_data_version).
struct Observer {
    std::optional<coord::Database> db;

    explicit Observer(const std::filesystem::path& stateDir) {
        auto opened = coord::Database::open(stateDir / "coordinator.db");
        if (opened)
            db.emplace(std::move(*opened));
    }
    int64_t dataVersion() {
        auto q = db->prepare("PRAGMA data_version");
        return q && q->step() ? q->integer(0) : -1;
    }
    // heartbeat_unix, last_step of a work unit as stored.
    std::pair<int64_t, int64_t> stored(int64_t workUnitId) {
        auto q = db->prepare("SELECT heartbeat_unix, last_step FROM work_units WHERE id = ?");
        q->bind(1, workUnitId);
        return q->step() ? std::pair{q->integer(0), q->integer(1)}
                         : std::pair{int64_t{-1}, int64_t{-1}};
    }
    int64_t lastSeen(int64_t clientId) {
        auto q = db->prepare("SELECT last_seen_unix FROM clients WHERE id = ?");
        q->bind(1, clientId);
        return q->step() ? q->integer(0) : -1;
    }
};

std::string beat(DirectCoordinator& f, int64_t clientId, int64_t wu, int64_t step = 1) {
    auto r = f.coordinator().progress(clientId, wu, net::ProgressReport{step, 3.0f, 1}.toJson());
    return r.ok() ? r.value().action : "refused " + r.refusal().code;
}

bool held(DirectCoordinator& f, int64_t clientId, int64_t wu, int64_t* heartbeatUnix = nullptr) {
    auto units = f.coordinator().heldWork(clientId);
    for (const auto& u : units.value().units)
        if (u.workUnitId == wu) {
            if (heartbeatUnix)
                *heartbeatUnix = u.heartbeatUnix;
            return true;
        }
    return false;
}

}  // namespace

class TestCoordinatorLiveness : public QObject {
    Q_OBJECT

  private slots:
    void pulseTable() {
        coord::UnitLiveness t;
        t.touch(7, 1, 10, 100, 4);  // found assigned at step 4
        QCOMPARE(t.find(7)->heartbeatUnix, int64_t{100});
        QCOMPARE(t.find(7)->step, int64_t{4});
        QVERIFY(!t.find(7)->reported);
        t.report(7, 3, 2.5, 900.0, 110);
        t.report(7, 3, 2.4, 900.0, 150);  // no step forward: the stall count keeps its start
        QCOMPARE(t.find(7)->bestStepSinceUnix, int64_t{110});
        t.report(7, 2, 2.3, 800.0, 160);  // lower (a restarted unit): shown, not progress
        QCOMPARE(t.find(7)->step, int64_t{2});
        QCOMPARE(t.find(7)->bestStep, int64_t{3});
        QCOMPARE(t.find(7)->bestStepSinceUnix, int64_t{110});
        t.report(7, 5, 2.2, 800.0, 170);
        QCOMPARE(t.find(7)->bestStepSinceUnix, int64_t{170});
        QCOMPARE(t.find(7)->heartbeatUnix, int64_t{170});
        QCOMPARE(*t.find(7)->loss, 2.2);
        t.touch(7, 99, 99, 180);  // a sign of life keeps what is known of the unit
        QCOMPARE(t.find(7)->clientId, int64_t{1});
        QCOMPARE(t.find(7)->step, int64_t{5});
        QCOMPARE(t.find(7)->heartbeatUnix, int64_t{180});
        t.report(8, 1, 1.0, 1.0, 180);  // not tracked: ignored
        QVERIFY(!t.find(8));

        t.touch(8, 2, 10, 200);
        QCOMPARE(t.changed().size(), size_t(2));
        t.markWritten();
        QVERIFY(t.changed().empty());
        t.report(8, 1, 1.0, 1.0, 210);
        QCOMPARE(t.changed().size(), size_t(1));
        QCOMPARE(t.changed()[0].first, int64_t{8});
        t.retain({8, 9});
        QVERIFY(!t.find(7) && t.find(8));
        t.forget(8);
        QVERIFY(t.units().empty());
    }

    // Before, each heartbeat was an UPDATE in its own synced transaction.
    void heartbeatsOverHttpsCommitNothing() {
        DirectCoordinator f(directConfig(), 200000, /*withServer=*/true);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.t().registerClient("a");
        QVERIFY(a.id > 0);
        const net::Manifest m = requestWork(a);
        QVERIFY(m.workUnitId > 0);
        const int64_t assignedUnix = *f.clock;
        Observer o(f.t().stateDir());
        QVERIFY(o.db);
        const int64_t before = o.dataVersion();
        const std::string path = "/v1/work/" + std::to_string(m.workUnitId) + "/progress";
        for (int step = 1; step <= 30; ++step) {
            *f.clock += 5;
            auto res = a.http->Post(path, a.auth(), net::ProgressReport{step, 3.0f, 100.0}.toJson(),
                                    "application/json");
            QVERIFY(res && res->status == 200);
            QVERIFY(contains(res->body, "continue"));
        }
        // GET /v1/work and the status read the values in memory.
        auto list = a.http->Get("/v1/work", a.auth());
        QVERIFY(list && list->status == 200);
        auto units = net::HeldWorkUnits::fromJson(list->body);
        QVERIFY(units && units->units.size() == 1);
        QCOMPARE(units->units[0].lastStep, int64_t{30});
        QCOMPARE(units->units[0].heartbeatUnix, *f.clock);
        QCOMPARE(f.coordinator().status().activeWorkers, 1);
        QCOMPARE(o.dataVersion(), before);  // no other connection committed anything
        QCOMPARE(o.stored(m.workUnitId), (std::pair{assignedUnix, int64_t{0}}));

        // The ticker's batch writes them, and when the client was last seen, in one commit.
        f.coordinator().tick();
        QVERIFY(o.dataVersion() != before);
        QCOMPARE(o.stored(m.workUnitId), (std::pair{*f.clock, int64_t{30}}));
        QCOMPARE(o.lastSeen(a.id), *f.clock);
        // Nothing changed since: the next tick commits nothing.
        const int64_t afterBatch = o.dataVersion();
        *f.clock += coord::kLivenessFlushSeconds;
        f.coordinator().tick();
        QCOMPARE(o.dataVersion(), afterBatch);
    }

    void timeoutsAndActiveWorkersFromMemory() {
        auto cfg = directConfig();
        cfg.quorumOfActiveWorkers = true;
        cfg.quorum = 1;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto ma = f.work(a), mb = f.work(b);
        const int64_t t0 = *f.clock;
        QCOMPARE(f.coordinator().status().activeWorkers, 2);
        *f.clock = t0 + 150;
        QCOMPARE(beat(f, a.id, ma.workUnitId), std::string("continue"));
        // b has been silent for 181 s, a for 31: b no longer counts, before any tick.
        *f.clock = t0 + 181;
        QCOMPARE(f.coordinator().status().activeWorkers, 1);
        f.coordinator().tick();
        QVERIFY(f.logged("work unit " + std::to_string(mb.workUnitId) +
                         " abandoned: no heartbeat for 181 s"));
        QVERIFY(held(f, a.id, ma.workUnitId));
        *f.clock = t0 + 150 + 180;
        f.coordinator().tick();
        QVERIFY(held(f, a.id, ma.workUnitId));
        *f.clock = t0 + 150 + 181;
        f.coordinator().tick();
        QVERIFY(!held(f, a.id, ma.workUnitId));
        QVERIFY(f.logged("work unit " + std::to_string(ma.workUnitId) +
                         " abandoned: no heartbeat for 181 s"));
        QCOMPARE(beat(f, a.id, ma.workUnitId), std::string("abandon"));
        QCOMPARE(f.coordinator().status().activeWorkers, 0);
    }

    // Heartbeats are not kept over a restart (nor over a crash, which loses the last batch as
    // well): every assigned unit gets --heartbeat-timeout and --stall-timeout from the start.
    void restartGivesAFreshGracePeriod() {
        auto cfg = directConfig();
        cfg.stallTimeoutSeconds = 300;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a");
        const auto m = f.work(a);
        const int64_t t0 = *f.clock;
        *f.clock = t0 + 100;
        QCOMPARE(beat(f, a.id, m.workUnitId, 1), std::string("continue"));
        f.t().close();
        *f.clock = t0 + 250;  // 150 s after the heartbeat
        f.t().open();
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        QVERIFY(f.logged("1 assigned work unit(s) get a fresh grace period"));
        int64_t heartbeatUnix = 0;
        QVERIFY(held(f, a.id, m.workUnitId, &heartbeatUnix));
        QCOMPARE(heartbeatUnix, t0 + 250);
        *f.clock = t0 + 250 + 180;  // 330 s after the last heartbeat: still held
        f.coordinator().tick();
        QVERIFY(held(f, a.id, m.workUnitId));
        *f.clock = t0 + 250 + 181;
        f.coordinator().tick();
        QVERIFY(!held(f, a.id, m.workUnitId));
        QVERIFY(f.logged("work unit " + std::to_string(m.workUnitId) +
                         " abandoned: no heartbeat for 181 s"));
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorLiveness)
#include "test_coordinator_liveness.moc"
