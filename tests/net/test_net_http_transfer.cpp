// The HTTPS client's transfers against a scripted TLS server on 127.0.0.1 and through the fault
// proxy: resumable downloads (Range honoured, ignored, answered wrongly, 416), SHA-256 refusal,
// uploads through cuts, stalls and slowness, deterministic random faults, cancellation.
#include "fault_proxy.hpp"
#include "http_client_fixture.hpp"

#include <thread>

using namespace tandem;
using namespace tandem::net;
using namespace tandem::testing;
using namespace std::chrono_literals;

class TestNetHttpTransfer : public QObject, HttpClientFixture {
    Q_OBJECT

  private slots:
    void initTestCase() { setUpIdentities(); }
    void init() { m_sleeps.clear(); }

    void downloadResumesFromThePartial() {
        const std::string blob = makeBlob(300000, 1);
        Guarded<std::string> rangeSeen;
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest& q) {
            rangeSeen.set(q.header("range"));
            return serveWithRange(q, blob);
        }));
        const auto dest = path("resume.bin");
        writeFile(dest.string() + ".part", blob.substr(0, 123456));
        int64_t lastDone = 0, lastTotal = 0;
        DownloadRequest req{"/f", dest, digestOf(blob), static_cast<int64_t>(blob.size()),
                            [&](const TransferProgress& p) {
                                lastDone = p.bytesDone;
                                lastTotal = p.bytesTotal;
                                return ProgressAction::Continue;
                            }};
        auto r = client(baseConfig(server.port()))->download(req);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(rangeSeen.get(), std::string("bytes=123456-"));
        QCOMPARE(r->resumedFrom, 123456LL);
        QCOMPARE(r->bytesTransferred, int64_t(blob.size() - 123456));
        QCOMPARE(readFile(dest), blob);
        QVERIFY(!std::filesystem::exists(dest.string() + ".part"));
        QCOMPARE(lastDone, int64_t(blob.size()));
        QCOMPARE(lastTotal, int64_t(blob.size()));
        // Present and verified: no request at all.
        const int before = server.requests();
        auto again = client(baseConfig(server.port()))->download(req);
        QVERIFY(again.ok() && again->alreadyPresent);
        QCOMPARE(server.requests(), before);
    }

    void downloadRangeIgnoredRestartsTheFile() {
        const std::string blob = makeBlob(200000, 2);
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest&) {
            TestResponse r;
            r.body = blob;  // always 200 with everything
            return r;
        }));
        const auto dest = path("ignored.bin");
        writeFile(dest.string() + ".part", std::string(5000, 'x'));  // a wrong prefix
        auto r =
            client(baseConfig(server.port()))
                ->download({"/f", dest, digestOf(blob), static_cast<int64_t>(blob.size()), {}});
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(readFile(dest), blob);
    }

    void downloadWrongContentRangeAppendsNothing() {
        const std::string blob = makeBlob(100000, 3);
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest&) {
            TestResponse r;
            r.status = 206;
            r.headers = {{"Content-Range", "bytes 0-99999/100000"}};  // not where we asked
            r.body = blob;
            return r;
        }));
        const auto dest = path("wrongrange.bin");
        const std::string prefix = blob.substr(0, 40000);
        writeFile(dest.string() + ".part", prefix);
        auto r =
            client(baseConfig(server.port()))
                ->download({"/f", dest, digestOf(blob), static_cast<int64_t>(blob.size()), {}});
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::BadResponse);
        QVERIFY2(r.error().message.find("starting at byte 40000") != std::string::npos,
                 r.error().message.c_str());
        QCOMPARE(readFile(dest.string() + ".part"), prefix);
        QVERIFY(!std::filesystem::exists(dest));
    }

    void download416() {
        const std::string blob = makeBlob(50000, 4);
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem,
                             [&](const TestRequest& q) { return serveWithRange(q, blob); }));
        // The partial already holds the whole file; size unknown to the client: 416, checked.
        const auto dest = path("complete.bin");
        writeFile(dest.string() + ".part", blob);
        auto r = client(baseConfig(server.port()))->download({"/f", dest, digestOf(blob), -1, {}});
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(readFile(dest), blob);
        // A partial longer than the file: 416, discarded, fetched again.
        const auto dest2 = path("longer.bin");
        writeFile(dest2.string() + ".part", blob + "extra bytes");
        HttpClientConfig c = baseConfig(server.port());
        c.retry.maxAttempts = 3;
        auto r2 = client(c)->download({"/f", dest2, digestOf(blob), -1, {}});
        QVERIFY2(r2.ok(), r2.ok() ? "" : r2.error().message.c_str());
        QCOMPARE(r2->attempts, 2);
        QCOMPARE(readFile(dest2), blob);
    }

    void downloadChecksumMismatchKeepsNothing() {
        const std::string blob = makeBlob(80000, 5);
        std::string served = blob;
        served[40000] ^= 1;
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem,
                             [&](const TestRequest& q) { return serveWithRange(q, served); }));
        const auto dest = path("corrupt.bin");
        auto r =
            client(baseConfig(server.port()))
                ->download({"/f", dest, digestOf(blob), static_cast<int64_t>(blob.size()), {}});
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::ChecksumMismatch);
        const std::string& m = r.error().message;
        QVERIFY2(m.find("expected SHA-256 " + toHex(digestOf(blob))) != std::string::npos &&
                     m.find("found " + toHex(digestOf(served))) != std::string::npos,
                 m.c_str());
        QVERIFY(!std::filesystem::exists(dest));
        QVERIFY(!std::filesystem::exists(dest.string() + ".part"));
    }

    void downloadAcrossCutsViaFaultProxy() {
        const std::string blob = makeBlob(400000, 6);
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem,
                             [&](const TestRequest& q) { return serveWithRange(q, blob); }));
        FaultProxy proxy("127.0.0.1", server.port(), 11);
        QVERIFY(proxy.start().ok());
        FaultPlan cutEarly, cutMid, cutLate;
        cutEarly.cutDownAtByte = 700;  // inside the TLS handshake
        cutMid.cutDownAtByte = 150000;
        cutLate.cutDownAtByte = 100000;  // of the resumed rest
        proxy.setPlans({cutEarly, cutMid, cutLate});
        HttpClientConfig c = baseConfig(proxy.port());
        c.retry.maxAttempts = 6;
        const auto dest = path("cuts.bin");
        auto r = client(c)->download(
            {"/f", dest, digestOf(blob), static_cast<int64_t>(blob.size()), {}});
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(readFile(dest), blob);
        QCOMPARE(r->attempts, 4);
        QCOMPARE(proxy.stats().cuts, 3);
        QCOMPARE(m_sleeps.size(), size_t(3));
        // Resumed, not restarted: far fewer than 4 x the file came over the wire.
        QVERIFY(r->bytesTransferred < int64_t(blob.size()) * 2);
        proxy.stop();
    }

    void randomFaultsAreDeterministic() {
        RandomFaults f;
        f.cutProbability = 0.5;
        f.stallProbability = 0.3;
        f.stallFor = 100ms;
        f.slowProbability = 0.3;
        FaultProxy a("127.0.0.1", 1, 42), b("127.0.0.1", 1, 42), other("127.0.0.1", 1, 43);
        a.setRandomFaults(f);
        b.setRandomFaults(f);
        other.setRandomFaults(f);
        bool differs = false;
        for (int i = 0; i < 8; ++i) {
            const FaultPlan pa = a.planFor(i), pb = b.planFor(i), po = other.planFor(i);
            QCOMPARE(pa.cutDownAtByte, pb.cutDownAtByte);
            QCOMPARE(pa.cutUpAtByte, pb.cutUpAtByte);
            QCOMPARE(pa.stallDownAtByte, pb.stallDownAtByte);
            QCOMPARE(pa.bytesPerSecond, pb.bytesPerSecond);
            differs =
                differs || pa.cutDownAtByte != po.cutDownAtByte || pa.cutUpAtByte != po.cutUpAtByte;
        }
        QVERIFY(differs);
        QCOMPARE(a.planFor(8).cutDownAtByte, -1LL);  // past maxFaultyConnections
    }

    void uploadThroughCutsStallsAndSlowness() {
        const std::string blob = makeBlob(600000, 7);
        std::mutex mu;
        std::vector<std::string> received;
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest& q) {
            TestResponse r;
            if (q.beforeBody)
                return r;
            std::lock_guard lock(mu);
            received.push_back(q.body);
            r.body = R"({"sha256":")" + toHex(digestOf(q.body)) + R"("})";
            return r;
        }));
        FaultProxy proxy("127.0.0.1", server.port(), 12);
        QVERIFY(proxy.start().ok());
        FaultPlan cut, stall, slow;
        cut.cutUpAtByte = 250000;
        stall.stallUpAtByte = 100000;
        stall.stallFor = 60000ms;  // ends when the client gives up (low-speed abort)
        slow.bytesPerSecond = 1 << 20;
        proxy.setPlans({cut, stall, slow});
        HttpClientConfig c = baseConfig(proxy.port());
        c.retry.maxAttempts = 5;
        c.lowSpeedBytesPerSecond = 1000;
        c.lowSpeedSeconds = 1;
        std::vector<std::string> kinds;
        int64_t lastDone = 0;
        auto cl = client(c);
        auto r = cl->upload(
            "PUT", "/v1/results/1",
            UploadBody{std::span(reinterpret_cast<const uint8_t*>(blob.data()), blob.size())},
            "application/octet-stream", {{"X-Tandem-Signature", "sig"}},
            [&](const TransferProgress& p) {
                lastDone = p.bytesDone;
                return ProgressAction::Continue;
            });
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(r->body, R"({"sha256":")" + toHex(digestOf(blob)) + R"("})");
        QCOMPARE(lastDone, int64_t(blob.size()));
        QCOMPARE(m_sleeps.size(), size_t(2));  // the cut and the stall, each retried once
        QCOMPARE(proxy.stats().cuts, 1);
        QCOMPARE(proxy.stats().stalls, 1);
        proxy.stop();
        // Only the complete body ever reached the handler complete; nothing partial was accepted.
        std::lock_guard lock(mu);
        QVERIFY(!received.empty());
        QCOMPARE(received.back(), blob);
    }

    void randomFaultsNeverCorruptAnything() {
        // Cuts at random offsets in either direction, short stalls and slowness, drawn from a
        // seed: every download ends with the exact file, every upload reaches the server whole.
        // TANDEM_FAULT_ROUNDS sets the download-and-upload rounds (default 4; the slow soak
        // test_soak_fault_cuts runs 1,000).
        const int rounds = std::max(1, qEnvironmentVariableIntValue("TANDEM_FAULT_ROUNDS") > 0
                                           ? qEnvironmentVariableIntValue("TANDEM_FAULT_ROUNDS")
                                           : 4);
        const std::string blob = makeBlob(250000, 13);
        std::mutex mu;
        std::vector<std::string> uploads;
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest& q) {
            if (q.method == "PUT") {
                TestResponse r;
                if (!q.beforeBody) {
                    std::lock_guard lock(mu);
                    uploads.push_back(q.body);
                    r.body = toHex(digestOf(q.body));
                }
                return r;
            }
            return serveWithRange(q, blob);
        }));
        FaultProxy proxy("127.0.0.1", server.port(), 2026);
        RandomFaults f;
        f.cutProbability = 0.6;
        f.stallProbability = 0.2;
        f.stallFor = 300ms;  // shorter than the low-speed window: a delay, not an abort
        f.slowProbability = 0.2;
        f.slowBytesPerSecond = 2 << 20;
        f.minByte = 0;
        f.maxByte = 260000;
        f.maxFaultyConnections = 10 * rounds;
        proxy.setRandomFaults(f);
        QVERIFY(proxy.start().ok());
        HttpClientConfig c = baseConfig(proxy.port());
        c.retry.maxAttempts = 40;
        auto cl = client(c);
        for (int i = 0; i < rounds; ++i) {
            const auto dest = path(("random" + std::to_string(i) + ".bin").c_str());
            auto d = cl->download({"/f", dest, digestOf(blob), int64_t(blob.size()), {}});
            QVERIFY2(d.ok(), d.ok() ? "" : d.error().message.c_str());
            QCOMPARE(readFile(dest), blob);
            auto u = cl->upload(
                "PUT", "/u",
                UploadBody{std::span(reinterpret_cast<const uint8_t*>(blob.data()), blob.size())},
                "application/octet-stream");
            QVERIFY2(u.ok(), u.ok() ? "" : u.error().message.c_str());
            QCOMPARE(u->body, toHex(digestOf(blob)));
        }
        const FaultProxyStats st = proxy.stats();
        qInfo("%d rounds: %d connections, %d cut, %d stalled; every file and body whole", rounds,
              st.connections, st.cuts, st.stalls);
        QVERIFY(st.cuts > 0);
        proxy.stop();
        std::lock_guard lock(mu);
        for (const auto& body : uploads)
            QCOMPARE(body,
                     blob);  // the server only ever got whole bodies (it reads Content-Length)
    }

    void uploadOfAFileAndEarlyRefusal() {
        const std::string blob = makeBlob(70000, 8);
        writeFile(path("result.bin"), blob);
        std::atomic<int> bodiesRead{0};
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest& q) {
            TestResponse r;
            if (q.path == "/refuse") {
                r.status = 413;
                r.rejectBeforeBody = true;
                r.body = R"({"error":{"code":"too_large","message":"at most 10 bytes"}})";
                return r;
            }
            if (!q.beforeBody) {
                ++bodiesRead;
                r.body = toHex(digestOf(q.body));
            }
            return r;
        }));
        auto cl = client(baseConfig(server.port()));
        auto ok =
            cl->upload("PUT", "/ok", UploadBody{path("result.bin")}, "application/octet-stream");
        QVERIFY2(ok.ok(), ok.ok() ? "" : ok.error().message.c_str());
        QCOMPARE(ok->body, toHex(digestOf(blob)));
        auto refused = cl->upload("PUT", "/refuse", UploadBody{path("result.bin")},
                                  "application/octet-stream");
        QVERIFY(!refused);
        QCOMPARE(refused.error().httpStatus, 413L);
        QCOMPARE(refused.error().apiCode, std::string("too_large"));
        QCOMPARE(bodiesRead.load(), 1);
        auto missing = cl->upload("PUT", "/ok", UploadBody{path("nope.bin")}, "x");
        QVERIFY(!missing);
        QCOMPARE(missing.error().kind, HttpErrorKind::LocalIo);
    }

    void cancelKeepsThePartialForLater() {
        const std::string blob = makeBlob(2000000, 9);
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem,
                             [&](const TestRequest& q) { return serveWithRange(q, blob); }));
        HttpClientConfig c = baseConfig(server.port());
        c.maxRecvBytesPerSecond = 1 << 20;  // so the cancel comes mid-file
        const auto dest = path("paused.bin");
        auto cl = client(c);
        auto r = cl->download({"/f", dest, digestOf(blob), static_cast<int64_t>(blob.size()),
                               [](const TransferProgress& p) {
                                   return p.bytesDone > 100000 ? ProgressAction::Cancel
                                                               : ProgressAction::Continue;
                               }});
        QVERIFY(!r);
        QCOMPARE(r.error().kind, HttpErrorKind::Cancelled);
        const auto partSize = std::filesystem::file_size(dest.string() + ".part");
        QVERIFY(partSize > 0 && partSize < blob.size());
        QCOMPARE(readFile(dest.string() + ".part"), blob.substr(0, partSize));
        cl->setRateLimits(0, 0);
        auto resumed =
            cl->download({"/f", dest, digestOf(blob), static_cast<int64_t>(blob.size()), {}});
        QVERIFY2(resumed.ok(), resumed.ok() ? "" : resumed.error().message.c_str());
        QCOMPARE(resumed->resumedFrom, int64_t(partSize));
        QCOMPARE(readFile(dest), blob);
    }

    void rangedDownloadResumesAndSurvivesAServerIgnoringRange() {
        const std::string blob = makeBlob(300000, 10);
        const std::string want = blob.substr(100000, 50000);
        std::atomic<bool> ignoreRange{false};
        Guarded<std::string> rangeSeen;
        TlsTestServer server;
        QVERIFY(server.start(m_id.certificatePem, m_id.privateKeyPem, [&](const TestRequest& q) {
            rangeSeen.set(q.header("range"));
            if (ignoreRange) {
                TestResponse r;
                r.body = blob;
                return r;
            }
            return serveWithRange(q, blob);
        }));
        auto cl = client(baseConfig(server.port()));
        DownloadRequest req{"/shard", path("range.bin"), digestOf(want), 50000, {}, 100000};
        writeFile(path("range.bin.part"), want.substr(0, 20000));
        auto r = cl->download(req);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(rangeSeen.get(), std::string("bytes=120000-149999"));
        QCOMPARE(readFile(path("range.bin")), want);
        // The server answers 200 with the whole shard: the range is cut out of it.
        ignoreRange = true;
        req.destination = path("range2.bin");
        writeFile(path("range2.bin.part"), want.substr(0, 1000));
        auto r2 = cl->download(req);
        QVERIFY2(r2.ok(), r2.ok() ? "" : r2.error().message.c_str());
        QCOMPARE(readFile(path("range2.bin")), want);
    }
};

QTEST_APPLESS_MAIN(TestNetHttpTransfer)
#include "test_net_http_transfer.moc"
