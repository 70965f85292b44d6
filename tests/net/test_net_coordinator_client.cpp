// The typed coordinator calls and the bandwidth probe against a real tandem-coordinator process
// on 127.0.0.1 (self-signed, reached with its public-key pin), with the fault proxy in between
// for downloads and uploads: a whole work unit (register, signed manifest, weights and data
// range downloaded across cuts, stalls and slowness, heartbeat, result uploaded across cuts with
// a verified receipt, idempotent re-upload), the server's errors parsed, a manifest refused under
// the wrong pinned key, plausible bandwidth numbers over loopback.
#include "bandwidth_probe.hpp"
#include "coordinator_client.hpp"
#include "fault_proxy.hpp"
#include "result_format.hpp"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <csignal>
#include <fstream>
#include <thread>

using namespace tandem;
using namespace tandem::net;
using namespace tandem::testing;
using namespace std::chrono_literals;

namespace {

std::string readFile(const std::filesystem::path& p) {
    std::string s;
    if (FILE* f = std::fopen(p.c_str(), "rb")) {
        char buf[65536];
        size_t n = 0;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
            s.append(buf, n);
        std::fclose(f);
    }
    return s;
}

}  // namespace

class TestNetCoordinatorClient : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    QProcess m_proc;
    int m_port = 0;
    std::string m_pin;
    std::filesystem::path m_state;
    std::vector<std::chrono::milliseconds> m_sleeps;

    std::filesystem::path path(const std::string& name) const {
        return std::filesystem::path(m_dir.path().toStdString()) / name;
    }

    HttpClientConfig config(int port) {
        HttpClientConfig c;
        c.baseUrl = "https://127.0.0.1:" + std::to_string(port);
        c.pinnedPublicKey = m_pin;
        c.proxy = "direct";
        c.connectTimeout = 5000ms;
        c.lowSpeedBytesPerSecond = 1000;
        c.lowSpeedSeconds = 1;
        c.retry.maxAttempts = 8;
        // Recorded, and shortened: a real server needs a moment to notice a cut connection.
        c.sleep = [this](std::chrono::milliseconds d) {
            m_sleeps.push_back(d);
            std::this_thread::sleep_for(std::min(d, std::chrono::milliseconds(1000)));
        };
        c.jitterSeed = 3;
        return c;
    }

    std::unique_ptr<CoordinatorClient> client(HttpClientConfig c,
                                              std::optional<PublicKey> key = std::nullopt) {
        auto r = CoordinatorClient::create(std::move(c), key);
        if (!r) {
            qWarning("%s", r.error().message.c_str());
            return nullptr;
        }
        return std::move(r.value());
    }

  private slots:
    void initTestCase() {
        std::signal(SIGPIPE, SIG_IGN);
        m_state = path("state");
        const auto corpus = path("corpus.txt");
        {
            std::ofstream out(corpus);
            const char* words[] = {"the quick ", "brown fox ", "jumps over ", "lazy dogs\n"};
            for (int i = 0; i < 40000; ++i)
                out << words[(i * 7 + i / 3) % 4];
        }
        m_proc.setProgram(TANDEM_COORDINATOR_BIN);
        m_proc.setArguments({"--listen",          "127.0.0.1:0",
                             "--state-dir",       QString::fromStdString(m_state.string()),
                             "--corpus",          QString::fromStdString(corpus.string()),
                             "--model",           "L=2,NH=4,C=64,T=32",
                             "--inner-steps",     "8",
                             "--batch",           "4",
                             "--quorum",          "4",
                             "--threads",         "1",
                             "--http-threads",    "8",
                             "--result-encoding", "fp16"});
        if (qEnvironmentVariableIsSet("TANDEM_TEST_VERBOSE"))
            m_proc.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        m_proc.start();
        QVERIFY(m_proc.waitForStarted(10000));
        QByteArray out;
        while (!out.contains("pin ")) {
            if (!m_proc.waitForReadyRead(60000))
                QFAIL(("coordinator did not start: " + m_proc.readAllStandardError()).constData());
            out += m_proc.readAllStandardOutput();
        }
        const int at = out.indexOf("listening on port ");
        m_port = out.mid(at + 18, out.indexOf('\n', at) - at - 18).toInt();
        const int pinAt = out.indexOf("pin ");
        m_pin = out.mid(pinAt + 4, out.indexOf('\n', pinAt) - pinAt - 4).trimmed().toStdString();
        QVERIFY(m_port > 0);
        QCOMPARE(m_pin, readFile(m_state / "tls" / "pin.txt").substr(0, m_pin.size()));
    }
    void cleanupTestCase() {
        m_proc.terminate();
        m_proc.waitForFinished(10000);
    }
    void init() { m_sleeps.clear(); }

    void statusWithPinOrCaFile() {
        auto c = client(config(m_port));
        auto st = c->status();
        QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
        QCOMPARE(st->model, ModelConfig::parse("L=2,NH=4,C=64,T=32").value());
        // The certificate as CA file, no pin.
        HttpClientConfig ca = config(m_port);
        ca.pinnedPublicKey.clear();
        ca.caFile = m_state / "tls" / "cert.pem";
        QVERIFY(client(ca)->status().ok());
        // Another pin: refused with its own error, not retried.
        HttpClientConfig wrong = config(m_port);
        wrong.pinnedPublicKey = "sha256//" + toBase64(sha256(std::string_view("another key")));
        auto bad = client(wrong)->status();
        QVERIFY(!bad);
        QCOMPARE(bad.error().kind, HttpErrorKind::TlsPinMismatch);
        QCOMPARE(bad.error().attempts, 1);
    }

    void unauthenticatedWorkRequestIsAParsedError() {
        auto c = client(config(m_port), PublicKey{});
        auto r = c->requestWork(WorkRequest{"cpu", 1 << 30, 0, 1 << 30});
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::HttpStatus);
        QCOMPARE(r.error().httpStatus, 401L);
        QCOMPARE(r.error().apiCode, std::string("unauthorized"));
        QVERIFY(!r.error().transient());
    }

    // GET /v1/work and DELETE /v1/work/{id} through the worker's client: the unit of a request
    // id is listed with it, released once; a second release is a parsed 409, not retried.
    void listAndReleaseWork() {
        auto c = client(config(m_port));
        auto key = SigningKey::generate().value();
        QVERIFY(c->registerClient({"worker-list", key.publicKey(), "test"}).ok());
        const WorkRequest req{"cpu", 1 << 30, 0, 1 << 30};
        const std::string requestId = newRequestId();
        auto offer = c->requestWork(req, requestId);
        QVERIFY2(offer.ok(), offer.ok() ? "" : offer.error().message.c_str());
        QVERIFY(offer->manifest);
        auto again = c->requestWork(req, requestId);
        QVERIFY(again.ok() && again->manifest);
        QCOMPARE(again->manifest->workUnitId, offer->manifest->workUnitId);
        auto held = c->listWork();
        QVERIFY2(held.ok(), held.ok() ? "" : held.error().message.c_str());
        QCOMPARE(held->units.size(), size_t{1});
        QCOMPARE(held->units[0].workUnitId, offer->manifest->workUnitId);
        QCOMPARE(held->units[0].requestId, requestId);
        QVERIFY(c->releaseWork(offer->manifest->workUnitId).ok());
        auto twice = c->releaseWork(offer->manifest->workUnitId);
        QVERIFY(!twice);
        QCOMPARE(twice.error().httpStatus, 409L);
        QCOMPARE(twice.error().apiCode, std::string("not_assigned"));
        QCOMPARE(twice.error().attempts, 1);
        QVERIFY(c->listWork()->units.empty());
    }

    void wholeWorkUnitThroughFaults() {
        FaultProxy proxy("127.0.0.1", m_port, 21);
        QVERIFY(proxy.start().ok());
        auto c = client(config(proxy.port()));
        auto key = SigningKey::generate().value();

        auto reg = c->registerClient({"worker-a", key.publicKey(), "test"});
        QVERIFY2(reg.ok(), reg.ok() ? "" : reg.error().message.c_str());
        QVERIFY(c->coordinatorKey() == reg->coordinatorPublicKey);

        auto offer = c->requestWork(WorkRequest{"cpu", 1 << 30, 0, 1 << 30});
        QVERIFY2(offer.ok(), offer.ok() ? "" : offer.error().message.c_str());
        QVERIFY(offer->manifest.has_value());
        const Manifest m = *offer->manifest;
        QVERIFY(m.verify(reg->coordinatorPublicKey));

        // Weights: cut in the handshake, cut mid-body, a stall, then slowness.
        FaultPlan cutEarly, cutMid, stall, slow;
        cutEarly.cutDownAtByte = 500;
        cutMid.cutDownAtByte = m.weightsBytes / 3;
        stall.stallDownAtByte = 20000;
        stall.stallFor = 60000ms;
        slow.bytesPerSecond = 4 << 20;
        c->http().closeConnections();  // plans apply to new connections
        proxy.setPlans({cutEarly, cutMid, stall, slow});
        int64_t lastDone = 0;
        auto w = c->downloadWeights(m, path("weights.ckpt"), [&](const TransferProgress& p) {
            lastDone = p.bytesDone;
            return ProgressAction::Continue;
        });
        QVERIFY2(w.ok(), w.ok() ? "" : w.error().message.c_str());
        QCOMPARE(w->attempts, 4);
        QCOMPARE(w->bytes, m.weightsBytes);
        QCOMPARE(lastDone, m.weightsBytes);
        // Independent oracle: the coordinator's own file, byte for byte.
        QCOMPARE(readFile(path("weights.ckpt")),
                 readFile(m_state / "weights" / ("v" + std::to_string(m.baseVersion) + ".ckpt")));

        // Data range: cut twice after the headers.
        FaultPlan cutData1, cutData2;
        cutData1.cutDownAtByte = 3000;
        cutData2.cutDownAtByte = 3500;
        c->http().closeConnections();
        proxy.setPlans({cutData1, cutData2});
        auto d = c->downloadData(m, path("data.bin"));
        QVERIFY2(d.ok(), d.ok() ? "" : d.error().message.c_str());
        QCOMPARE(d->bytes, m.dataLength);
        const std::string shard = readFile(m_state / "data" / "shard-0.bin");
        QVERIFY(int64_t(shard.size()) >= m.dataOffset + m.dataLength);
        QCOMPARE(readFile(path("data.bin")), shard.substr(static_cast<size_t>(m.dataOffset),
                                                          static_cast<size_t>(m.dataLength)));

        proxy.setPlans({});
        auto hb = c->reportProgress(m.workUnitId, ProgressReport{1, 5.0f, 100.0});
        QVERIFY2(hb.ok(), hb.ok() ? "" : hb.error().message.c_str());
        QCOMPARE(hb->action, std::string("continue"));

        // The result: small finite deltas.
        ResultHeader h;
        h.workUnitId = m.workUnitId;
        h.parameterCount = m.model.parameterCount();
        h.tokens = int64_t(m.innerSteps) * m.batch * m.seqLen;
        h.steps = m.innerSteps;
        h.lossFirst = 5.5f;
        h.lossLast = 4.0f;
        h.lossMean = 4.7f;
        std::vector<uint16_t> payload(static_cast<size_t>(h.parameterCount));
        for (size_t i = 0; i < payload.size(); ++i)
            payload[i] = static_cast<uint16_t>(0x1000 + (i % 512) + ((i % 2) << 15));
        const auto bytes = buildResult(h, payload);
        {
            std::ofstream out(path("result.bin"), std::ios::binary);
            out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        }
        const auto header = parseResultHeader(std::span(bytes).first(kResultHeaderBytes)).value();
        const Signature sig = key.sign(resultDigest(header));

        FaultPlan cutUp, stallUp;
        cutUp.cutUpAtByte = int64_t(bytes.size()) / 2;
        stallUp.stallUpAtByte = 30000;
        // Finite: the client's abandoned bytes keep its FIN queued behind them until the proxy
        // reads again; only then does the coordinator see the attempt end (409
        // upload_in_progress until then, which the client retries).
        stallUp.stallFor = 8000ms;
        c->http().closeConnections();
        proxy.setPlans({cutUp, stallUp});
        m_sleeps.clear();
        auto up = c->uploadResult(m.uploadUrl, path("result.bin"), sig);
        QVERIFY2(up.ok(), up.ok() ? "" : up.error().message.c_str());
        QCOMPARE(up->receipt.workUnitId, m.workUnitId);
        QCOMPARE(up->receipt.clientId, reg->clientId);
        QCOMPARE(up->receipt.resultDigest, resultDigest(header));
        QVERIFY(up->receipt.verify(reg->coordinatorPublicKey));
        QVERIFY(m_sleeps.size() >= 2);  // the cut and the stall (and any upload_in_progress)
        QVERIFY(up->bytesSent >= int64_t(bytes.size()));
        proxy.stop();

        // Idempotent: the same result again gives the stored receipt.
        auto direct = client(config(m_port), reg->coordinatorPublicKey);
        direct->setToken(reg->token);
        auto again = direct->uploadResult(m.uploadUrl, path("result.bin"), sig);
        QVERIFY2(again.ok(), again.ok() ? "" : again.error().message.c_str());
        QCOMPARE(again->receipt.signature, up->receipt.signature);
        QCOMPARE(again->receipt.round, up->receipt.round);
    }

    void manifestUnderAnotherPinnedKeyIsRefused() {
        auto c = client(config(m_port));
        auto key = SigningKey::generate().value();
        auto reg = c->registerClient({"worker-b", key.publicKey(), "test"});
        QVERIFY(reg.ok());
        c->setCoordinatorKey(SigningKey::generate().value().publicKey());
        auto r = c->requestWork(WorkRequest{"cpu", 1 << 30, 0, 1 << 30});
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::BadSignature);
        QVERIFY2(
            r.error().message.find("not signed by the pinned coordinator key") != std::string::npos,
            r.error().message.c_str());
        // Registering again under a pinned key that differs is refused too.
        auto reg2 = c->registerClient({"worker-b2", key.publicKey(), "test"});
        QVERIFY(!reg2);
        QCOMPARE(reg2.error().kind, HttpErrorKind::BadSignature);
    }

    void bandwidthProbeOverLoopback() {
        auto http = HttpClient::create(config(m_port));
        QVERIFY(http.ok());
        BandwidthProbeConfig cfg;
        cfg.downloadBytes = 4 << 20;
        cfg.uploadBytes = 2 << 20;
        cfg.latencySamples = 3;
        auto s = probeBandwidth(**http, cfg);
        QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
        qInfo("loopback: down %.0f Mbit/s, up %.0f Mbit/s, latency %.3f ms", s->downMbitPerSecond,
              s->upMbitPerSecond, s->latencyMs);
        QCOMPARE(s->bytesDown, int64_t(4 << 20));
        QCOMPARE(s->bytesUp, int64_t(2 << 20));
        // Loopback moves far more than 1 Mbit/s; a unit mistake (bytes vs bits, ms vs s) would
        // land outside these bounds by orders of magnitude.
        QVERIFY(std::isfinite(s->downMbitPerSecond) && s->downMbitPerSecond > 1);
        QVERIFY(std::isfinite(s->upMbitPerSecond) && s->upMbitPerSecond > 1);
        QVERIFY(s->latencyMs >= 0 && s->latencyMs < 5000);
        // A rate limit shows in the measurement: 2 MiB/s down is about 16.8 Mbit/s (libcurl
        // reads a first burst unthrottled, hence the margin).
        (*http)->setRateLimits(0, 2 << 20);
        cfg.downloadBytes = 6 << 20;
        cfg.uploadBytes = 1 << 16;
        auto limited = probeBandwidth(**http, cfg);
        QVERIFY(limited.ok());
        QVERIFY2(limited->downMbitPerSecond < 2.0 * 16.8,
                 std::to_string(limited->downMbitPerSecond).c_str());
    }
};

QTEST_APPLESS_MAIN(TestNetCoordinatorClient)
#include "test_net_coordinator_client.moc"
