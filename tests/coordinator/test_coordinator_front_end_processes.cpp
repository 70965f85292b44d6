// Front ends as real processes (issue 16, item 2, K = 1): a PostgreSQL cluster of the test's own
// (tests/tools/with_postgres), the aggregating tandem-coordinator and two `--role front` ones on
// 127.0.0.1, each front end's state directory holding only copies of the run's key, TLS identity
// and data. Clients register, take work and send heartbeats at the front ends and upload where
// the manifest says; an upload sent to a front end is refused (421, naming where it goes). A
// front end killed with SIGKILL mid-round and started again on its port serves its workers on;
// the aggregating process killed with SIGKILL leaves the front ends answering work requests and
// status, and started again it resumes the run from the database and its state directory. At
// the end every accepted result is in the database once and each round's count matches them.
//
// Dimensions: P parameters.
#include "../tools/postgres_cluster.hpp"
#include "coordinator_processes.hpp"
#include "crypto.hpp"
#include "protocol.hpp"
#include "result_format.hpp"
#include "state_store.hpp"

#include <httplib.h>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

// The body and signature a worker uploads for m: a small delta in one direction, of size
// 2^(scale - 11) per value (scale 1 to 4), so that no two scales upload the same payload.
std::pair<std::vector<uint8_t>, std::string> resultFor(const net::Manifest& m, int64_t P,
                                                       const Client& c, int scale) {
    net::ResultHeader h;
    h.workUnitId = m.workUnitId;
    h.tokens = 32;
    h.steps = m.innerSteps;
    std::vector<uint16_t> payload(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i)  // fp16 of 2^(scale - 11) x (1 - i % 3)
        payload[static_cast<size_t>(i)] =
            i % 3 == 1
                ? 0
                : static_cast<uint16_t>((i % 3 == 0 ? 0x8000 : 0) | (0x1000 + (scale << 10)));
    auto body = net::buildResult(h, payload);
    h = net::parseResultHeader(body).value();
    return {body, net::toBase64(c.key.sign(net::resultDigest(h)))};
}

}  // namespace

