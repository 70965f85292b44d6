// A sharded run as real processes (issue 16, items 2 to 4): a PostgreSQL cluster of the test's
// own (tests/tools/with_postgres), three tandem-coordinator shards (--aggregation-shards 3, each
// --aggregation-shard k with its --public-url) and a front end on 127.0.0.1, the shards sharing
// the run's key, TLS identity and data. Clients take work at the front end and upload each piece
// where the manifest says, over HTTPS. Mid-round, a shard is killed with SIGKILL, then the round
// clock's holder, then the front end, each started again on its port: every round still closes,
// with every piece counted once, and at the end every shard serves the same weights, the ones
// the database names for the version it committed.
//
// Dimensions: P parameters.
#include "../tools/postgres_cluster.hpp"
#include "coordinator_processes.hpp"
#include "nginx_process.hpp"  // freeLoopbackPort
#include "result_format.hpp"
#include "state_store.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

constexpr int kShards = 3;

// The piece bodies and the signature a worker uploads for m: 2^(scale - 11) x (1 - i % 3) in
// (scale 1 to 6, one per result: the gate refuses a payload it accepted before)
// fp16, cut at the manifest's shards.
std::pair<std::vector<std::vector<uint8_t>>, std::string> piecesFor(const net::Manifest& m,
                                                                    const Client& c, int scale) {
    const int64_t P = m.model.parameterCount();
    net::ResultHeader h;
    h.workUnitId = m.workUnitId;
    h.parameterCount = P;
    h.tokens = 32;
    h.steps = m.innerSteps;
    std::vector<uint16_t> values(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i)
        values[static_cast<size_t>(i)] =
            i % 3 == 1
                ? 0
                : static_cast<uint16_t>((i % 3 == 0 ? 0x8000 : 0) | (0x1000 + (scale << 10)));
    const auto payload =
        std::span(reinterpret_cast<const uint8_t*>(values.data()), 2 * values.size());
    std::vector<net::PieceRange> ranges;
    for (const auto& s : m.shards)
        ranges.push_back(s.range);
    auto built = net::buildPiecedResult(h, payload, ranges).value();
    std::vector<std::vector<uint8_t>> bodies;
    for (size_t k = 0; k < ranges.size(); ++k)
        bodies.push_back(net::pieceBody(built, payload, k));
    return {bodies, net::toBase64(c.key.sign(net::resultDigest(built.header)))};
}

}  // namespace

