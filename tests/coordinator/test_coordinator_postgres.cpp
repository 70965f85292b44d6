// The run state in PostgreSQL (coordinator/state_store.hpp) against the SQLite default: the same
// run (two clients, four rounds, a stale result re-based, a restart mid-round) once on each, with
// the same uploads in the same order. Both must commit every round and accept every result, the
// PostgreSQL run must resume from the database after its restarts, and since the aggregation is
// deterministic the final weights and momentum must be bit-identical. Runs in a cluster that
// tests/tools/with_postgres starts (label postgres). Then the round clock (round_clock.hpp): one
// holder per run, taken over when the holder goes, and a coordinator that does not hold it
// closes no round until it does. And a second coordinator process on one database is refused.
//
// Dimensions: P parameters.
#include "direct.hpp"
#include "round_clock.hpp"
#include "state_store.hpp"

#include <QtTest>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

using namespace tandem;
using namespace tandem::testing;

namespace {

struct RunOutcome {
    std::vector<float> theta, velocity;
    std::vector<int> contributors;  // per closed round
    int64_t version = 0;
    bool ok = false;
};

coord::CoordinatorConfig config() {
    auto c = directConfig();
    c.quorum = 2;
    c.maxRelativeNorm = 0;
    c.staleWeightFactor = 0.3;  // weights that a float4 column would round (48 x 0.3)
    return c;
}

// Two clients, rounds 0 to 3: each round one result of each, b's tokens weighing more; a's
// round-2 result is based on version 1 (stale by one, re-based); a restart between the two
// results of round 1 and another at the end. `check` runs after each restart.
RunOutcome runScenario(DirectCoordinator& f, const std::function<void()>& check) {
    RunOutcome out;
    auto& t = f.t();
    auto a = f.registerClient("a"), b = f.registerClient("b");
    const int64_t P = f.coordinator().parameterCount();
    auto upload = [&](const DirectClient& client, const net::Manifest& m, float scale,
                      int64_t tokens) {
        return f.upload(client, buildResult(m, patternDelta(P, scale), client.key, tokens)).ok();
    };
    net::Manifest staleForA;
    for (int round = 0; round < 4; ++round) {
        const auto mb = f.work(b);
        const auto ma = round == 2 ? staleForA : f.work(a);
        if (round == 1)
            staleForA = f.work(a);  // held across the close of round 1
        if (!upload(a, ma, 1.0f + 0.37f * float(round), 48))
            return out;
        if (round == 1) {
            t.close();
            t.open();
            if (!t.ok())
                return out;
            check();
        }
        if (!upload(b, mb, -0.6f + 0.21f * float(round), 80))
            return out;
        if (f.coordinator().currentVersion() != round + 1)
            return out;
    }
    t.close();
    t.open();
    if (!t.ok())
        return out;
    check();
    auto& c = f.coordinator();
    out.theta = c.weights();
    out.velocity = c.velocity();
    out.version = c.currentVersion();
    for (const auto& r : c.status().history)
        out.contributors.push_back(r.contributors);
    out.ok = true;
    return out;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// True once `done` is (tried every 50 ms, for at most 10 s): the server releases a lock when
// its backend has seen the holder's connection close, which is not at once.
bool eventually(const std::function<bool()>& done) {
    for (int tries = 0; tries < 200; ++tries) {
        if (done())
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

bool sameBits(const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

class TestCoordinatorPostgres : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        if (!postgresUrl())
            QSKIP(
                "no PostgreSQL cluster: run through tests/tools/with_postgres (ctest -L "
                "postgres)");
    }

    void sameRunOnSqliteAndPostgresEndsBitIdentical() {
        // harness.hpp takes PostgreSQL when TANDEM_TEST_POSTGRES is set: off for the first run.
        qunsetenv("TANDEM_TEST_POSTGRES");
        DirectCoordinator onSqlite(config());
        qputenv("TANDEM_TEST_POSTGRES", "1");
        QVERIFY2(onSqlite.t().ok(), onSqlite.t().error().c_str());
        QVERIFY(onSqlite.t().config().databaseUrl.empty());
        const RunOutcome sqlite = runScenario(onSqlite, [] {});
        QVERIFY(sqlite.ok);

        DirectCoordinator onPostgres(config());
        QVERIFY2(onPostgres.t().ok(), onPostgres.t().error().c_str());
        const std::string url = onPostgres.t().config().databaseUrl;
        QVERIFY(storage::isPostgresUrl(url));
        int restarts = 0;
        const RunOutcome postgres = runScenario(onPostgres, [&] {
            ++restarts;
            // Resumed from the database: no SQLite file was ever made.
            QVERIFY(!std::filesystem::exists(onPostgres.t().stateDir() / "coordinator.db"));
        });
        QVERIFY(postgres.ok);
        QCOMPARE(restarts, 2);

        QCOMPARE(postgres.version, int64_t{4});
        QCOMPARE(postgres.contributors, (std::vector<int>{2, 2, 2, 2}));
        QCOMPARE(postgres.contributors, sqlite.contributors);
        // Not trivially equal: the run moved (the momentum is not zero).
        QVERIFY(std::any_of(postgres.velocity.begin(), postgres.velocity.end(),
                            [](float v) { return v != 0.0f; }));
        QVERIFY2(sameBits(postgres.theta, sqlite.theta), "the weights differ");
        QVERIFY2(sameBits(postgres.velocity, sqlite.velocity), "the momentum differs");

        // What PostgreSQL holds: every result, every round closed, the run at version 4.
        auto db = coord::openStateStore(onPostgres.t().stateDir(), url);
        QVERIFY2(db.ok(), db.ok() ? "" : db.error().message.c_str());
        QCOMPARE(db->backend(), storage::Backend::Postgres);
        auto q = db->prepare(
            "SELECT (SELECT COUNT(*) FROM results), (SELECT COUNT(*) FROM receipts), (SELECT "
            "COUNT(*) FROM rounds WHERE closed_unix IS NOT NULL), (SELECT version FROM runs), "
            "(SELECT SUM(tokens) FROM results)");
        QVERIFY(q->step());
        QCOMPARE(q->integer(0), int64_t{8});
        QCOMPARE(q->integer(1), int64_t{8});
        QCOMPARE(q->integer(2), int64_t{4});
        QCOMPARE(q->integer(3), int64_t{4});
        QCOMPARE(q->integer(4), int64_t{4 * (48 + 80)});
    }

    void oneRoundClockPerRunTakenOverWhenItsHolderGoes() {
        auto url = freshPostgresDatabase("round_clock");
        QVERIFY2(url.ok(), url.ok() ? "" : url.error().message.c_str());
        QVERIFY(coord::RoundClock().held());  // SQLite: always this process
        auto a = std::make_unique<coord::RoundClock>(*url, 1);
        coord::RoundClock b(*url, 1), otherRun(*url, 2);
        QVERIFY(a->held());
        QVERIFY(a->held());  // still, and re-checked
        QVERIFY(!b.held());
        QCOMPARE(b.why(), std::string("another process runs the round clock of this run"));
        QVERIFY(otherRun.held());
        // The holder's process ends: its connection closes and the lock with it, once the
        // server's backend has seen the connection go (asynchronously: a few tries).
        a.reset();
        QVERIFY(eventually([&] { return b.held(); }));

        // Every connection to the database killed (a server restart, a network cut): the holder
        // finds out at its next check and no longer claims the clock; then whoever tries first
        // takes it, and only one of them.
        coord::RoundClock c(*url, 1);
        QVERIFY(!c.held());
        auto admin = storage::openPostgres(*postgresUrl(), {});
        QVERIFY(admin.ok());
        auto kill = admin->prepare(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
            "'round_clock'");
        QVERIFY(kill->run().ok());
        QVERIFY(!b.held());
        QVERIFY2(contains(b.why(), "round clock: checking the round clock's connection: "),
                 b.why().c_str());
        QVERIFY(eventually([&] { return c.held(); }));
        bool bHeld = false;
        for (int tries = 0; tries < 3; ++tries)
            bHeld = bHeld || b.held();
        QVERIFY(!bHeld);
    }

    void aCoordinatorWithoutTheRoundClockClosesNoRound() {
        auto cfg = config();
        cfg.quorum = 3;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        // Another process holds the clock of this run.
        auto other = std::make_unique<coord::RoundClock>(f.t().config().databaseUrl, c.runId());
        QVERIFY(other->held());
        auto a = f.registerClient("a");
        const auto m = f.work(a);
        QVERIFY(f.upload(a, buildResult(m, patternDelta(c.parameterCount()), a.key, 32)).ok());
        *f.clock += 601;  // past the round's deadline: 1 of 3 results closes it
        c.tick();
        QCOMPARE(c.currentVersion(), int64_t{0});
        QVERIFY(
            f.logged("not running the round clock: another process runs the round clock of "
                     "this run"));
        other.reset();
        QVERIFY(eventually([&] {
            c.tick();
            return c.currentVersion() == 1;
        }));
        QVERIFY(f.logged("this process runs the round clock now"));
    }

    // The close that a result's commit starts at the quorum asks the clock too: while another
    // process holds it, the round stays open (its holder's tick closes it); once this process
    // takes the clock, its own tick does.
    void aQuorumCloseAsksTheRoundClock() {
        auto cfg = config();
        cfg.quorum = 1;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        auto other = std::make_unique<coord::RoundClock>(f.t().config().databaseUrl, c.runId());
        QVERIFY(other->held());
        auto a = f.registerClient("a");
        const auto m = f.work(a);
        QVERIFY(f.upload(a, buildResult(m, patternDelta(c.parameterCount()), a.key, 32)).ok());
        QCOMPARE(c.currentVersion(), int64_t{0});
        other.reset();
        QVERIFY(eventually([&] {
            c.tick();
            return c.currentVersion() == 1;
        }));
    }

    // A second coordinator process on the same database is refused before it changes anything,
    // and the database is free again as soon as the first one closes.
    void aSecondCoordinatorOnTheDatabaseIsRefused() {
        DirectCoordinator f(config());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto second = config();
        second.databaseUrl = f.t().config().databaseUrl;
        DirectCoordinator g(second);
        QVERIFY(!g.t().ok());
        QVERIFY2(contains(g.t().error(), "another tandem-coordinator process serves this database"),
                 g.t().error().c_str());
        // Given back at once on close, not when the server notices: a restart finds it free.
        f.t().close();
        f.t().open();
        QVERIFY2(f.t().ok(), f.t().error().c_str());
    }

    void aWrongDatabaseUrlIsRefusedClearly() {
        auto c = config();
        c.databaseUrl = "mysql://somewhere/run";
        DirectCoordinator f(c);
        QVERIFY(!f.t().ok());
        QVERIFY2(f.t().error().find("--db takes a postgresql://") != std::string::npos,
                 f.t().error().c_str());
        auto d = config();
        d.databaseUrl = *postgresUrl("no_such_database");
        DirectCoordinator g(d);
        QVERIFY(!g.t().ok());
        QVERIFY2(g.t().error().find("database \"no_such_database\" does not exist") !=
                         std::string::npos &&
                     g.t().error().find(std::getenv("PGPASSWORD")) == std::string::npos,
                 g.t().error().c_str());
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorPostgres)
#include "test_coordinator_postgres.moc"
