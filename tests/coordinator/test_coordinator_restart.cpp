// Crash consistency: a real tandem-coordinator process is killed with SIGKILL at random moments
// while clients request work and upload results, then restarted on the same state directory,
// repeatedly. After every restart the committed state must hold: every receipt a client got is
// in the database, no result counts twice, round totals match their results. At the end the
// published weights must equal an independent replay (float, DESIGN.md §3) of the accepted
// results from the initial weights. The same with --weight-deltas int8: the replay quantizes each
// step with error feedback (kernels/weight_delta.hpp), and the residual file must match too.
//
// Dimensions: P parameters.
#include "checkpoint.hpp"
#include "crypto.hpp"
#include "protocol.hpp"
#include "random.hpp"
#include "result_format.hpp"
#include "weight_delta.hpp"

#include <httplib.h>
#include <sqlite3.h>

#include <QDir>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <map>
#include <thread>

using namespace tandem;

namespace {

double decodeHalf(uint16_t h) {
    const int sign = (h >> 15) & 1, exponent = (h >> 10) & 31, mantissa = h & 1023;
    double v =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    return sign ? -v : v;
}

// The delta a work unit uploads, a function of its seed and data only (so the oracle can rebuild
// it, and a unit and its twin upload the same one).
std::vector<uint16_t> deltaFor(const net::Manifest& m, int64_t P) {
    Rng rng(m.seed * 7919 + static_cast<uint64_t>(m.dataOffset) + 1);
    std::vector<uint16_t> d(static_cast<size_t>(P));
    for (auto& h : d)
        h = static_cast<uint16_t>((rng.below(2) << 15) | (rng.below(12) << 10) | rng.below(1024));
    return d;
}
int64_t tokensFor(int64_t wu) {
    return 32 * (1 + wu % 4);
}

struct Client {
    net::SigningKey key = net::SigningKey::generate().value();
    int64_t id = 0;
    std::string token;
    std::vector<net::Manifest> held;
};

class Sql {
  public:
    explicit Sql(const std::string& path) {
        sqlite3_open_v2(path.c_str(), &m_db, SQLITE_OPEN_READONLY, nullptr);
        sqlite3_busy_timeout(m_db, 5000);
    }
    ~Sql() { sqlite3_close(m_db); }
    // Rows of integers/reals/text as strings.
    std::vector<std::vector<std::string>> query(const std::string& sql) {
        std::vector<std::vector<std::string>> rows;
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(m_db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
            return rows;
        while (sqlite3_step(st) == SQLITE_ROW) {
            std::vector<std::string> row;
            for (int i = 0; i < sqlite3_column_count(st); ++i) {
                auto* t = sqlite3_column_text(st, i);
                row.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
            }
            rows.push_back(std::move(row));
        }
        sqlite3_finalize(st);
        return rows;
    }
    int64_t integer(const std::string& sql) {
        auto r = query(sql);
        return r.empty() || r[0].empty() || r[0][0].empty() ? 0 : std::stoll(r[0][0]);
    }

  private:
    sqlite3* m_db = nullptr;
};

}  // namespace

class TestCoordinatorRestart : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    QString m_state, m_corpus;
    QStringList m_extraArgs;  // the data row's options
    QProcess m_proc;
    int m_port = 0;

    bool start() {
        m_proc.setProgram(TANDEM_COORDINATOR_BIN);
        m_proc.setArguments(
            QStringList{"--listen", "127.0.0.1:0", "--state-dir", m_state, "--corpus", m_corpus,
                        "--model", "L=1,NH=2,C=16,T=16", "--result-encoding", "fp16",
                        "--inner-steps", "4", "--batch", "2", "--quorum", "2", "--max-staleness",
                        "1", "--threads", "1", "--http-threads", "4",
                        // Random deltas at exact weights: the oracle replays them without the gate.
                        "--min-cosine", "-1", "--clip-norm-ratio", "0", "--max-relative-norm", "0",
                        // Many twins, so that kills land between a held result and its twin's.
                        "--replicate-fraction", "0.3"} +
            m_extraArgs);
        m_proc.setProcessChannelMode(QProcess::SeparateChannels);
        m_proc.start();
        if (!m_proc.waitForStarted(10000))
            return false;
        QByteArray out;
        while (!out.contains("pin ")) {
            if (!m_proc.waitForReadyRead(30000)) {
                qWarning("coordinator did not start: %s",
                         m_proc.readAllStandardError().constData());
                return false;
            }
            out += m_proc.readAllStandardOutput();
        }
        const int at = out.indexOf("listening on port ");
        m_port = out.mid(at + 18, out.indexOf('\n', at) - at - 18).toInt();
        return m_port > 0;
    }

