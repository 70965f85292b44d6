// Rounds: the arithmetic of a close alone on exact small numbers (a late result re-based from its
// base version's weights), then through the Coordinator without HTTP and with a hand-driven
// clock: the close at a fixed quorum (exact new weights and momentum), the quorum of active
// workers, the round deadline, an empty round's deadline moving on, and work-unit timeouts.
//
// Dimensions: P parameters.
#include "direct.hpp"
#include "rounds.hpp"
#include "state_store.hpp"

#include <QtTest>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

using namespace tandem;
using namespace tandem::testing;

namespace {

constexpr uint16_t kHalfOne = 0x3C00, kHalfThree = 0x4200;

std::vector<uint16_t> constantDelta(int64_t P, uint16_t half) {
    return std::vector<uint16_t>(static_cast<size_t>(P), half);
}

// Exact in float: lr and momentum powers of two.
coord::CoordinatorConfig exactConfig() {
    auto c = directConfig();
    c.outer.lr = 0.5f;
    c.outer.momentum = 0.5f;
    c.quorum = 2;
    c.maxRelativeNorm = 0;  // deltas of 1.0 everywhere are far above the tiny weights' norm
    return c;
}

// A new client takes a unit and uploads a result for it.
bool contribute(DirectCoordinator& f, const std::string& name) {
    auto client = f.registerClient(name);
    const auto m = f.work(client);
    const auto delta = constantDelta(f.coordinator().parameterCount(), kHalfOne);
    return f.upload(client, buildResult(m, delta, client.key)).ok();
}

// The open round 0 is still open when ticked one second before `closeAt`, and closes at it.
void expectCloseAt(DirectCoordinator& f, int64_t closeAt) {
    *f.clock = closeAt - 1;
    f.coordinator().tick();
    QCOMPARE(f.coordinator().currentVersion(), int64_t{0});
    *f.clock = closeAt;
    f.coordinator().tick();
    QCOMPARE(f.coordinator().currentVersion(), int64_t{1});
}

}  // namespace

class TestCoordinatorRounds : public QObject {
    Q_OBJECT

  private slots:
    void outerStepAlone() {
        QTemporaryDir tmp;
        auto dirs = coord::StateDir::open(tmp.path().toStdString());
        QVERIFY(dirs);
        const ModelConfig model = *ModelConfig::parse("L=1,NH=2,C=16,T=16");
        const size_t P = static_cast<size_t>(model.parameterCount());
        std::vector<float> theta(P, 8.0f), velocity(P, 1.0f), sum(P);
        for (size_t i = 0; i < P; ++i)
            sum[i] = 4.0f * float(i % 3);  // weight sum 4: mean delta d = i % 3
        const OuterConfig outer{0.5f, 0.5f};

        // v = 0.5 * 1 + d, theta = 8 - 0.5 * (d + 0.5 * v) = 7.875 - 0.75 d
        auto next =
            coord::outerStepOfRound(*dirs, model, theta, velocity, sum, 4.0, {}, outer, nullptr);
        QVERIFY(next);
        for (size_t i = 0; i < P; ++i) {
            const float d = float(i % 3);
            QCOMPARE(next->velocity[i], 0.5f + d);
            QCOMPARE(next->theta[i], 7.875f - 0.75f * d);
        }

        // A late result of weight 2 trained from version 3 (all 10): it counts from theta, so
        // the sum loses 2 * (10 - 8) = 4 and d = i % 3 - 1.
        std::vector<float> older(P, 10.0f);
        QVERIFY(dirs->publish(3, model, older, std::vector<float>(P, 0.0f)));
        const coord::LateResults late[] = {{3, 2.0}};
        next =
            coord::outerStepOfRound(*dirs, model, theta, velocity, sum, 4.0, late, outer, nullptr);
        QVERIFY(next);
        for (size_t i = 0; i < P; ++i) {
            const float d = float(i % 3) - 1.0f;
            QCOMPARE(next->velocity[i], 0.5f + d);
            QCOMPARE(next->theta[i], 7.875f - 0.75f * d);
        }
        QCOMPARE(sum[4], 4.0f);  // the round's sum itself is left alone

        const coord::LateResults missing[] = {{5, 1.0}};
        auto failed = coord::outerStepOfRound(*dirs, model, theta, velocity, sum, 4.0, missing,
                                              outer, nullptr);
        QVERIFY(!failed);
        QVERIFY(
            failed.error().message.starts_with("re-basing the results trained from version 5: "));
    }