class TestCoordinatorShardProcesses : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    Process m_shards[kShards];
    Process m_front;
    std::string m_url;

    std::unique_ptr<httplib::SSLClient> to(const Process& p) {
        return p.connect(m_shards[0].stateDir);
    }
    bool registerAt(const Process& p, Client& c, const std::string& name) {
        return registerOver(*to(p), c, name);
    }
    std::optional<net::Manifest> workAt(const Process& p, const Client& c) {
        auto res =
            to(p)->Post("/v1/work", c.auth(), net::WorkRequest{"cpu", 1 << 30, 0, 1 << 30}.toJson(),
                        "application/json");
        if (!res || res->status != 200)
            return std::nullopt;
        auto m = net::Manifest::fromJson(res->body);
        return m ? std::optional(*m) : std::nullopt;
    }
    // Piece k to the shard its URL names; the answer's status (0: none).
    int sendPiece(const net::Manifest& m, const Client& c,
                  const std::pair<std::vector<std::vector<uint8_t>>, std::string>& r, int k) {
        const std::string& url = m.shards[static_cast<size_t>(k)].uploadUrl;
        const int port = std::stoi(url.substr(url.rfind(':') + 1));
        for (const Process& p : m_shards)
            if (p.port == port) {
                auto headers = c.auth();
                headers.emplace("X-Tandem-Signature", r.second);
                const auto& body = r.first[static_cast<size_t>(k)];
                auto res = to(p)->Put(url.substr(url.find('/', 8)).c_str(), headers,
                                      reinterpret_cast<const char*>(body.data()), body.size(),
                                      "application/octet-stream");
                if (res && res->status != 200)
                    qWarning("piece %d: %d %s", k, res->status, res->body.c_str());
                return res ? res->status : 0;
            }
        return -1;
    }
    int64_t versionAt(const Process& p) { return statusVersion(*to(p)); }
    bool allAt(int64_t version) {
        return QTest::qWaitFor(
            [&] {
                for (const Process& p : m_shards)
                    if (versionAt(p) != version)
                        return false;
                return versionAt(m_front) == version;
            },
            60000);
    }
    Process* clockHolder() {
        for (Process& p : m_shards)
            if (p.logged("this process runs the round clock now"))
                return &p;
        return nullptr;
    }

  private slots:
    void initTestCase() {
        if (!postgresUrl())
            QSKIP(
                "no PostgreSQL cluster: run through tests/tools/with_postgres (ctest -L "
                "postgres)");
        std::signal(SIGPIPE, SIG_IGN);
        auto url = freshPostgresDatabase("shard_processes");
        QVERIFY2(url.ok(), url.ok() ? "" : url.error().message.c_str());
        m_url = *url;
    }

    void cleanupTestCase() {
        for (Process* p : {&m_front, &m_shards[0], &m_shards[1], &m_shards[2]})
            if (p->proc.state() != QProcess::NotRunning) {
                p->proc.terminate();
                p->proc.waitForFinished(10000);
            }
    }

    void threeShardsAndAFrontEndSurviveKills() {
        const QString corpus = m_dir.path() + "/corpus.txt";
        {
            std::ofstream out(corpus.toStdString());
            for (int i = 0; i < 20000; ++i)
                out << (i % 3 ? "alpha beta " : "gamma delta\n");
        }
        // What every shard decides alike: the gate and the quorum (any shard may hold the clock).
        const QStringList common = {"--db",
                                    QString::fromStdString(m_url),
                                    "--http-threads",
                                    "4",
                                    "--threads",
                                    "1",
                                    "--quorum",
                                    "2",
                                    "--max-relative-norm",
                                    "0"};
        int ports[kShards];
        for (int k = 0; k < kShards; ++k) {
            Process& s = m_shards[k];
            ports[k] = freeLoopbackPort();
            QVERIFY(ports[k] > 0);
            s.stateDir = m_dir.path() + "/shard" + QString::number(k);
            s.args = common + QStringList{"--aggregation-shard", QString::number(k), "--public-url",
                                          "https://127.0.0.1:" + QString::number(ports[k])};
            if (k == 0) {
                s.args += {"--aggregation-shards",
                           QString::number(kShards),
                           "--corpus",
                           corpus,
                           "--result-encoding",
                           "fp16",
                           "--model",
                           "L=1,NH=2,C=16,T=16",
                           "--inner-steps",
                           "4",
                           "--batch",
                           "2"};
            } else {
                fs::create_directories(s.stateDir.toStdString());
                for (const char* part : {"coordinator_key.pem", "tls", "data"})
                    fs::copy(m_shards[0].stateDir.toStdString() + "/" + part,
                             s.stateDir.toStdString() + "/" + part, fs::copy_options::recursive);
            }
            QVERIFY(s.start(ports[k]));
        }
        QVERIFY(m_shards[1].logged("fetched the weights of version 0 from another shard"));
        m_front.stateDir = m_dir.path() + "/front";
        fs::create_directories(m_front.stateDir.toStdString());
        for (const char* part : {"coordinator_key.pem", "tls", "data"})
            fs::copy(m_shards[0].stateDir.toStdString() + "/" + part,
                     m_front.stateDir.toStdString() + "/" + part, fs::copy_options::recursive);
        m_front.args = common + QStringList{"--role", "front", "--upload-base",
                                            "https://127.0.0.1:" + QString::number(ports[0])};
        QVERIFY(m_front.start());

        Client a, b;
        QVERIFY(registerAt(m_front, a, "a"));
        QVERIFY(registerAt(m_front, b, "b"));
        for (int round = 0; round < 3; ++round) {
            const auto ma = workAt(m_front, a), mb = workAt(m_front, b);
            QVERIFY(ma && mb);
            QCOMPARE(ma->shards.size(), size_t{kShards});
            QCOMPARE(ma->baseVersion, int64_t{round});
            const auto ra = piecesFor(*ma, a, 1 + 2 * round), rb = piecesFor(*mb, b, 2 + 2 * round);
            for (int k = 0; k < kShards; ++k)
                QCOMPARE(sendPiece(*ma, a, ra, k), 200);
            // Mid-round: round 0 loses a shard, round 1 the clock's holder, round 2 the front
            // end; each comes back on its port.
            Process* victim = round == 0 ? &m_shards[1] : round == 1 ? clockHolder() : &m_front;
            QVERIFY2(victim, "no process says it runs the round clock");
            const int port = victim->port;
            victim->kill9();
            QVERIFY(victim->start(port));
            // A retry of one of a's pieces (its answer lost, say) counts nothing.
            QCOMPARE(sendPiece(*ma, a, ra, 1), 200);
            for (int k = 0; k < kShards; ++k)
                QCOMPARE(sendPiece(*mb, b, rb, k), 200);
            QVERIFY2(allAt(round + 1),
                     ("round " + std::to_string(round) + " did not close").c_str());
        }

        auto db = coord::openStateStore(m_shards[0].stateDir.toStdString(), m_url);
        QVERIFY2(db.ok(), db.ok() ? "" : db.error().message.c_str());
        auto q = db->prepare(kResultCountsSql);
        QVERIFY(q.ok() && q->step());
        QCOMPARE(q->integer(0), int64_t{6});
        QCOMPARE(q->integer(1), int64_t{6});
        QCOMPARE(q->integer(2), int64_t{6});
        QCOMPARE(q->integer(3), int64_t{3});
        QCOMPARE(q->integer(4), int64_t{0});
        auto p = db->prepare(
            "SELECT (SELECT COUNT(*) FROM result_pieces), (SELECT COUNT(*) FROM round_parts), "
            "(SELECT weights_sha256 FROM rounds WHERE round = 3)");
        QVERIFY(p.ok() && p->step());
        QCOMPARE(p->integer(0), int64_t{6 * kShards});
        QCOMPARE(p->integer(1), int64_t{3 * kShards});
        const std::string committed = p->text(2);
        // Every shard serves the weights the database names.
        for (const Process& s : m_shards) {
            auto res = to(s)->Get(("/blobs/sha256/" + committed).c_str());
            QVERIFY(res && res->status == 200);
            QCOMPARE(net::toHex(net::sha256(std::span(
                         reinterpret_cast<const uint8_t*>(res->body.data()), res->body.size()))),
                     committed);
        }
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorShardProcesses)
#include "test_coordinator_shard_processes.moc"
