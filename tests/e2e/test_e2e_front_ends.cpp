// Front ends with real workers (issue 16, item 2, K = 1; label postgres): the aggregating
// tandem-coordinator and two `--role front` ones on one PostgreSQL database of the test's own
// cluster (tests/tools/with_postgres), all three with the self-signed TLS identity of the first
// (tls/ copied, so the workers' pin holds for each), and real tandem-workers.
//
// workersJoinThroughFrontEnds: one worker joined through each front end. The workers register,
// take work and report progress at their front end, and fetch the weights from and upload their
// results to the aggregating process, whose address the signed manifests name (the pin is trusted
// there too: net/coordinator_client.cpp).
//
// workersJoinThroughNginx: the operator's deployment (docs/operations.md, "Front ends"): the real
// nginx with installer/nginx/tandem-front-ends.conf in front of the three, the front ends'
// --upload-base its one URL, and two workers joined there. Both front ends serve, the uploads
// reach the aggregating process, and after a kill -9 of one front end mid-run the workers go on
// through the other without a request failing (nginx tries the other for the safe requests).
//
// workersTrainOnAShardedRun: three aggregation shards (issue 16, items 2 to 4), two front ends
// and three workers that upload each result in three pieces, one to each shard.
//
// In all, every unit a worker trained is settled (accepted, or refused as too stale), the
// rounds close, and the database holds each accepted result once.
#include "e2e_harness.hpp"

#include "../tools/postgres_cluster.hpp"
#include "file_io.hpp"
#include "http_client.hpp"
#include "nginx_process.hpp"
#include "state_store.hpp"
#include "unit_end.hpp"

#include <regex>

using namespace tandem;
using namespace tandem::e2e;

namespace {

// The aggregating process of a fresh run of `tiny` on the database `url`.
bool startAggregator(Coordinator& agg, const fs::path& dir, const std::string& url) {
    fs::create_directories(dir / "aggregator");
    std::vector<std::string> args = {
        "--db",      url, "--model",         "tiny", "--inner-steps",        "8", "--batch", "2",
        "--threads", "1", "--round-timeout", "120",  "--replicate-fraction", "0", "--corpus"};
    for (const auto& c : corpusArgs(dir))
        args.push_back(c);
    return agg.start(dir / "aggregator", args);
}

// Front end `n` with copies of the aggregating process's key, TLS identity and data.
bool startFrontEnd(Coordinator& front, const Coordinator& agg, const fs::path& dir, int n,
                   const std::string& url, const std::string& uploadBase) {
    const fs::path home = dir / ("front" + std::to_string(n));
    fs::create_directories(home / "coordinator");
    for (const char* part : {"coordinator_key.pem", "tls", "data"})
        fs::copy(agg.stateDir / part, home / "coordinator" / part, fs::copy_options::recursive);
    return front.start(home, {"--role", "front", "--db", url, "--upload-base", uploadBase,
                              "--threads", "1"}) &&
           front.pin == agg.pin;
}

// The results the aggregating process has committed (0 when the database cannot be read).
int64_t resultCount(const Coordinator& agg, const std::string& url) {
    auto db = coord::openStateStore(agg.stateDir, url);
    if (!db.ok())
        return 0;
    auto q = db->prepare("SELECT COUNT(*) FROM results");
    return q.ok() && q->step() ? q->integer(0) : 0;
}

// Every unit each worker trained is settled: accepted, or refused as too stale (a unit two
// versions behind: the protocol's rule, as in test_e2e_run). Returns the accepted ones.
int checkSettled(Worker* workers, int count, int units) {
    int accepted = 0;
    for (int i = 0; i < count; ++i) {
        Worker& w = workers[i];
        auto ledger = core::Ledger::open(w.dataDir / "ledger.db");
        if (!ledger) {
            QTest::qFail("a worker's ledger cannot be opened", __FILE__, __LINE__);
            return -1;
        }
        auto rows = (*ledger)->workUnits(100);
        if (!rows || static_cast<int>(rows->size()) != units) {
            QTest::qFail(("a worker holds " + std::to_string(rows ? rows->size() : 0) +
                          " units, not " + std::to_string(units) + "\n" + tail(w.log))
                             .c_str(),
                         __FILE__, __LINE__);
            return -1;
        }
        for (const auto& r : *rows) {
            if (r.unit.state == core::WorkUnitState::Accepted) {
                ++accepted;
                continue;
            }
            auto tr = (*ledger)->transitions(r.unit.id);
            const std::string why = tr && !tr->empty() ? tr->back().detail : "";
            if (core::unitEndReasonFromCode(why) != core::UnitEndReason::RunMovedOn &&
                why.find("stale") == std::string::npos) {
                QTest::qFail(("unit " + r.unit.id + ": " + core::toString(r.unit.state) + " (" +
                              why + ")\n" + tail(w.log))
                                 .c_str(),
                             __FILE__, __LINE__);
                return -1;
            }
        }
    }
    return accepted;
}

// In the database: each accepted result once, with one receipt, in rounds that count them, and
// the version moved on.
void checkDatabase(const Coordinator& agg, const std::string& url, int accepted) {
    auto db = coord::openStateStore(agg.stateDir, url);
    QVERIFY2(db.ok(), db.ok() ? "" : db.error().message.c_str());
    auto q = db->prepare(testing::kResultCountsSql);
    QVERIFY(q.ok() && q->step());
    QCOMPARE(q->integer(0), int64_t{accepted});
    QCOMPARE(q->integer(1), int64_t{accepted});
    QCOMPARE(q->integer(2), int64_t{accepted});
    QVERIFY2(q->integer(3) >= 1, std::to_string(q->integer(3)).c_str());
    QCOMPARE(q->integer(4), int64_t{0});
}

// One line of tests/tools/nginx_process's access log: the request, nginx's status, and each
// upstream tried with its answer (the last one is what the client got).
struct AccessLine {
    std::string method, path;
    int status = 0;
    std::vector<std::string> upstreams, upstreamStatuses;
};

std::vector<std::string> splitList(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');) {
        const auto b = item.find_first_not_of(' ');
        if (b != std::string::npos)
            out.push_back(item.substr(b));
    }
    return out;
}