    std::unique_ptr<httplib::SSLClient> connect() {
        auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", m_port);
        c->set_ca_cert_path((m_state + "/tls/cert.pem").toStdString().c_str());
        c->enable_server_certificate_verification(true);
        c->set_connection_timeout(2, 0);
        c->set_read_timeout(5, 0);
        return c;
    }

  private slots:
    void initTestCase() {
        std::signal(SIGPIPE, SIG_IGN);  // writes to a killed server must fail, not kill the test
        m_corpus = m_dir.path() + "/corpus.txt";
        std::ofstream out(m_corpus.toStdString());
        Rng rng(5);
        const char* words[] = {"alpha ", "beta ", "gamma ", "delta\n"};
        for (int i = 0; i < 60000; ++i)
            out << words[rng.below(4)];
    }

    void commandLine() {
        QProcess p;
        p.start(TANDEM_COORDINATOR_BIN, {"--version"});
        QVERIFY(p.waitForFinished(10000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(p.readAllStandardOutput().startsWith("tandem-coordinator "));
        p.start(TANDEM_COORDINATOR_BIN, {"--help"});
        QVERIFY(p.waitForFinished(10000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(p.readAllStandardOutput().contains("--max-staleness"));
        p.start(TANDEM_COORDINATOR_BIN, {"--quorum", "zero"});
        QVERIFY(p.waitForFinished(10000));
        QCOMPARE(p.exitCode(), 2);
        QVERIFY(p.readAllStandardError().contains("--quorum expects an integer"));
        p.start(TANDEM_COORDINATOR_BIN, {"--frobnicate"});
        QVERIFY(p.waitForFinished(10000));
        QCOMPARE(p.exitCode(), 2);
        // No corpus for a new state directory: a clear message, no crash.
        p.start(TANDEM_COORDINATOR_BIN,
                {"--state-dir", m_dir.path() + "/empty", "--listen", "127.0.0.1:0"});
        QVERIFY(p.waitForFinished(10000));
        QCOMPARE(p.exitCode(), 2);
        QVERIFY(p.readAllStandardError().contains("give --corpus"));
    }

    // SIGTERM as soon as the coordinator says it is starting, while it opens its state and
    // makes its certificate: a clean stop, not a death by the signal. (With the signals masked
    // in main and taken by sigwait, such a SIGTERM went to OpenBLAS's thread, started before
    // main() with nothing blocked, and killed the process: exit code 15.)
    void stopsCleanlyWhileStarting() {
        QProcess p;
        p.setReadChannel(QProcess::StandardError);
        p.start(TANDEM_COORDINATOR_BIN,
                {"--listen", "127.0.0.1:0", "--state-dir", m_dir.path() + "/starting", "--corpus",
                 m_corpus, "--model", "L=1,NH=2,C=16,T=16"});
        QVERIFY(p.waitForStarted(10000));
        QByteArray err;
        while (!err.contains(" starting, state in ") && p.state() == QProcess::Running) {
            p.waitForReadyRead(10000);
            err += p.readAllStandardError();
        }
        p.terminate();
        QVERIFY(p.waitForFinished(30000));
        err += p.readAllStandardError();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 0);
        QVERIFY2(err.contains("received SIGTERM, stopping") && err.contains("stopped"),
                 err.constData());
    }

    void killNineRepeatedly_data() {
        QTest::addColumn<QString>("weightDeltas");
        QTest::newRow("plain") << QString("off");
        QTest::newRow("int8 weight deltas") << QString("int8");
    }
    void killNineRepeatedly() {
        QFETCH(QString, weightDeltas);
        m_state = m_dir.path() + "/state-" + weightDeltas;
        m_extraArgs = QStringList{"--weight-deltas", weightDeltas};
        const bool deltas = weightDeltas != "off";
        const int kills = qEnvironmentVariableIntValue("TANDEM_RESTART_KILLS") > 0
                              ? qEnvironmentVariableIntValue("TANDEM_RESTART_KILLS")
                              : 6;
        QVERIFY(start());
        // The initial weights, for the replay at the end.
        auto initial = loadCheckpoint((m_state + "/weights/v0.ckpt").toStdString());
        QVERIFY(initial.ok());
        const int64_t P = static_cast<int64_t>(initial->parameters.size());

        std::vector<Client> clients(3);
        for (size_t i = 0; i < clients.size(); ++i) {
            auto http = connect();
            auto res = http->Post(
                "/v1/clients",
                net::RegisterRequest{"c" + std::to_string(i), clients[i].key.publicKey(), "t"}
                    .toJson(),
                "application/json");
            QVERIFY(res && res->status == 200);
            auto r = net::RegisterResponse::fromJson(res->body).value();
            clients[i].id = r.clientId;
            clients[i].token = r.token;
        }
        std::map<int64_t, std::string> receipts;  // work unit -> receipt JSON as received
        Rng rng(12345);
        int uploads = 0, held = 0;
        std::map<int64_t, net::Manifest> manifests;  // every unit handed out, for the replay

        for (int cycle = 0; cycle <= kills; ++cycle) {
            const bool last = cycle == kills;
            std::atomic<bool> dead{false};
            std::thread killer;
            if (!last) {
                const auto delayMs = 20 + rng.below(400);
                const qint64 pid = m_proc.processId();
                killer = std::thread([pid, delayMs, &dead] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
                    ::kill(static_cast<pid_t>(pid), SIGKILL);
                    dead = true;
                });
            }
            // Work until the process is gone (or, in the last cycle, for a number of steps).
            for (int step = 0; last ? step < 12 : !dead; ++step) {
                bool failed = false;
                for (auto& c : clients) {
                    auto http = connect();
                    httplib::Headers auth{{"Authorization", "Bearer " + c.token}};
                    if (c.held.size() < 2) {
                        auto res = http->Post("/v1/work", auth,
                                              net::WorkRequest{"cpu", 1 << 30, 0, 1 << 30}.toJson(),
                                              "application/json");
                        if (!res) {
                            failed = true;
                            break;
                        }
                        if (res->status == 200) {
                            c.held.push_back(net::Manifest::fromJson(res->body).value());
                            manifests[c.held.back().workUnitId] = c.held.back();
                        }
                    }
                    if (c.held.empty())
                        continue;
                    const net::Manifest m = c.held.front();
                    net::ResultHeader h;
                    h.workUnitId = m.workUnitId;
                    h.tokens = tokensFor(m.workUnitId);
                    h.steps = m.innerSteps;
                    auto body = net::buildResult(h, deltaFor(m, P));
                    h = net::parseResultHeader(body).value();
                    auth.emplace("X-Tandem-Signature",
                                 net::toBase64(c.key.sign(net::resultDigest(h))));
                    auto res = http->Put(("/v1/results/" + std::to_string(m.workUnitId)).c_str(),
                                         auth, reinterpret_cast<const char*>(body.data()),
                                         body.size(), "application/octet-stream");
                    ++uploads;
                    if (!res) {  // unknown outcome: retried after the restart
                        failed = true;
                        break;
                    }
                    if (res->status == 200) {
                        auto it = receipts.find(m.workUnitId);
                        // A retry of an accepted result returns the very same receipt.
                        if (it != receipts.end())
                            QCOMPARE(res->body, it->second);
                        receipts[m.workUnitId] = res->body;
                        c.held.erase(c.held.begin());
                    } else if (res->status == 503) {
                        // Held until its twin's result arrives: retried after the others.
                        auto e = net::ApiError::fromJson(res->body);
                        QVERIFY2(e.ok() && e->code == "awaiting_replica", res->body.c_str());
                        ++held;
                        c.held.push_back(m);
                        c.held.erase(c.held.begin());
                    } else {
                        auto e = net::ApiError::fromJson(res->body);
                        QVERIFY2(e.ok(), res->body.c_str());
                        QVERIFY2(e->code == "stale" || e->code == "work_unit_abandoned",
                                 res->body.c_str());
                        c.held.erase(c.held.begin());
                    }
                }
                if (failed && last)
                    QFAIL("the coordinator stopped answering");
                if (failed)
                    break;
            }
            if (killer.joinable())
                killer.join();
            if (!last) {
                QVERIFY(m_proc.waitForFinished(10000));
                QCOMPARE(m_proc.exitStatus(), QProcess::CrashExit);
                QVERIFY2(start(), "restart after kill -9 failed");
            }

            // The committed state is consistent after every restart, and no staging file of an
            // upload cut by the kill is left (the clients' requests are over: none is arriving).
            QVERIFY2(QDir(m_state + "/uploads").isEmpty(QDir::AllEntries | QDir::NoDotAndDotDot),
                     qPrintable(QDir(m_state + "/uploads").entryList().join(' ')));
            Sql db((m_state + "/coordinator.db").toStdString());
            for (auto& [wu, json] : receipts) {
                auto rows = db.query("SELECT json FROM receipts WHERE work_unit_id = " +
                                     std::to_string(wu));
                QVERIFY2(rows.size() == 1,
                         qPrintable(QString("receipt of work unit %1 lost").arg(wu)));
                QCOMPARE(rows[0][0], json);
            }
            QCOMPARE(db.integer("SELECT COUNT(*) FROM results"),
                     db.integer("SELECT COUNT(DISTINCT work_unit_id) FROM results"));
            QCOMPARE(db.integer("SELECT COUNT(*) FROM results"),
                     db.integer("SELECT COUNT(*) FROM work_units WHERE state = 'accepted'"));
            QCOMPARE(db.integer("SELECT COALESCE(SUM(tokens), 0) FROM rounds"),
                     db.integer("SELECT COALESCE(SUM(tokens), 0) FROM results"));
            QCOMPARE(
                db.integer("SELECT COUNT(*) FROM rounds r WHERE contributors != (SELECT COUNT(*) "
                           "FROM results s WHERE s.round = r.round)"),
                int64_t(0));
            QCOMPARE(db.integer("SELECT version FROM runs"),
                     db.integer("SELECT COUNT(*) FROM rounds WHERE closed_unix IS NOT NULL"));
            // Twins: an agreed pair is two accepted results; a held result has its file and is
            // not counted anywhere yet.
            QCOMPARE(db.integer("SELECT COUNT(*) FROM replica_checks c WHERE agreed != 1 OR "
                                "(SELECT COUNT(*) FROM results s WHERE s.work_unit_id IN "
                                "(c.first_unit, c.second_unit)) != 2"),
                     int64_t(0));
            QCOMPARE(db.integer("SELECT COUNT(*) FROM held_results h JOIN results s ON "
                                "s.work_unit_id = h.work_unit_id"),
                     int64_t(0));
            for (auto& row : db.query("SELECT work_unit_id FROM held_results"))
                QVERIFY2(
                    QFile::exists(m_state + "/held/" + QString::fromStdString(row[0]) + ".f16"),
                    "a held result lost its payload");
            // Every blob a live unit's manifest names is there, whole (protocol 4).
            for (auto& row :
                 db.query("SELECT manifest_json FROM work_units, runs WHERE state = 'assigned' AND "
                          "base_version >= runs.version - 1")) {
                const auto m = net::Manifest::fromJson(row[0]).value();
                if (m.protocol < 4)
                    continue;
                const auto blob = [&](const std::string& url) {
                    return (m_state + QString::fromStdString(url)).toStdString();
                };
                auto w = net::sha256File(blob(m.weightsUrls[0]));
                QVERIFY2(w.ok() && w->digest == m.weightsSha256, m.weightsUrls[0].c_str());
                QVERIFY2(net::sha256File(blob(m.dataUrls[0])).ok(), m.dataUrls[0].c_str());
                for (const auto& d : m.weightDeltas) {  // protocol 5, --weight-deltas
                    auto h = net::sha256File(blob(d.urls[0]));
                    QVERIFY2(h.ok() && h->digest == d.sha256, d.urls[0].c_str());
                }
            }
        }
        QVERIFY2(receipts.size() >= 4,
                 qPrintable(QString("only %1 results accepted").arg(receipts.size())));

        // The validator thread records the loss of every closed round, also of rounds closed
        // just before a kill (re-queued at start).
        {
            auto http = connect();
            bool allEvaluated = false;
            for (int i = 0; i < 600 && !allEvaluated; ++i) {
                auto res = http->Get("/v1/status");
                QVERIFY(res && res->status == 200);
                auto st = net::RunStatus::fromJson(res->body);
                QVERIFY(st.ok());
                allEvaluated = !st->history.empty();
                for (const auto& h : st->history) {
                    if (!h.valLoss)
                        allEvaluated = false;
                    else
                        QVERIFY(std::isfinite(*h.valLoss) && *h.valLoss > 0);
                }
                if (!allEvaluated)
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
            QVERIFY2(allEvaluated, "validation losses missing from the history");
        }

        // A clean stop on SIGTERM.
        m_proc.terminate();
        QVERIFY(m_proc.waitForFinished(20000));
        QCOMPARE(m_proc.exitStatus(), QProcess::NormalExit);
        QCOMPARE(m_proc.exitCode(), 0);

        // Replay every closed round from the initial weights.
        Sql db((m_state + "/coordinator.db").toStdString());
        const int64_t version = db.integer("SELECT version FROM runs");
        QVERIFY(version >= 1);
        std::vector<float> theta = initial->parameters, vel(size_t(P), 0.0f),
                           residual(size_t(P), 0.0f);
        int twinResults = 0;
        std::vector<std::vector<float>> history;  // weights of every version so far
        const float lr = 0.35f, mu = 0.9f;        // the coordinator's default outer step
        for (int64_t r = 0; r < version; ++r) {
            history.push_back(theta);
            auto rows = db.query(
                "SELECT s.work_unit_id, s.weight, s.tokens, w.base_version, (SELECT COUNT(*) "
                "FROM replica_checks c WHERE s.work_unit_id IN (c.first_unit, c.second_unit)) "
                "FROM results s JOIN work_units w ON w.id = s.work_unit_id WHERE s.round = " +
                std::to_string(r) + " ORDER BY s.seq");
            QVERIFY(!rows.empty());
            std::vector<float> sum(size_t(P), 0.0f);
            double W = 0, lateW = 0;  // lateW: the results trained from version r - 1
            for (auto& row : rows) {
                const int64_t wu = std::stoll(row[0]);
                const double weight = std::stod(row[1]);
                const int64_t staleness = r - std::stoll(row[3]);
                QVERIFY(staleness == 0 || staleness == 1);
                // One of an agreed pair of twins counts at half its weight.
                const double twin = std::stoll(row[4]) > 0 ? 0.5 : 1.0;
                if (twin < 1)
                    ++twinResults;
                QCOMPARE(weight, double(tokensFor(wu)) * std::pow(0.5, double(staleness)) * twin);
                QCOMPARE(std::stoll(row[2]), tokensFor(wu));
                QVERIFY(manifests.count(wu));
                const auto d = deltaFor(manifests.at(wu), P);
                for (int64_t i = 0; i < P; ++i)
                    sum[size_t(i)] =
                        sum[size_t(i)] + float(weight) * float(decodeHalf(d[size_t(i)]));
                W += weight;
                if (staleness == 1)
                    lateW += weight;
            }
            // Late results count from theta, not from the version they were trained on.
            if (lateW > 0)
                for (int64_t i = 0; i < P; ++i)
                    sum[size_t(i)] -=
                        float(lateW) * (history[size_t(r - 1)][size_t(i)] - theta[size_t(i)]);
            const float scale = float(1.0 / W);
            for (int64_t i = 0; i < P; ++i) {
                const float dd = scale * sum[size_t(i)];
                vel[size_t(i)] = mu * vel[size_t(i)] + dd;
                theta[size_t(i)] = theta[size_t(i)] - lr * (dd + mu * vel[size_t(i)]);
            }
            if (deltas)
                QVERIFY(
                    quantizeWithFeedback(history.back(), theta, residual, WeightDeltaCodec::Int8));
        }
        auto published = loadCheckpoint(
            (m_state + "/weights/v" + QString::number(version) + ".ckpt").toStdString());
        QVERIFY(published.ok());
        QVERIFY2(published->parameters == theta, "published weights differ from the replay");
        auto momentum = loadCheckpoint(
            (m_state + "/momentum/v" + QString::number(version) + ".ckpt").toStdString());
        QVERIFY(momentum.ok());
        QVERIFY(momentum->parameters == vel);
        auto stored = loadCheckpoint(
            (m_state + "/residual/v" + QString::number(version) + ".ckpt").toStdString());
        QCOMPARE(stored.ok(), deltas);
        if (deltas)
            QVERIFY2(stored->parameters == residual, "the stored residual differs from the replay");
        qInfo(
            "%d kills, %d uploads, %zu accepted, %lld rounds closed, %d held for a twin, %d "
            "committed as agreeing twins",
            kills, uploads, receipts.size(), static_cast<long long>(version), held, twinResults);
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorRestart)
#include "test_coordinator_restart.moc"
