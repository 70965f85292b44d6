// Front ends with real workers (issue 16, item 2, K = 1; label postgres): the aggregating
// tandem-coordinator and two `--role front` ones on one PostgreSQL database of the test's own
// cluster (tests/tools/with_postgres), all three with the self-signed TLS identity of the first
// (tls/ copied, so the workers' pin holds for each), and one real tandem-worker joined through
// each front end. The workers register, take work and report progress at their front end, and
// fetch the weights from and upload their results to the aggregating process, whose address the
// signed manifests name (the pin is trusted there too: net/coordinator_client.cpp). Every unit a
// worker trained is settled (accepted, or refused as too stale), the rounds close, and the
// database holds each accepted result once.
#include "e2e_harness.hpp"

#include "../tools/postgres_cluster.hpp"
#include "state_store.hpp"
#include "unit_end.hpp"

using namespace tandem;
using namespace tandem::e2e;

class TestE2eFrontEnds : public QObject {
    Q_OBJECT

  private slots:
    void workersJoinThroughFrontEnds() {
        if (!testing::postgresUrl())
            QSKIP(
                "no PostgreSQL cluster: run through tests/tools/with_postgres (ctest -L "
                "postgres)");
        auto url = testing::freshPostgresDatabase("e2e_front_ends");
        QVERIFY2(url.ok(), url.ok() ? "" : url.error().message.c_str());
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();

        Coordinator agg;
        fs::create_directories(dir / "aggregator");
        std::vector<std::string> args = {"--db",
                                         *url,
                                         "--model",
                                         "tiny",
                                         "--inner-steps",
                                         "8",
                                         "--batch",
                                         "2",
                                         "--threads",
                                         "1",
                                         "--round-timeout",
                                         "120",
                                         "--replicate-fraction",
                                         "0",
                                         "--corpus"};
        for (const auto& c : corpusArgs(dir))
            args.push_back(c);
        QVERIFY2(agg.start(dir / "aggregator", args), tail(agg.log).c_str());

        Coordinator front[2];
        for (int i = 0; i < 2; ++i) {
            const fs::path home = dir / ("front" + std::to_string(i + 1));
            fs::create_directories(home / "coordinator");
            for (const char* part : {"coordinator_key.pem", "tls", "data"})
                fs::copy(agg.stateDir / part, home / "coordinator" / part,
                         fs::copy_options::recursive);
            QVERIFY2(front[i].start(home, {"--role", "front", "--db", *url, "--upload-base",
                                           agg.url(), "--threads", "1"}),
                     tail(front[i].log).c_str());
            QCOMPARE(front[i].pin, agg.pin);
        }

        constexpr int kUnits = 3;
        Worker workers[2];
        for (int i = 0; i < 2; ++i)
            workers[i].start(front[i], dir, "worker" + std::to_string(i + 1),
                             {"--max-work-units", std::to_string(kUnits)});
        for (Worker& w : workers) {
            QVERIFY2(w.wait(300000), tail(w.log).c_str());
            QVERIFY2(w.process.exitCode() == 0, tail(w.log).c_str());
        }

        // Every unit each worker trained is settled: accepted, or refused as too stale (a unit
        // two versions behind: the protocol's rule, as in test_e2e_run).
        int accepted = 0;
        for (Worker& w : workers) {
            auto ledger = core::Ledger::open(w.dataDir / "ledger.db");
            QVERIFY(ledger);
            auto rows = (*ledger)->workUnits(100);
            QVERIFY(rows);
            QCOMPARE(static_cast<int>(rows->size()), kUnits);
            for (const auto& r : *rows) {
                if (r.unit.state == core::WorkUnitState::Accepted) {
                    ++accepted;
                    continue;
                }
                auto tr = (*ledger)->transitions(r.unit.id);
                QVERIFY(tr && !tr->empty());
                const std::string& why = tr->back().detail;
                QVERIFY2(core::unitEndReasonFromCode(why) == core::UnitEndReason::RunMovedOn ||
                             why.find("stale") != std::string::npos,
                         ("unit " + r.unit.id + ": " + core::toString(r.unit.state) + " (" + why +
                          ")\n" + tail(w.log))
                             .c_str());
            }
        }
        QVERIFY2(accepted >= kUnits, std::to_string(accepted).c_str());

        // In the database: each accepted result once, with one receipt, in rounds that count
        // them, and the version moved on.
        auto db = coord::openStateStore(agg.stateDir, *url);
        QVERIFY2(db.ok(), db.ok() ? "" : db.error().message.c_str());
        auto q = db->prepare(
            "SELECT (SELECT COUNT(*) FROM results), (SELECT COUNT(DISTINCT work_unit_id) FROM "
            "results), (SELECT COUNT(*) FROM receipts), (SELECT version FROM runs), (SELECT "
            "COUNT(*) FROM rounds d WHERE d.contributors != (SELECT COUNT(*) FROM results s WHERE "
            "s.round = d.round))");
        QVERIFY(q.ok() && q->step());
        QCOMPARE(q->integer(0), int64_t{accepted});
        QCOMPARE(q->integer(1), int64_t{accepted});
        QCOMPARE(q->integer(2), int64_t{accepted});
        QVERIFY2(q->integer(3) >= 1, std::to_string(q->integer(3)).c_str());
        QCOMPARE(q->integer(4), int64_t{0});
    }
};

QTEST_GUILESS_MAIN(TestE2eFrontEnds)
#include "test_e2e_front_ends.moc"
