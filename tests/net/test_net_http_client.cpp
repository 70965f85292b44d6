// The HTTPS client against a scripted TLS server on 127.0.0.1 (tls_test_server.hpp): TLS
// negatives each with its own error, timeouts, retries and backoff with an injected sleep,
// Retry-After, headers, proxies, the coordinator calls and one client from several threads.
// Downloads and uploads are test_net_http_transfer's.
#include "coordinator_client.hpp"
#include "fault_proxy.hpp"
#include "http_client_fixture.hpp"
#include "result_format.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <thread>

using namespace tandem;
using namespace tandem::net;
using namespace tandem::testing;
using namespace std::chrono_literals;

class TestNetHttpClient : public QObject, HttpClientFixture {
    Q_OBJECT

  private slots:
    void initTestCase() { setUpIdentities(); }
    void init() { m_sleeps.clear(); }

    void plainHttpRefused() {
        HttpClientConfig c = baseConfig(1);
        c.baseUrl = "http://127.0.0.1:1";
        auto r = HttpClient::create(c);
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::InvalidUrl);
        QVERIFY2(r.error().message.find("plain http://") != std::string::npos,
                 r.error().message.c_str());
        // A full http:// URL handed to a request of an https client is refused too.
        auto cl = client(baseConfig(1));
        auto g = cl->requestJson("GET", "http://127.0.0.1:1/v1/status");
        QVERIFY(!g);
        QCOMPARE(g.error().kind, HttpErrorKind::InvalidUrl);
    }

    void tlsNegativesEachHaveTheirOwnError() {
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem,
                             [](const TestRequest&) { return TestResponse{}; }));
        const int port = server.port();
        // Unknown CA: neither CA file nor pin, the system store does not know it.
        {
            HttpClientConfig c = baseConfig(port);
            c.caFile.clear();
            auto r = client(c)->requestJson("GET", "/x");
            QVERIFY(!r);
            QCOMPARE(r.error().kind, HttpErrorKind::TlsUnknownCa);
            QVERIFY2(r.error().message.find("not trusted") != std::string::npos,
                     r.error().message.c_str());
        }
        // Wrong CA: a CA file that did not sign it.
        {
            HttpClientConfig c = baseConfig(port);
            c.caFile = m_otherCaFile;
            auto r = client(c)->requestJson("GET", "/x");
            QVERIFY(!r);
            QCOMPARE(r.error().kind, HttpErrorKind::TlsUnknownCa);
        }
        // Pin mismatch: the pin of another key.
        {
            HttpClientConfig c = baseConfig(port);
            c.caFile.clear();
            c.pinnedPublicKey = publicKeyPin(m_otherId.certificatePem).value();
            auto r = client(c)->requestJson("GET", "/x");
            QVERIFY(!r);
            QCOMPARE(r.error().kind, HttpErrorKind::TlsPinMismatch);
            QVERIFY2(r.error().message.find("pinned key") != std::string::npos,
                     r.error().message.c_str());
            // The same pin check with a CA file that trusts the certificate.
            c.caFile = m_caFile;
            auto r2 = client(c)->requestJson("GET", "/x");
            QVERIFY(!r2);
            QCOMPARE(r2.error().kind, HttpErrorKind::TlsPinMismatch);
        }
        // The right pin alone is enough for a self-signed server.
        {
            HttpClientConfig c = baseConfig(port);
            c.caFile.clear();
            c.pinnedPublicKey = m_pin;
            auto r = client(c)->requestJson("GET", "/x");
            QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
            QCOMPARE(r->status, 200L);
        }
        // A malformed pin is refused before any connection.
        {
            HttpClientConfig c = baseConfig(port);
            c.pinnedPublicKey = "sha256//short";
            auto r = HttpClient::create(c);
            QVERIFY(!r);
            QCOMPARE(r.error().kind, HttpErrorKind::Tls);
        }
    }

    void tlsWrongHostName() {
        // A certificate for other.example, trusted as CA, served at 127.0.0.1.
        TlsTestServer server;
        QVERIFY(server.start(m_otherId.certificatePem, m_otherId.privateKeyPem,
                             [](const TestRequest&) { return TestResponse{}; }));
        HttpClientConfig c = baseConfig(server.port());
        c.caFile = m_otherCaFile;
        auto r = client(c)->requestJson("GET", "/x");
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::TlsHostMismatch);
        QVERIFY2(r.error().message.find("another host name") != std::string::npos,
                 r.error().message.c_str());
        // Pinned without a CA: the host name is still checked.
        c.caFile.clear();
        c.pinnedPublicKey = publicKeyPin(m_otherId.certificatePem).value();
        auto r2 = client(c)->requestJson("GET", "/x");
        QVERIFY(!r2);
        QCOMPARE(r2.error().kind, HttpErrorKind::TlsHostMismatch);
    }

    void connectionRefused() {
        int port = 0;
        {
            TlsTestServer server;  // take a free port, then close it
            QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem,
                                 [](const TestRequest&) { return TestResponse{}; }));
            port = server.port();
        }
        auto r = client(baseConfig(port))->requestJson("GET", "/x");
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::ConnectionRefused);
        QVERIFY(r.error().transient());
    }

    void timeoutsConnectAndStall() {
        // A socket that listens but never speaks TLS: the handshake does not finish in time.
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        QVERIFY(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        QVERIFY(::listen(fd, 4) == 0);
        QVERIFY(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
        HttpClientConfig c = baseConfig(ntohs(addr.sin_port));
        c.connectTimeout = 300ms;
        auto r = client(c)->requestJson("GET", "/x");
        ::close(fd);
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::Timeout);
        QVERIFY2(r.error().message.find("connecting to") != std::string::npos,
                 r.error().message.c_str());
        QVERIFY(r.error().transient());

        // A download that stops moving: the low-speed abort, not a total timeout.
        const std::string blob = makeBlob(300000, 14);
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem,
                             [&](const TestRequest& q) { return serveWithRange(q, blob); }));
        FaultProxy proxy("127.0.0.1", server.port());
        FaultPlan stall;
        stall.stallDownAtByte = 50000;
        stall.stallFor = 60000ms;
        proxy.setPlans({stall});
        QVERIFY(proxy.start().ok());
        HttpClientConfig s = baseConfig(proxy.port());
        s.lowSpeedBytesPerSecond = 1000;
        s.lowSpeedSeconds = 1;
        auto d = client(s)->download({"/f", path("stalled.bin"), digestOf(blob), 300000, {}});
        QVERIFY(!d);
        QCOMPARE(d.error().kind, HttpErrorKind::Timeout);
        QVERIFY2(d.error().message.find("stalled") != std::string::npos, d.error().message.c_str());
        QVERIFY(d.error().bytesTransferred > 0);
        proxy.stop();
    }

    void apiErrorBodyParsedAndNotRetried() {
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [](const TestRequest&) {
            TestResponse r;
            r.status = 409;
            r.reason = "Conflict";
            r.body = R"({"error":{"code":"duplicate","message":"another result was accepted"}})";
            return r;
        }));
        HttpClientConfig c = baseConfig(server.port());
        c.retry.maxAttempts = 4;
        auto r = client(c)->requestJson("POST", "/v1/work", "{}");
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::HttpStatus);
        QCOMPARE(r.error().httpStatus, 409L);
        QCOMPARE(r.error().apiCode, std::string("duplicate"));
        QCOMPARE(r.error().apiMessage, std::string("another result was accepted"));
        QVERIFY(!r.error().transient());
        QCOMPARE(server.requests(), 1);
        QVERIFY(m_sleeps.empty());
    }

    void retryAfterSecondsAndDateHonoured() {
        std::atomic<int> calls{0};
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest&) {
            TestResponse r;
            const int n = ++calls;
            if (n == 1) {
                r.status = 503;
                r.headers = {{"Retry-After", "7"}};
                r.body = R"({"error":{"code":"busy","message":"all upload slots are taken"}})";
            } else if (n == 2) {
                r.status = 429;
                r.headers = {{"Retry-After", "Sun, 22 Nov 2026 10:00:30 GMT"}};
            } else {
                r.body = R"({"ok":true})";
            }
            return r;
        }));
        HttpClientConfig c = baseConfig(server.port());
        c.retry.maxAttempts = 5;
        // 10:00:00 GMT that day, so the date means 30 s.
        c.now = [] { return std::chrono::system_clock::from_time_t(1795341600); };
        auto r = client(c)->requestJson("GET", "/v1/status");
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(r->body, std::string(R"({"ok":true})"));
        QCOMPARE(calls.load(), 3);
        QCOMPARE(m_sleeps.size(), size_t(2));
        QCOMPARE(m_sleeps[0].count(), 7000LL);
        QCOMPARE(m_sleeps[1].count(), 30000LL);
        QCOMPARE(parseRetryAfter("garbage", c.now()), std::optional<std::chrono::milliseconds>());
    }

    void backoffIsExponentialCappedAndJittered() {
        std::atomic<int> calls{0};
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest&) {
            ++calls;
            TestResponse r;
            r.status = 500;
            r.reason = "Internal Server Error";
            return r;
        }));
        HttpClientConfig c = baseConfig(server.port());
        c.retry.maxAttempts = 5;
        c.retry.initialBackoff = 100ms;
        c.retry.maxBackoff = 300ms;
        c.retry.jitter = 0;
        auto r = client(c)->requestJson("GET", "/v1/status");
        QVERIFY(!r);
        QCOMPARE(r.error().attempts, 5);
        QCOMPARE(calls.load(), 5);
        std::vector<long long> got;
        for (auto d : m_sleeps)
            got.push_back(d.count());
        QCOMPARE(got, (std::vector<long long>{100, 200, 300, 300}));
        // A policy given to one call is used for that call's waits.
        m_sleeps.clear();
        RetryPolicy once;
        once.maxAttempts = 3;
        once.initialBackoff = 40ms;
        once.maxBackoff = 50ms;
        once.jitter = 0;
        auto r2 = client(c)->requestJson("GET", "/v1/status", {}, {}, once);
        QVERIFY(!r2);
        QCOMPARE(r2.error().attempts, 3);
        QCOMPARE(m_sleeps, (std::vector<std::chrono::milliseconds>{40ms, 50ms}));
        // With jitter each wait lies in [b/2, b] and they are not all equal.
        c.retry.jitter = 0.5;
        c.retry.maxBackoff = 100000ms;
        auto cl = client(c);
        std::set<long long> distinct;
        for (int n = 1; n <= 8; ++n) {
            const long long b = 100LL << (n - 1);
            const long long d = cl->backoffDelay(n).count();
            QVERIFY(d >= b / 2 && d <= b);
            distinct.insert(d * 1000 / b);
        }
        QVERIFY(distinct.size() > 1);
    }

    void bearerTokenAndJsonHeaders() {
        Guarded<TestRequest> seenBox;
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest& q) {
            seenBox.set(q);
            TestResponse r;
            r.status = 204;
            r.reason = "No Content";
            r.headers = {{"Retry-After", "12"}};
            return r;
        }));
        HttpClientConfig c = baseConfig(server.port());
        c.bearerToken = "tok123";
        auto r = client(c)->requestJson("POST", "/v1/work", R"({"a":1})");
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(r->status, 204L);
        QVERIFY(r->retryAfter && r->retryAfter->count() == 12000);
        const TestRequest seen = seenBox.get();
        QCOMPARE(seen.header("authorization"), std::string("Bearer tok123"));
        QCOMPARE(seen.header("content-type"), std::string("application/json"));
        QCOMPARE(seen.body, std::string(R"({"a":1})"));
    }

    void proxiesFromSettingsAndEnvironment() {
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem,
                             [](const TestRequest&) { return TestResponse{}; }));
        const std::string dest = "127.0.0.1:" + std::to_string(server.port());
        for (auto protocol : {ProxyProtocol::HttpConnect, ProxyProtocol::Socks5}) {
            FaultProxy proxy("127.0.0.1", server.port());
            proxy.setProtocol(protocol);
            QVERIFY(proxy.start().ok());
            const std::string url =
                (protocol == ProxyProtocol::HttpConnect ? "http://" : "socks5://") +
                std::string("127.0.0.1:") + std::to_string(proxy.port());
            HttpClientConfig c = baseConfig(server.port());
            c.proxy = url;
            auto r = client(c)->requestJson("GET", "/x");
            QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
            QCOMPARE(proxy.stats().tunnels, 1);
            QCOMPARE(proxy.stats().lastTunnelDestination, dest);
            // From the environment when the setting is empty; "direct" ignores it.
            qputenv("https_proxy", QByteArray::fromStdString(url));
            qunsetenv("no_proxy");
            qunsetenv("NO_PROXY");
            c.proxy = "";
            auto viaEnv = client(c)->requestJson("GET", "/x");
            QVERIFY2(viaEnv.ok(), viaEnv.ok() ? "" : viaEnv.error().message.c_str());
            QCOMPARE(proxy.stats().tunnels, 2);
            c.proxy = "direct";
            QVERIFY(client(c)->requestJson("GET", "/x").ok());
            QCOMPARE(proxy.stats().tunnels, 2);
            qunsetenv("https_proxy");
            proxy.stop();
        }
        // A proxy that is not there: refused, and the message says so.
        int closedPort = 0;
        {
            FaultProxy gone("127.0.0.1", 1);
            QVERIFY(gone.start().ok());
            closedPort = gone.port();
        }
        HttpClientConfig c = baseConfig(server.port());
        c.proxy = "http://127.0.0.1:" + std::to_string(closedPort);
        auto r = client(c)->requestJson("GET", "/x");
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::ConnectionRefused);
        QVERIFY2(r.error().message.find("proxy") != std::string::npos, r.error().message.c_str());
    }

    void coordinatorCallsAgainstAScriptedServer() {
        // Answers a real coordinator rarely gives: no work, abandon, a tampered manifest, a
        // receipt for another result.
        auto coordKey = SigningKey::generate().value();
        Manifest m;
        m.workUnitId = 5;
        m.runId = 1;
        m.model = ModelConfig::parse("L=1,NH=2,C=16,T=16").value();
        m.weightsUrl = "/v1/runs/1/weights/0";
        m.weightsBytes = 10;
        m.dataUrl = "/v1/runs/1/data/0";
        m.dataLength = 100;
        m.innerSteps = 4;
        m.batch = 2;
        m.seqLen = 16;
        m.lr.peakLr = 1e-3f;
        m.lr.totalSteps = 4;
        m.deadlineUnix = 1800000000;
        m.heartbeatSeconds = 30;
        m.uploadUrl = "/v1/results/5";
        m.maxUploadBytes = 1000;
        m.sign(coordKey);
        Manifest tampered = m;
        tampered.innerSteps = 400;  // changed after signing
        std::atomic<int> mode{0};
        ResultHeader h;
        h.workUnitId = 5;
        h.parameterCount = 3;
        h.tokens = 10;
        h.steps = 1;
        const std::vector<uint16_t> payload{1, 2, 3};
        const auto result = buildResult(h, payload);
        writeFile(path("r.bin"), std::string(result.begin(), result.end()));
        Receipt good;
        good.workUnitId = 5;
        good.clientId = 1;
        good.weight = 10;
        good.resultDigest = resultDigest(parseResultHeader(std::span(result).first(128)).value());
        good.sign(coordKey);
        Receipt other = good;
        other.resultDigest[0] ^= 1;
        other.sign(coordKey);  // signed, but for another result

        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest& q) {
            TestResponse r;
            if (q.path == "/v1/work") {
                if (mode == 0) {
                    r.status = 204;
                    r.headers = {{"Retry-After", "12"}};
                } else {
                    r.body = (mode == 1 ? m : tampered).toJson();
                }
            } else if (q.path == "/v1/work/5/progress") {
                r.body = R"({"action":"abandon","reason":"no heartbeat for 181 s"})";
            } else if (q.path == "/v1/results/5" && !q.beforeBody) {
                r.body = (mode == 1 ? good : other).toJson();
            }
            return r;
        }));
        auto cc = CoordinatorClient::create(baseConfig(server.port()), coordKey.publicKey());
        QVERIFY(cc.ok());
        auto& c = **cc;
        auto none = c.requestWork(WorkRequest{"cpu", 1, 0, 1});
        QVERIFY2(none.ok(), none.ok() ? "" : none.error().message.c_str());
        QVERIFY(!none->manifest);
        QCOMPARE(none->retryAfter.count(), 12000LL);
        mode = 1;
        auto offer = c.requestWork(WorkRequest{"cpu", 1, 0, 1});
        QVERIFY2(offer.ok(), offer.ok() ? "" : offer.error().message.c_str());
        QCOMPARE(offer->manifest->innerSteps, 4);
        auto receipt = c.uploadResult("/v1/results/5", path("r.bin"), Signature{});
        QVERIFY2(receipt.ok(), receipt.ok() ? "" : receipt.error().message.c_str());
        QCOMPARE(receipt->receipt.resultDigest, good.resultDigest);
        mode = 2;
        auto bad = c.requestWork(WorkRequest{"cpu", 1, 0, 1});
        QVERIFY(!bad);
        QCOMPARE(bad.error().kind, HttpErrorKind::BadSignature);
        auto wrongReceipt = c.uploadResult("/v1/results/5", path("r.bin"), Signature{});
        QVERIFY(!wrongReceipt);
        QCOMPARE(wrongReceipt.error().kind, HttpErrorKind::BadResponse);
        QVERIFY2(wrongReceipt.error().message.find("expected work unit 5") != std::string::npos,
                 wrongReceipt.error().message.c_str());
        auto hb = c.reportProgress(5, ProgressReport{1, 3.0f, 10});
        QVERIFY(hb.ok());
        QCOMPARE(hb->action, std::string("abandon"));
        QCOMPARE(hb->reason, std::string("no heartbeat for 181 s"));
    }

    // Protocol v6: a piece's receipt must name the piece's shard (and, as any receipt, the
    // result's unit and digest, signed by the pinned key).
    void pieceReceiptsNameTheirShard() {
        auto coordKey = SigningKey::generate().value();
        ResultHeader h;
        h.workUnitId = 5;
        h.parameterCount = 600;
        h.tokens = 10;
        h.steps = 1;
        const std::vector<uint8_t> payload(1200, 0x3c);
        const auto ranges = pieceRanges(600, 2);
        auto pieced = buildPiecedResult(h, payload, ranges);
        QVERIFY(pieced.ok());
        const auto body = pieceBody(*pieced, payload, 1);
        writeFile(path("piece1.bin"), std::string(body.begin(), body.end()));
        std::atomic<int> answerShard{1};  // -1: a receipt without a shard
        std::atomic<int> puts{0};
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest& q) {
            TestResponse r;
            if (q.path == "/v1/results/5/pieces/1" && !q.beforeBody) {
                if (q.body == std::string(body.begin(), body.end()))
                    ++puts;
                Receipt receipt;
                receipt.workUnitId = 5;
                receipt.clientId = 1;
                receipt.weight = 10;
                receipt.credit = 10;
                receipt.resultDigest = resultDigest(pieced->header);
                if (answerShard >= 0)
                    receipt.shard = answerShard.load();
                receipt.sign(coordKey);
                r.body = receipt.toJson();
            }
            return r;
        }));
        auto cc = CoordinatorClient::create(baseConfig(server.port()), coordKey.publicKey());
        QVERIFY(cc.ok());
        auto& c = **cc;
        auto ok = c.uploadPiece("/v1/results/5/pieces/1", path("piece1.bin"), 1, Signature{});
        QVERIFY2(ok.ok(), ok.ok() ? "" : ok.error().message.c_str());
        QCOMPARE(ok->receipt.shard, std::optional<int>(1));
        QCOMPARE(ok->receipt.resultDigest, resultDigest(pieced->header));
        answerShard = 0;
        auto other = c.uploadPiece("/v1/results/5/pieces/1", path("piece1.bin"), 1, Signature{});
        QVERIFY(!other);
        QCOMPARE(other.error().kind, HttpErrorKind::BadResponse);
        QVERIFY2(
            other.error().message.find("is for piece 0, expected piece 1") != std::string::npos,
            other.error().message.c_str());
        answerShard = -1;
        auto none = c.uploadPiece("/v1/results/5/pieces/1", path("piece1.bin"), 1, Signature{});
        QVERIFY(!none);
        QVERIFY2(none.error().message.find("is for no piece") != std::string::npos,
                 none.error().message.c_str());
        QCOMPARE(puts.load(), 3);
    }

    void oneClientFromSeveralThreads() {
        // The engine trains, heartbeats and uploads from different threads on one client.
        const std::string blob = makeBlob(100000, 15);
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest& q) {
            if (q.method == "PUT") {
                TestResponse r;
                r.body = toHex(digestOf(q.body));
                return r;
            }
            return serveWithRange(q, blob);
        }));
        auto cl = client(baseConfig(server.port()));
        std::atomic<int> good{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 3; ++t)
            threads.emplace_back([&, t] {
                for (int i = 0; i < 5; ++i) {
                    cl->setBearerToken("token" + std::to_string(t));
                    const auto dest =
                        path(("mt" + std::to_string(t) + "_" + std::to_string(i)).c_str());
                    auto d = cl->download({"/f", dest, digestOf(blob), int64_t(blob.size()), {}});
                    auto u =
                        cl->upload("PUT", "/u",
                                   UploadBody{std::span(
                                       reinterpret_cast<const uint8_t*>(blob.data()), blob.size())},
                                   "application/octet-stream");
                    if (d.ok() && u.ok() && u->body == toHex(digestOf(blob)))
                        ++good;
                }
            });
        for (auto& t : threads)
            t.join();
        QCOMPARE(good.load(), 15);
    }

    void contentRangeParsing() {
        auto a = parseContentRange("bytes 100-199/1000");
        QVERIFY(a && a->first == 100 && a->last == 199 && a->total == 1000);
        auto b = parseContentRange("bytes */1751096");
        QVERIFY(b && b->first == -1 && b->total == 1751096);
        QVERIFY(!parseContentRange("bytes 5-1/10"));
        QVERIFY(!parseContentRange("items 1-2/3"));
    }
};

QTEST_APPLESS_MAIN(TestNetHttpClient)
#include "test_net_http_client.moc"