class TestCoordinatorFrontEndProcesses : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    Process m_agg, m_front1, m_front2;
    std::string m_url;

    std::unique_ptr<httplib::SSLClient> to(const Process& p) { return p.connect(m_agg.stateDir); }
    bool registerAt(const Process& p, Client& c, const std::string& name) {
        return registerOver(*to(p), c, name);
    }
    httplib::Result workAt(const Process& p, const Client& c) {
        return to(p)->Post("/v1/work", c.auth(),
                           net::WorkRequest{"cpu", 1 << 30, 0, 1 << 30}.toJson(),
                           "application/json");
    }
    // PUT to a process (the path of an absolute upload URL).
    httplib::Result uploadTo(const Process& p, const std::string& path, const Client& c,
                             const std::pair<std::vector<uint8_t>, std::string>& result) {
        auto headers = c.auth();
        headers.emplace("X-Tandem-Signature", result.second);
        return to(p)->Put(path.c_str(), headers, reinterpret_cast<const char*>(result.first.data()),
                          result.first.size(), "application/octet-stream");
    }
    int64_t versionAt(const Process& p) { return statusVersion(*to(p)); }

  private slots:
    void initTestCase() {
        if (!postgresUrl())
            QSKIP(
                "no PostgreSQL cluster: run through tests/tools/with_postgres (ctest -L "
                "postgres)");
        std::signal(SIGPIPE, SIG_IGN);
        auto url = freshPostgresDatabase("front_end_processes");
        QVERIFY2(url.ok(), url.ok() ? "" : url.error().message.c_str());
        m_url = *url;
    }

    void cleanupTestCase() {
        for (Process* p : {&m_front1, &m_front2, &m_agg})
            if (p->proc.state() != QProcess::NotRunning) {
                p->proc.terminate();
                p->proc.waitForFinished(10000);
            }
    }

    void aggregatorAndTwoFrontEnds() {
        const QString corpus = m_dir.path() + "/corpus.txt";
        {
            std::ofstream out(corpus.toStdString());
            for (int i = 0; i < 20000; ++i)
                out << (i % 3 ? "alpha beta " : "gamma delta\n");
        }
        m_agg.stateDir = m_dir.path() + "/aggregator";
        m_agg.args = {"--result-encoding",
                      "fp16",  // the results below are fp16
                      "--corpus",
                      corpus,
                      "--db",
                      QString::fromStdString(m_url),
                      "--model",
                      "L=1,NH=2,C=16,T=16",
                      "--inner-steps",
                      "4",
                      "--batch",
                      "2",
                      "--quorum",
                      "2",
                      "--threads",
                      "1",
                      "--http-threads",
                      "4",
                      "--max-relative-norm",
                      "0",
                      "--replicate-fraction",
                      "0"};
        QVERIFY(m_agg.start());
        const QString base = "https://127.0.0.1:" + QString::number(m_agg.port);
        for (Process* f : {&m_front1, &m_front2}) {
            f->stateDir = m_dir.path() + (f == &m_front1 ? "/front1" : "/front2");
            fs::create_directories(f->stateDir.toStdString());
            for (const char* part : {"coordinator_key.pem", "tls", "data"})
                fs::copy(m_agg.stateDir.toStdString() + "/" + part,
                         f->stateDir.toStdString() + "/" + part, fs::copy_options::recursive);
            f->args = {"--role",        "front", "--db",           QString::fromStdString(m_url),
                       "--upload-base", base,    "--http-threads", "4"};
            QVERIFY(f->start());
        }
        QVERIFY(!fs::exists(m_front1.stateDir.toStdString() + "/weights/v0.ckpt"));

        Client a, b;
        QVERIFY(registerAt(m_front1, a, "a"));
        QVERIFY(registerAt(m_front2, b, "b"));
        auto ra = workAt(m_front1, a), rb = workAt(m_front2, b);
        QVERIFY(ra && ra->status == 200 && rb && rb->status == 200);
        const auto ma = net::Manifest::fromJson(ra->body).value();
        const auto mb = net::Manifest::fromJson(rb->body).value();
        const std::string uploadPrefix = base.toStdString() + "/v1/results/";
        QCOMPARE(ma.uploadUrl, uploadPrefix + std::to_string(ma.workUnitId));
        const int64_t P = ma.model.parameterCount();
        const auto resultA = resultFor(ma, P, a, 1), resultB = resultFor(mb, P, b, 2);
        const std::string pathA = ma.uploadUrl.substr(base.size());
        const std::string pathB = mb.uploadUrl.substr(base.size());

        // Sent to a front end: refused, naming where it goes.
        auto misdirected = uploadTo(m_front1, pathA, a, resultA);
        QVERIFY(misdirected);
        QCOMPARE(misdirected->status, 421);
        QCOMPARE(errorCode(misdirected->body), std::string("not_on_front_end"));
        QVERIFY2(misdirected->body.find(ma.uploadUrl) != std::string::npos,
                 misdirected->body.c_str());
        // A heartbeat at the other front end for this unit.
        auto beat = to(m_front2)->Post(
            ("/v1/work/" + std::to_string(ma.workUnitId) + "/progress").c_str(), a.auth(),
            net::ProgressReport{1, 5.0f, 10}.toJson(), "application/json");
        QVERIFY(beat && beat->status == 200);
        auto acceptedA = uploadTo(m_agg, pathA, a, resultA);
        QVERIFY2(acceptedA && acceptedA->status == 200, acceptedA ? acceptedA->body.c_str() : "");

        // Front end 2 killed mid-round (1 of 2 results in) and started again on its port: b's
        // heartbeat there is answered, and its upload closes the round.
        const int front2Port = m_front2.port;
        m_front2.kill9();
        QVERIFY(m_front2.start(front2Port));
        QCOMPARE(m_front2.port, front2Port);
        auto beatB = to(m_front2)->Post(
            ("/v1/work/" + std::to_string(mb.workUnitId) + "/progress").c_str(), b.auth(),
            net::ProgressReport{2, 5.0f, 10}.toJson(), "application/json");
        QVERIFY(beatB && beatB->status == 200);
        auto acceptedB = uploadTo(m_agg, pathB, b, resultB);
        QVERIFY2(acceptedB && acceptedB->status == 200, acceptedB ? acceptedB->body.c_str() : "");
        // A retry (its answer lost, say) gets the same receipt and counts nothing.
        auto retriedB = uploadTo(m_agg, pathB, b, resultB);
        QVERIFY(retriedB && retriedB->status == 200);
        QCOMPARE(retriedB->body, acceptedB->body);
        QVERIFY(QTest::qWaitFor([&] { return versionAt(m_front1) == 1; }, 30000));

        // The aggregating process killed: the front ends still give work and status.
        const int aggPort = m_agg.port;
        m_agg.kill9();
        auto during = workAt(m_front1, a);
        QVERIFY2(during && during->status == 200, during ? during->body.c_str() : "no answer");
        const auto next = net::Manifest::fromJson(during->body).value();
        QCOMPARE(next.baseVersion, int64_t{1});
        // (each front end follows the database at its own 1 s tick)
        QVERIFY(QTest::qWaitFor([&] { return versionAt(m_front2) == 1; }, 30000));
        // Started again on its port, it resumes the run and takes the result.
        QVERIFY(m_agg.start(aggPort));
        QCOMPARE(versionAt(m_agg), int64_t{1});
        auto acceptedNext =
            uploadTo(m_agg, next.uploadUrl.substr(base.size()), a, resultFor(next, P, a, 3));
        QVERIFY2(acceptedNext && acceptedNext->status == 200,
                 acceptedNext ? acceptedNext->body.c_str() : "");

        // Each result once; the rounds' counts are their results'.
        auto db = coord::openStateStore(m_agg.stateDir.toStdString(), m_url);
        QVERIFY2(db.ok(), db.ok() ? "" : db.error().message.c_str());
        auto q = db->prepare(testing::kResultCountsSql);
        QVERIFY(q.ok() && q->step());
        QCOMPARE(q->integer(0), int64_t{3});
        QCOMPARE(q->integer(1), int64_t{3});
        QCOMPARE(q->integer(2), int64_t{3});
        QCOMPARE(q->integer(3), int64_t{1});
        QCOMPARE(q->integer(4), int64_t{0});
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorFrontEndProcesses)
#include "test_coordinator_front_end_processes.moc"