std::vector<AccessLine> parseAccessLog(const std::string& text) {
    // (No raw string: moc reads this file and loses its way in one.)
    static const std::regex line(
        "\"(\\S+) (\\S+) [^\"]*\" status=(\\d+) upstream=\"([^\"]*)\" "
        "upstream_status=\"([^\"]*)\"");
    std::vector<AccessLine> out;
    std::stringstream in(text);
    for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (!std::regex_search(l, m, line))
            continue;
        out.push_back({m[1], m[2], std::stoi(m[3]), splitList(m[4]), splitList(m[5])});
    }
    return out;
}

std::string lastOf(const std::vector<std::string>& v) {
    return v.empty() ? std::string() : v.back();
}

}  // namespace

class TestE2eFrontEnds : public QObject {
    Q_OBJECT

  private slots:
    void init() {
        if (!testing::postgresUrl())
            QSKIP(
                "no PostgreSQL cluster: run through tests/tools/with_postgres (ctest -L "
                "postgres)");
    }

    void workersJoinThroughFrontEnds() {
        auto url = testing::freshPostgresDatabase("e2e_front_ends");
        QVERIFY2(url.ok(), url.ok() ? "" : url.error().message.c_str());
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();

        Coordinator agg;
        QVERIFY2(startAggregator(agg, dir, *url), tail(agg.log).c_str());
        Coordinator front[2];
        for (int i = 0; i < 2; ++i)
            QVERIFY2(startFrontEnd(front[i], agg, dir, i + 1, *url, agg.url()),
                     tail(front[i].log).c_str());

        constexpr int kUnits = 3;
        Worker workers[2];
        for (int i = 0; i < 2; ++i)
            workers[i].start(front[i], dir, "worker" + std::to_string(i + 1),
                             {"--max-work-units", std::to_string(kUnits)});
        for (Worker& w : workers) {
            QVERIFY2(w.wait(300000), tail(w.log).c_str());
            QVERIFY2(w.process.exitCode() == 0, tail(w.log).c_str());
        }
        const int accepted = checkSettled(workers, 2, kUnits);
        QVERIFY2(accepted >= kUnits, std::to_string(accepted).c_str());
        checkDatabase(agg, *url, accepted);
    }

