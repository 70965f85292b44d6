// /metrics (coordinator/metrics.hpp): every figure against the events the test caused and
// counted itself, parsed by a reader written here from the text format's rules; promtool's
// strict checker; the plain-HTTP listener that serves nothing else; the real program's
// --metrics-listen; and both listeners refusing a port that is taken.
#include "codec.hpp"
#include "direct.hpp"
#include "metrics.hpp"
#include "metrics_server.hpp"

#include <QProcess>
#include <QStandardPaths>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

using namespace tandem;
using namespace tandem::testing;

namespace {

// The exposition text as "name{labels}" -> value. Fails the test on a line that is neither a
// comment nor a sample, and on a sample whose family has no TYPE line before it.
struct Exposition {
    std::map<std::string, double> samples;
    std::map<std::string, std::string> types;  // family -> counter, gauge, histogram

    static Exposition parse(const std::string& text, bool& ok) {
        Exposition e;
        ok = true;
        static const std::regex typeLine(
            R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram))");
        static const std::regex sampleLine(
            R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-z_]+="[^"\\]*"(,[a-z_]+="[^"\\]*")*\})? (\S+))");
        std::istringstream in(text);
        std::string line;
        while (std::getline(in, line)) {
            std::smatch m;
            if (std::regex_match(line, m, typeLine)) {
                e.types[m[1]] = m[2];
            } else if (line.rfind("# HELP ", 0) == 0) {
            } else if (std::regex_match(line, m, sampleLine)) {
                std::string family = m[1];
                for (const char* suffix : {"_bucket", "_sum", "_count"})
                    if (!e.types.count(family) && family.size() > strlen(suffix) &&
                        family.compare(family.size() - strlen(suffix), std::string::npos, suffix) ==
                            0)
                        family.resize(family.size() - strlen(suffix));
                if (!e.types.count(family)) {
                    qWarning("no TYPE before %s", line.c_str());
                    ok = false;
                }
                e.samples[std::string(m[1]) + std::string(m[2])] = std::stod(m[4]);
            } else {
                qWarning("not a line of the text format: %s", line.c_str());
                ok = false;
            }
        }
        return e;
    }
    double at(const std::string& key) const {
        auto it = samples.find(key);
        return it == samples.end() ? -1 : it->second;
    }
};

}  // namespace

class TestCoordinatorMetrics : public QObject {
    Q_OBJECT