    // With the round thread running, the upload that completes a round is answered while the
    // close is still to come: the close waits for the test here, the receipt does not. (Before,
    // the commit ran the close itself and the answer waited for it.)
    void receiptComesBeforeTheClose() {
        std::mutex m;
        std::condition_variable cv;
        bool release = false;
        int closesStarted = 0;
        auto cfg = exactConfig();
        cfg.backgroundThreads = true;
        cfg.testBeforeClose = [&](int64_t) {
            std::unique_lock lock(m);
            ++closesStarted;
            cv.notify_all();
            cv.wait(lock, [&] { return release; });
        };
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        const int64_t P = c.parameterCount();
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto ma = f.work(a), mb = f.work(b);
        QVERIFY(f.upload(a, buildResult(ma, constantDelta(P, kHalfOne), a.key, 64)).ok());
        auto second = std::async(std::launch::async, [&] {
            return f.upload(b, buildResult(mb, constantDelta(P, kHalfThree), b.key, 64));
        });
        // A generous bound, not a timing: without the change the answer never comes while the
        // close is held.
        const bool answered =
            second.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
        const int64_t versionAtAnswer = c.currentVersion();
        {
            std::lock_guard lock(m);
            release = true;
        }
        cv.notify_all();
        QVERIFY2(answered, "the upload that completed the round waited for the close");
        auto receipt = second.get();
        QVERIFY(receipt.ok());
        QCOMPARE(net::Receipt::fromJson(*receipt)->round, int64_t{0});
        QCOMPARE(versionAtAnswer, int64_t{0});
        // The round thread closes it afterwards.
        for (int i = 0; i < 3000 && c.currentVersion() == 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        QCOMPARE(c.currentVersion(), int64_t{1});
        std::lock_guard lock(m);
        QCOMPARE(closesStarted, 1);
    }

    // The close is a compare-and-set on the round's row and the run's version: when another
    // process closes round 0 while this one computes its step (the hook runs then, the lock
    // released), this close commits nothing, removes the files it wrote, says why, and the
    // process takes no further close or result. PostgreSQL only (test_coordinator_rounds_postgres):
    // on SQLite the state directory's lock leaves no room for a second process.
    void aCloseThatLosesItsCompareAndSetCommitsNothing() {
        if (!postgresUrl())
            QSKIP("PostgreSQL only: run as test_coordinator_rounds_postgres (ctest -L postgres)");
        auto cfg = exactConfig();
        std::string rival;
        std::filesystem::path stateDir;
        std::string url;
        cfg.testBeforeClose = [&](int64_t round) {
            auto db = coord::openStateStore(stateDir, url);
            if (!db) {
                rival = db.error().message;
                return;
            }
            storage::Transaction tx(*db);
            for (const char* sql :
                 {"UPDATE rounds SET closed_unix = 5 WHERE round = 0",
                  "UPDATE runs SET version = 1",
                  "INSERT INTO rounds(run_id, round, opened_unix, deadline_unix) SELECT id, 1, 5, "
                  "9 FROM runs"}) {
                auto st = db->prepare(sql);
                if (!st || !st->run()) {
                    rival = std::string("rival close failed at: ") + sql;
                    return;
                }
            }
            rival = tx.commit() ? "closed " + std::to_string(round) : "rival commit failed";
        };
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        stateDir = f.t().stateDir();
        url = f.t().config().databaseUrl;
        auto& c = f.coordinator();
        const int64_t P = c.parameterCount();
        const auto theta0 = c.weights();
        auto a = f.registerClient("a"), b = f.registerClient("b"), late = f.registerClient("c");
        const auto ma = f.work(a), mb = f.work(b), mc = f.work(late);
        QVERIFY(f.upload(a, buildResult(ma, constantDelta(P, kHalfOne), a.key, 64)).ok());
        QVERIFY(f.upload(b, buildResult(mb, constantDelta(P, kHalfThree), b.key, 64)).ok());
        QCOMPARE(rival, std::string("closed 0"));
        // The loser: still at version 0, its weights unchanged, no version 1 files of its own.
        QCOMPARE(c.currentVersion(), int64_t{0});
        QVERIFY(c.weights() == theta0);
        QVERIFY(!std::filesystem::exists(stateDir / "weights" / "v1.ckpt"));
        QVERIFY(!std::filesystem::exists(stateDir / "momentum" / "v1.ckpt"));
        QVERIFY(
            f.logged("error: closing the round failed: round 0 was closed by another process, "
                     "or took a result after this close began; this close is discarded"));
        // The database has the rival's close only: one round 1, round 0's results counted once.
        {
            auto db = coord::openStateStore(stateDir, url);
            QVERIFY(db.ok());
            auto q = db->prepare(
                "SELECT (SELECT version FROM runs), (SELECT COUNT(*) FROM rounds WHERE round = 1), "
                "(SELECT closed_unix FROM rounds WHERE round = 0), (SELECT contributors FROM "
                "rounds WHERE round = 0)");
            QVERIFY(q.ok() && q->step());
            QCOMPARE(q->integer(0), int64_t{1});
            QCOMPARE(q->integer(1), int64_t{1});
            QCOMPARE(q->integer(2), int64_t{5});
            QCOMPARE(q->integer(3), int64_t{2});
        }
        // No second try at the tick, and a result for the closed round is refused (503, to be
        // sent again), not counted into it.
        *f.clock += 10000;
        c.tick();
        QCOMPARE(c.currentVersion(), int64_t{0});
        auto refused = f.upload(late, buildResult(mc, constantDelta(P, kHalfOne), late.key, 64));
        QVERIFY(!refused.ok());
        QCOMPARE(refused.refusal().httpStatus, 503);
        QCOMPARE(refused.refusal().code, std::string("round_closed_elsewhere"));
        auto db = coord::openStateStore(stateDir, url);
        auto q = db->prepare("SELECT COUNT(*) FROM results");
        QVERIFY(q.ok() && q->step());
        QCOMPARE(q->integer(0), int64_t{2});
        QVERIFY(!std::filesystem::exists(stateDir / "rounds" / "0" /
                                         (std::to_string(mc.workUnitId) + ".f16")));
    }

    void closesAtTheQuorum() {
        DirectCoordinator f(exactConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        const int64_t P = c.parameterCount();
        const std::vector<float> theta0 = c.weights();
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto ma = f.work(a), mb = f.work(b);
        QVERIFY(f.upload(a, buildResult(ma, constantDelta(P, kHalfOne), a.key, 64)).ok());
        QCOMPARE(c.currentVersion(), int64_t{0});  // 1 of 2
        QVERIFY(f.logged("(1/2)"));
        QVERIFY(f.upload(b, buildResult(mb, constantDelta(P, kHalfThree), b.key, 64)).ok());
        QCOMPARE(c.currentVersion(), int64_t{1});
        // d = (64 * 1 + 64 * 3) / 128 = 2; v = 0 + 2; theta -= 0.5 * (2 + 0.5 * 2) = 1.5.
        const auto theta1 = c.weights();
        const auto v1 = c.velocity();
        bool exact = true;
        for (size_t i = 0; i < theta0.size(); ++i)
            exact = exact && theta1[i] == theta0[i] - 1.5f && v1[i] == 2.0f;
        QVERIFY(exact);
        const auto status = c.status();
        QCOMPARE(status.round, int64_t{1});
        QCOMPARE(status.history.size(), size_t(1));
        QCOMPARE(status.history[0].contributors, 2);
        QCOMPARE(status.history[0].tokens, int64_t{128});
        QVERIFY(f.logged("round 0 closed: 2 contributor(s), 128 tokens, weight 128;"));
        // The new version's work starts from it.
        QCOMPARE(f.work(a).baseVersion, int64_t{1});
    }

    // --weight-deltas int8: the momentum is the plain run's, the weights are the plain run's
    // step quantized (weights + residual = the plain run's weights), the residual is written
    // with its version and restored after a restart: a restarted run goes on bit for bit like one
    // that never stopped.
    void weightDeltasCarryTheResidual() {
        auto plainCfg = exactConfig();
        auto cfg = plainCfg;
        cfg.weightDeltas = WeightDeltaCodec::Int8;
        DirectCoordinator plain(plainCfg), restarted(cfg), steady(cfg);
        for (auto* f : {&plain, &restarted, &steady})
            QVERIFY2(f->t().ok(), f->t().error().c_str());
        const int64_t P = plain.coordinator().parameterCount();
        QVERIFY(plain.coordinator().weightDeltaResidual().empty());
        QCOMPARE(restarted.coordinator().weightDeltaResidual(),
                 std::vector<float>(static_cast<size_t>(P), 0.0f));
        // Two results per round, of different sizes and one direction.
        auto round = [&](DirectCoordinator& f, int n) {
            for (int k = 0; k < 2; ++k) {
                auto client = f.registerClient("c" + std::to_string(n) + std::to_string(k));
                const auto m = f.work(client);
                if (!f.upload(client,
                              buildResult(m, patternDelta(P, 1.0f + 2.0f * k + n), client.key, 64))
                         .ok())
                    return false;
            }
            return f.coordinator().currentVersion() == n + 1;
        };
        for (auto* f : {&plain, &restarted, &steady})
            QVERIFY(round(*f, 0));
        const auto target = plain.coordinator().weights();
        const auto weights = restarted.coordinator().weights();
        const auto residual = restarted.coordinator().weightDeltaResidual();
        QCOMPARE(restarted.coordinator().velocity(), plain.coordinator().velocity());
        double worst = 0, largest = 0;
        int64_t moved = 0;
        for (int64_t i = 0; i < P; ++i) {
            const auto k = static_cast<size_t>(i);
            worst = std::max(worst, std::abs(double(weights[k]) + residual[k] - target[k]));
            largest = std::max(largest, double(std::abs(residual[k])));
            moved += weights[k] != target[k];
        }
        QVERIFY2(worst < 1e-6, qPrintable(QString::number(worst)));
        QVERIFY2(moved > 0, "the int8 step left the weights exactly where the plain step did");
        // Half an int8 step of the largest move (0.75 x 2 x 0.003 here) at most.
        QVERIFY2(largest > 0 && largest < 0.0045 / 254 * 1.01,
                 qPrintable(QString::number(largest)));
        QVERIFY(restarted.logged("version 1 published (int8 delta, " +
                                 std::to_string(P + 4 * ((P + 255) / 256)) + " bytes)"));
        QVERIFY(!restarted.readStateFile("residual/v1.ckpt").empty());
        QVERIFY(restarted.readStateFile("residual/v0.ckpt").empty());
        QVERIFY(plain.readStateFile("residual/v1.ckpt").empty());

        restarted.t().close();
        restarted.t().open();
        QVERIFY2(restarted.t().ok(), restarted.t().error().c_str());
        QCOMPARE(restarted.coordinator().weightDeltaResidual(), residual);
        QVERIFY(round(restarted, 1));
        QVERIFY(round(steady, 1));
        QCOMPARE(restarted.coordinator().weights(), steady.coordinator().weights());
        QCOMPARE(restarted.coordinator().weightDeltaResidual(),
                 steady.coordinator().weightDeltaResidual());
    }

    void quorumOfActiveWorkers() {
        auto cfg = exactConfig();
        cfg.quorum = 1;
        cfg.quorumOfActiveWorkers = true;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        const int64_t P = c.parameterCount();
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto ma = f.work(a), mb = f.work(b);
        QVERIFY(f.upload(a, buildResult(ma, constantDelta(P, kHalfOne), a.key)).ok());
        QCOMPARE(c.currentVersion(), int64_t{0});  // b is still training: 1 of 2
        QVERIFY(f.logged("(1/2)"));
        *f.clock += 100;
        QVERIFY(c.progress(b.id, mb.workUnitId, net::ProgressReport{}.toJson()).ok());
        *f.clock += 179;
        c.tick();
        QCOMPARE(c.currentVersion(), int64_t{0});  // b's heartbeat is 179 s old: still active
        *f.clock += 2;
        c.tick();  // 181 s: b's unit is abandoned, a alone is the quorum
        QVERIFY(f.logged("work unit " + std::to_string(mb.workUnitId) +
                         " abandoned: no heartbeat for 181 s; its data was reassigned"));
        QCOMPARE(c.currentVersion(), int64_t{1});
    }

    void closesAtTheDeadline() {
        auto cfg = exactConfig();
        cfg.quorum = 3;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t start = *f.clock;
        QVERIFY(contribute(f, "a"));
        expectCloseAt(f, start + 600);  // the round's deadline: opened + 600 s
        QVERIFY(f.logged("round 0 reached its deadline with 1 of 3 results"));
    }

    void anEmptyRoundWaitsAnotherTimeout() {
        auto cfg = exactConfig();
        cfg.quorum = 3;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t start = *f.clock;
        *f.clock = start + 600;
        f.coordinator().tick();  // no result: the deadline moves to start + 1200
        QCOMPARE(f.coordinator().currentVersion(), int64_t{0});
        QVERIFY(contribute(f, "a"));
        expectCloseAt(f, start + 1200);
    }

    void workUnitTimeouts() {
        auto cfg = exactConfig();
        cfg.stallTimeoutSeconds = 0;  // a's heartbeats report no progress; the deadline is tested
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        const int64_t P = c.parameterCount();
        auto a = f.registerClient("a"), b = f.registerClient("b");
        // a keeps sending heartbeats, but its unit's deadline (600 s x (1 + staleness 1)) passes.
        const auto ma = f.work(a);
        // b's upload is arriving when its heartbeat times out: it is not abandoned.
        const auto mb = f.work(b);
        const auto rb = buildResult(mb, constantDelta(P, kHalfOne), b.key);
        auto session =
            c.beginUpload(b.id, mb.workUnitId, static_cast<int64_t>(rb.body.size()), rb.signature);
        QVERIFY(session.ok());
        for (int i = 0; i < 12; ++i) {
            *f.clock += 100;
            QCOMPARE(c.progress(a.id, ma.workUnitId, net::ProgressReport{}.toJson()).value().action,
                     std::string("continue"));
            c.tick();
        }
        *f.clock += 1;  // 1201 s
        c.tick();
        QVERIFY(f.logged("work unit " + std::to_string(ma.workUnitId) +
                         " abandoned: its deadline passed; its data was reassigned"));
        QVERIFY(!f.logged("work unit " + std::to_string(mb.workUnitId) + " abandoned"));
        QVERIFY(!session.value()->feed(rb.body));
        QVERIFY(session.value()->finish(true).ok());
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorRounds)
#include "test_coordinator_rounds.moc"