    // A sharded run (issue 16, items 2 to 4): three shards, the first of which creates the run,
    // the others with its key, TLS identity and data, and two front ends; three real workers
    // (one through each front end, one at shard 0) upload each result in three pieces, one to
    // each shard, in parallel.
    void workersTrainOnAShardedRun() {
        auto url = testing::freshPostgresDatabase("e2e_shards");
        QVERIFY2(url.ok(), url.ok() ? "" : url.error().message.c_str());
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        constexpr int kShards = 3;
        Coordinator shard[kShards];
        for (int k = 0; k < kShards; ++k) {
            const int port = testing::freeLoopbackPort();
            const fs::path home = dir / ("shard" + std::to_string(k));
            std::vector<std::string> args = {"--db",
                                             *url,
                                             "--threads",
                                             "1",
                                             "--aggregation-shard",
                                             std::to_string(k),
                                             "--public-url",
                                             "https://127.0.0.1:" + std::to_string(port)};
            if (k == 0) {
                for (const char* a :
                     {"--aggregation-shards", "3", "--model", "tiny", "--inner-steps", "8",
                      "--batch", "2", "--round-timeout", "120", "--corpus"})
                    args.push_back(a);
                for (const auto& c : corpusArgs(dir))
                    args.push_back(c);
            } else {
                fs::create_directories(home / "coordinator");
                for (const char* part : {"coordinator_key.pem", "tls", "data"})
                    fs::copy(shard[0].stateDir / part, home / "coordinator" / part,
                             fs::copy_options::recursive);
            }
            fs::create_directories(home);
            QVERIFY2(shard[k].start(home, args, port), tail(shard[k].log).c_str());
            QCOMPARE(shard[k].pin, shard[0].pin);
        }
        // Two front ends beside them; a worker joins through each, a third at shard 0.
        Coordinator front[2];
        for (int i = 0; i < 2; ++i)
            QVERIFY2(startFrontEnd(front[i], shard[0], dir, i + 1, *url, shard[0].url()),
                     tail(front[i].log).c_str());
        constexpr int kUnits = 3;
        Worker workers[3];
        for (int i = 0; i < 3; ++i)
            workers[i].start(i < 2 ? front[i] : shard[0], dir, "worker" + std::to_string(i + 1),
                             {"--max-work-units", std::to_string(kUnits)});
        for (Worker& w : workers) {
            QVERIFY2(w.wait(300000), tail(w.log).c_str());
            QVERIFY2(w.process.exitCode() == 0, tail(w.log).c_str());
        }
        const int accepted = checkSettled(workers, 3, kUnits);
        QVERIFY2(accepted >= kUnits, std::to_string(accepted).c_str());
        checkDatabase(shard[0], *url, accepted);
        // Every accepted result arrived in three pieces, one at each shard.
        auto db = coord::openStateStore(shard[0].stateDir, *url);
        QVERIFY(db.ok());
        auto q = db->prepare(
            "SELECT COUNT(*), COUNT(DISTINCT shard), (SELECT COUNT(*) FROM round_parts) FROM "
            "result_pieces");
        QVERIFY(q.ok() && q->step());
        QCOMPARE(q->integer(0), int64_t{accepted * kShards});
        QCOMPARE(q->integer(1), int64_t{kShards});
        QVERIFY(q->integer(2) >= kShards);
    }