  private slots:
    void countsWhatHappened() {
        auto cfg = directConfig();
        cfg.quorum = 2;
        cfg.maxConcurrentUploads = 3;
        DirectCoordinator f(cfg, 200000, true);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        const int64_t P = c.parameterCount();
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto ma = f.work(a), mb = f.work(b);
        QVERIFY(ma.workUnitId > 0 && mb.workUnitId > 0);
        const auto ra = buildResult(ma, patternDelta(P), a.key),
                   rb = buildResult(mb, patternDelta(P), b.key);
        const int64_t size = c.maxUploadBytes();

        // Two refusals before the body, one of them a dry run.
        QVERIFY(!c.beginUpload(a.id, ma.workUnitId, size, "").ok());
        QVERIFY(!c.beginUpload(a.id, ma.workUnitId, size - 1, ra.signature, true).ok());
        // A refusal in the body: a payload with a NaN (fp16 0x7e00), refused as it arrives.
        auto nan = patternDelta(P);
        nan[0] = 0x7e00;
        const auto bad = buildResult(mb, nan, b.key);
        int64_t uploaded = 0;
        {
            auto s = c.beginUpload(b.id, mb.workUnitId, size, bad.signature);
            QVERIFY(s.ok());
            auto early = s.value()->feed(bad.body);
            uploaded += size;
            QVERIFY(early ? !early->ok() : !s.value()->finish(true).ok());
        }
        // A heartbeat, then both results: the round closes.
        QVERIFY(c.progress(a.id, ma.workUnitId, R"({"step":1,"loss":5.0,"tokens_per_second":10})")
                    .ok());
        QVERIFY(f.upload(a, ra).ok());
        QVERIFY(f.upload(b, rb).ok());
        uploaded += 2 * size;
        QCOMPARE(c.currentVersion(), int64_t{1});
        c.waitForValidation();
        // A unit given back.
        const auto again = f.work(a);
        QVERIFY(c.releaseWork(a.id, again.workUnitId).ok());
        // Over HTTPS: 100 bytes of the weights, a 404.
        auto http = f.t().connect();
        auto api = f.t().registerClient("over-https");
        auto part = http->Get(again.weightsUrl,
                              {{"Authorization", "Bearer " + api.token}, {"Range", "bytes=0-99"}});
        QVERIFY(part && part->status == 206 && part->body.size() == 100);
        auto missing = http->Get("/v1/nothing-here");
        QVERIFY(missing && missing->status == 404);

        const std::string text = c.metricsText();
        bool ok = false;
        const auto e = Exposition::parse(text, ok);
        QVERIFY2(ok, text.c_str());
        QCOMPARE(e.types.at("tandem_results_accepted_total"), std::string("counter"));
        QCOMPARE(e.types.at("tandem_round_close_seconds"), std::string("histogram"));
        QCOMPARE(e.at("tandem_client_registrations_total"), 3.0);
        QCOMPARE(e.at("tandem_work_units_assigned_total"), 3.0);
        QCOMPARE(e.at("tandem_heartbeats_total"), 1.0);
        QCOMPARE(e.at("tandem_results_accepted_total"), 2.0);
        QCOMPARE(e.at("tandem_tokens_accepted_total"),
                 static_cast<double>(ra.header.tokens + rb.header.tokens));
        QCOMPARE(e.at("tandem_upload_bytes_total"), static_cast<double>(uploaded));
        QCOMPARE(e.at(R"(tandem_results_refused_total{reason="bad_signature"})"), 1.0);
        QCOMPARE(e.at(R"(tandem_results_refused_total{reason="wrong_size"})"), 1.0);
        QCOMPARE(e.at(R"(tandem_results_refused_total{reason="non_finite"})"), 1.0);
        QCOMPARE(e.at(R"(tandem_work_units_abandoned_total{reason="released"})"), 1.0);
        QCOMPARE(e.at(R"(tandem_download_bytes_total{kind="weights"})"), 100.0);
        QCOMPARE(e.at(R"(tandem_http_responses_total{code="206"})"), 1.0);
        QVERIFY(e.at(R"(tandem_http_responses_total{code="404"})") >= 1.0);
        QCOMPARE(e.at("tandem_rounds_closed_total"), 1.0);
        QCOMPARE(e.at("tandem_round_close_seconds_count"), 1.0);
        QCOMPARE(e.at(R"(tandem_round_close_seconds_bucket{le="+Inf"})"), 1.0);
        QVERIFY(e.at("tandem_round_close_seconds_sum") >= 0);
        QCOMPARE(e.at("tandem_model_version"), 1.0);
        QCOMPARE(e.at("tandem_model_parameters"), static_cast<double>(P));
        QCOMPARE(e.at("tandem_round_quorum"), 2.0);
        QCOMPARE(e.at("tandem_round_results"), 0.0);
        QCOMPARE(e.at("tandem_work_units_in_progress"), 0.0);
        QCOMPARE(e.at("tandem_upload_slots"), 3.0);
        QCOMPARE(e.at("tandem_upload_slots_in_use"), 0.0);
        const auto history = c.status().history;
        QVERIFY(!history.empty() && history.back().valLoss);
        QCOMPARE(e.at("tandem_validation_loss"), *history.back().valLoss);
        QCOMPARE(e.at("tandem_validation_loss_round"), 0.0);
        QVERIFY(e.at("tandem_database_bytes") > 0);
        QVERIFY(e.at("tandem_state_dir_free_bytes") > 0);
        QVERIFY(e.at("process_resident_memory_bytes") > 1e6);
        // Buckets are cumulative: never decreasing.
        double previous = 0;
        for (double le : coord::Metrics::kCloseBuckets) {
            char key[96];
            std::snprintf(key, sizeof key, "tandem_round_close_seconds_bucket{le=\"%g\"}", le);
            QVERIFY(e.at(key) >= previous);
            previous = e.at(key);
        }
        // Nothing private: no bearer token, no client key, no device name.
        QVERIFY(text.find(api.token) == std::string::npos);
        QVERIFY(text.find(net::toBase64(a.key.publicKey())) == std::string::npos);
        QVERIFY(text.find("over-https") == std::string::npos);

        // The shipped Grafana dashboard asks only for figures that exist.
        std::ifstream dashboardFile(TANDEM_SOURCE_DIR "/docs/monitoring/grafana-dashboard.json");
        const auto dashboard = nlohmann::json::parse(dashboardFile);
        static const std::regex name(R"((tandem|process)_[a-z_]+)");
        int asked = 0;
        for (const auto& panel : dashboard.at("panels"))
            for (const auto& target : panel.at("targets")) {
                const std::string expr = target.at("expr");
                for (auto it = std::sregex_iterator(expr.begin(), expr.end(), name);
                     it != std::sregex_iterator(); ++it, ++asked) {
                    const std::string metric = it->str();
                    const std::string family =
                        std::regex_replace(metric, std::regex("_bucket$"), "");
                    QVERIFY2(e.types.count(family), metric.c_str());
                }
            }
        QVERIFY(asked >= 15);

        // promtool, Prometheus's own strict parser and linter, and the scrape configuration.
        const QString promtool = QStandardPaths::findExecutable("promtool");
        if (promtool.isEmpty())
            QSKIP("promtool is not installed (Debian's prometheus package)");
        QProcess p;
        p.start(promtool, {"check", "metrics"});
        QVERIFY(p.waitForStarted());
        p.write(text.data(), static_cast<qint64>(text.size()));
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(30000));
        const QByteArray said = p.readAllStandardOutput() + p.readAllStandardError();
        QVERIFY2(p.exitCode() == 0 && said.trimmed().isEmpty(), said.constData());
        QProcess config;
        config.start(promtool,
                     {"check", "config", TANDEM_SOURCE_DIR "/docs/monitoring/prometheus.yml"});
        QVERIFY(config.waitForFinished(30000));
        QVERIFY2(config.exitCode() == 0, config.readAllStandardOutput().constData());
    }

    void listenerServesOnlyMetrics() {
        DirectCoordinator f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto m = coord::MetricsServer::start(f.coordinator(), "127.0.0.1", 0, {});
        QVERIFY2(m.ok(), m ? "" : m.error().message.c_str());
        httplib::Client http("127.0.0.1", (*m)->port());
        auto res = http.Get("/metrics");
        QVERIFY(res && res->status == 200);
        QCOMPARE(res->get_header_value("Content-Type"),
                 std::string("text/plain; version=0.0.4; charset=utf-8"));
        QVERIFY(res->body.find("\ntandem_model_version 0\n") != std::string::npos);
        for (const char* path : {"/v1/status", "/", "/metrics/x"}) {
            auto other = http.Get(path);
            QVERIFY(other && other->status == 404);
        }
        auto post = http.Post("/metrics", "x", "text/plain");
        QVERIFY(post && post->status >= 400);
        // The same port cannot be taken twice: a clear error, not a shared port.
        auto second = coord::MetricsServer::start(f.coordinator(), "127.0.0.1", (*m)->port(), {});
        QVERIFY(!second.ok());
        QVERIFY(second.error().message.find("cannot listen for metrics") != std::string::npos);
    }

    // cpp-httplib's SO_REUSEPORT would let a second coordinator share the workers' port.
    void theApiPortIsNotShared() {
        DirectCoordinator f(directConfig(), 200000, true);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        coord::ServerConfig sc;
        sc.port = f.t().port();
        auto second = coord::Server::create(f.coordinator(), sc, f.t().tls(), {});
        QVERIFY(second.ok());
        auto started = (*second)->start();
        QVERIFY(!started.ok());
        QVERIFY(started.error().message.find("cannot listen on") != std::string::npos);
    }

    void theProgramServesThem() {
        QTemporaryDir dir;
        const QString corpus = dir.filePath("corpus.txt");
        writeCorpus(corpus.toStdString(), 100000);
        QProcess p;
        p.start(TANDEM_COORDINATOR_BIN,
                {"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--state-dir",
                 dir.filePath("state"), "--corpus", corpus, "--model", "L=1,NH=2,C=16,T=16",
                 "--result-encoding", "fp16"});
        QVERIFY(p.waitForStarted());
        QByteArray out;
        int port = 0;
        for (int i = 0; i < 600 && port == 0 && p.state() == QProcess::Running; ++i) {
            p.waitForReadyRead(100);
            out += p.readAllStandardOutput();
            const int at = out.indexOf("metrics on port ");
            const int end = out.indexOf('\n', at);
            if (at >= 0 && end > at)
                port = out.mid(at + 16, end - at - 16).toInt();
        }
        QVERIFY2(port > 0, (out + p.readAllStandardError()).constData());
        httplib::Client http("127.0.0.1", port);
        auto res = http.Get("/metrics");
        QVERIFY(res && res->status == 200);
        QVERIFY(res->body.find("tandem_run_info{run=\"1\",model=\"L=1 NH=2 C=16 T=16 V=256\"} 1") !=
                std::string::npos);
        p.terminate();
        QVERIFY(p.waitForFinished(20000));
        QCOMPARE(p.exitCode(), 0);

        QProcess bad;
        bad.start(TANDEM_COORDINATOR_BIN, {"--metrics-listen", "9464"});
        QVERIFY(bad.waitForFinished(20000));
        QVERIFY(bad.exitCode() != 0);
        QVERIFY(bad.readAllStandardError().contains("--metrics-listen expects HOST:PORT"));
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorMetrics)
#include "test_coordinator_metrics.moc"