    void workersJoinThroughNginx() {
        const auto nginx = testing::findNginx();
        if (!nginx)
            QSKIP(
                "nginx is not installed (Debian: apt-get install nginx-light, as scripts/setup "
                "does): the load balancer's test needs the real server");
        auto url = testing::freshPostgresDatabase("e2e_front_ends_nginx");
        QVERIFY2(url.ok(), url.ok() ? "" : url.error().message.c_str());
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();

        Coordinator agg;
        QVERIFY2(startAggregator(agg, dir, *url), tail(agg.log).c_str());
        // The front ends' manifests send uploads and weight downloads to nginx's one URL.
        const int port = testing::freeLoopbackPort();
        const std::string publicUrl = "https://127.0.0.1:" + std::to_string(port);
        Coordinator front[2];
        for (int i = 0; i < 2; ++i)
            QVERIFY2(startFrontEnd(front[i], agg, dir, i + 1, *url, publicUrl),
                     tail(front[i].log).c_str());

        // The shipped file, rendered as an operator would, with the run's self-signed identity.
        auto shipped = readFile(fs::path(TANDEM_SOURCE_DIR) / "installer" / "nginx" /
                                "tandem-front-ends.conf");
        QVERIFY(shipped.ok());
        const std::string tls = (agg.stateDir / "tls").string();
        const auto local = [](const Coordinator& c) {
            return "127.0.0.1:" + std::to_string(c.port);
        };
        auto block = testing::fillPlaceholders(std::string(shipped->begin(), shipped->end()),
                                               {{"LISTEN", "127.0.0.1:" + std::to_string(port)},
                                                {"TLS_CERT", tls + "/cert.pem"},
                                                {"TLS_KEY", tls + "/key.pem"},
                                                {"FRONT_END_1", local(front[0])},
                                                {"FRONT_END_2", local(front[1])},
                                                {"AGGREGATOR", local(agg)},
                                                {"UPSTREAM_NAME", "localhost"},
                                                {"UPSTREAM_CA", tls + "/cert.pem"},
                                                {"REGISTER_RATE", "60r/m"},
                                                {"REGISTER_BURST", "10"}});
        QVERIFY2(block.ok(), block.ok() ? "" : block.error().message.c_str());
        testing::NginxProcess lb(*nginx, dir / "nginx", *block, port);
        const Status started = lb.start();
        QVERIFY2(started.ok(), started.ok() ? "" : started.error().message.c_str());

        constexpr int kUnits = 8;
        Worker workers[2];
        for (int i = 0; i < 2; ++i)
            workers[i].start(publicUrl, agg.pin, dir, "worker" + std::to_string(i + 1),
                             {"--max-work-units", std::to_string(kUnits)});

        // kill -9 of the first front end once a few results are in, the rest of the run to go.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
        int64_t resultsAtKill = 0;
        while ((resultsAtKill = resultCount(agg, *url)) < 3 &&
               std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        QVERIFY2(resultsAtKill >= 3, (tail(workers[0].log) + tail(lb.errorLog())).c_str());
        const size_t logAtKill = lb.accessLog().size();
        front[0].process.kill();
        QVERIFY(front[0].process.waitForFinished(10000));

        for (Worker& w : workers) {
            QVERIFY2(w.wait(300000), tail(w.log).c_str());
            QVERIFY2(w.process.exitCode() == 0, tail(w.log).c_str());
        }
        const int accepted = checkSettled(workers, 2, kUnits);
        QVERIFY2(accepted >= kUnits, std::to_string(accepted).c_str());
        QVERIFY2(accepted > resultsAtKill, "no result was accepted after the kill");
        checkDatabase(agg, *url, accepted);
        if (QTest::currentTestFailed())
            return;

        // Registrations are limited per client address by nginx (the processes see only nginx's):
        // 10 at once, then 1 a second; the refusal in the coordinator's shape, with Retry-After.
        net::HttpClientConfig config;
        config.baseUrl = publicUrl;
        config.pinnedPublicKey = agg.pin;
        config.proxy = "direct";
        auto http = net::HttpClient::create(config);
        QVERIFY(http.ok());
        int refused = 0;
        for (int i = 0; i < 15 && refused == 0; ++i) {
            auto answer =
                (*http)->requestJson("POST", "/v1/clients", "{}", {}, net::RetryPolicy::none());
            QVERIFY(!answer.ok());  // 400 from a front end, or nginx's 429
            if (answer.error().httpStatus != 429)
                continue;
            ++refused;
            QCOMPARE(answer.error().apiCode, std::string("too_many_registrations"));
            QVERIFY(answer.error().retryAfter == std::chrono::milliseconds(60000));
        }
        QCOMPARE(refused, 1);

        // nginx's access log: which process answered what.
        const std::string text = lb.accessLog();
        const auto lines = parseAccessLog(text);
        const auto after = parseAccessLog(text.substr(logAtKill));
        QVERIFY2(!lines.empty(), text.c_str());
        const auto served = [](const std::vector<AccessLine>& ls, const std::string& upstream,
                               const std::string& pathPrefix, const std::string& method) {
            int n = 0;
            for (const auto& l : ls)
                n += l.method == method && l.path.rfind(pathPrefix, 0) == 0 && l.status == 200 &&
                     lastOf(l.upstreams) == upstream;
            return n;
        };
        // Both front ends answered requests; after the kill the second gave the work.
        for (const Coordinator& f : front)
            QVERIFY2(served(lines, local(f), "/", "POST") > 0, text.c_str());
        QVERIFY2(served(after, local(front[1]), "/v1/work", "POST") > 0, text.c_str());
        // Every accepted upload went to the aggregating process, and the weights came from it.
        QVERIFY2(served(lines, local(agg), "/v1/results/", "PUT") >= accepted, text.c_str());
        QVERIFY2(served(lines, local(agg), "/blobs/", "GET") > 0, text.c_str());
        // No worker saw nginx fail to reach a process: a request that met the dead front end was
        // answered by the other (its upstreams list both).
        for (const auto& l : lines) {
            const std::string last = lastOf(l.upstreamStatuses);
            QVERIFY2(last != "502" && last != "504" && l.status != 502 && l.status != 504,
                     (l.method + " " + l.path + " status " + std::to_string(l.status) + "\n" + text)
                         .c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestE2eFrontEnds)
#include "test_e2e_front_ends.moc"
