// The HTTPS API over real TLS on 127.0.0.1: every endpoint's happy path and each refusal, with
// checks that a refusal changed nothing.
#include "api_helpers.hpp"
#include "harness.hpp"

#include "checkpoint.hpp"
#include "codec.hpp"
#include "sqlite.hpp"
#include "validation_loss.hpp"

#include <QFile>
#include <QtTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <thread>

using namespace tandem;
using namespace tandem::testing;

namespace {

int64_t totalTokens(TestCoordinator& t) {
    return t.coordinator().status().totalTokens;
}

// Sends the request line, headers and only `bodyBytes` of the body, then closes: a cut upload.
void sendTruncated(int port, const std::string& token, int64_t wu, const BuiltResult& r,
                   size_t bodyBytes) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        SSL* ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_connect(ssl) == 1) {
            std::string head = "PUT /v1/results/" + std::to_string(wu) +
                               " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                               "\r\nX-Tandem-Signature: " + r.signature +
                               "\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
                               std::to_string(r.body.size()) + "\r\n\r\n";
            SSL_write(ssl, head.data(), int(head.size()));
            SSL_write(ssl, r.body.data(), int(bodyBytes));
            SSL_shutdown(ssl);
        }
        SSL_free(ssl);
    }
    ::close(fd);
    SSL_CTX_free(ctx);
}

// Sends only the request head with "Expect: 100-continue" and returns the status line that comes
// back before any body byte was sent.
std::string expectContinue(int port, const std::string& token, int64_t wu, const BuiltResult& r) {
    std::string line;
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        SSL* ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_connect(ssl) == 1) {
            std::string head =
                "PUT /v1/results/" + std::to_string(wu) +
                " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                "\r\nX-Tandem-Signature: " + r.signature +
                "\r\nExpect: 100-continue\r\nContent-Length: " + std::to_string(r.body.size()) +
                "\r\n\r\n";
            SSL_write(ssl, head.data(), int(head.size()));
            char buf[256];
            int n = SSL_read(ssl, buf, sizeof buf);
            if (n > 0)
                line.assign(buf, size_t(n));
            line = line.substr(0, line.find("\r\n"));
        }
        SSL_free(ssl);
    }
    ::close(fd);
    SSL_CTX_free(ctx);
    return line;
}

}  // namespace

class TestCoordinatorApi : public QObject {
    Q_OBJECT
  private slots:
    void registerAndStatus() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto c = t.registerClient("alice");
        QVERIFY(c.id > 0);
        QCOMPARE(c.token.size(), size_t(64));
        auto http = t.connect();
        auto bad = http->Post("/v1/clients", "{\"name\": 3}", "application/json");
        QVERIFY(bad);
        QCOMPARE(bad->status, 400);
        QCOMPARE(errorCode(bad), std::string("bad_request"));
        QVERIFY(contains(bad->body, "'name' must be a string"));
        auto notJson = http->Post("/v1/clients", "name=alice", "application/json");
        QCOMPARE(notJson->status, 400);
        auto st = http->Get("/v1/status");
        QVERIFY(st);
        QCOMPARE(st->status, 200);
        auto s = net::RunStatus::fromJson(st->body);
        QVERIFY2(s.ok(), st->body.c_str());
        QCOMPARE(s->round, 0);
        QCOMPARE(s->model, t.coordinator().model());
        QVERIFY(s->history.empty());
        auto none = http->Get("/v1/nothing");
        QCOMPARE(none->status, 404);
        QCOMPARE(errorCode(none), std::string("not_found"));
        auto big = http->Post("/v1/clients", std::string(100000, ' '), "application/json");
        QVERIFY(big);
        QCOMPARE(big->status, 413);
        QCOMPARE(errorCode(big), std::string("too_large"));
        // Request heads are bounded (cpp-httplib: 8 KiB per line); the server goes on.
        auto hugeHeader = http->Get("/v1/status", {{"X-Padding", std::string(20000, 'a')}});
        QVERIFY(!hugeHeader || hugeHeader->status >= 400);
        QCOMPARE(t.connect()->Get("/v1/status")->status, 200);
        // The pin printed for workers is the certificate's.
        QVERIFY(t.tls().pin.rfind("sha256//", 0) == 0);
    }

    void generatedCertificateNames() {
        QTemporaryDir dir;
        coord::ServerConfig sc;
        sc.host = "10.1.2.3";
        sc.extraNames = {"coordinator.example"};
        auto tls = coord::ensureTlsIdentity(dir.path().toStdString(), sc);
        QVERIFY(tls.ok());
        QVERIFY(tls->generated);
        FILE* f = std::fopen(tls->cert.c_str(), "rb");
        QVERIFY(f);
        X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
        std::fclose(f);
        QVERIFY(cert);
        QCOMPARE(X509_check_host(cert, "coordinator.example", 0, 0, nullptr), 1);
        QCOMPARE(X509_check_host(cert, "localhost", 0, 0, nullptr), 1);
        QCOMPARE(X509_check_ip_asc(cert, "10.1.2.3", 0), 1);
        QCOMPARE(X509_check_ip_asc(cert, "127.0.0.1", 0), 1);
        QCOMPARE(X509_check_host(cert, "other.example", 0, 0, nullptr), 0);
        X509_free(cert);
        // The second start reuses the identity, and the pin file holds the pin.
        auto again = coord::ensureTlsIdentity(dir.path().toStdString(), sc);
        QVERIFY(!again->generated);
        QCOMPARE(again->pin, tls->pin);
        std::ifstream pinFile((dir.path() + "/tls/pin.txt").toStdString());
        std::string line;
        std::getline(pinFile, line);
        QCOMPARE(line, tls->pin);
        QFile key(QString::fromStdString(tls->key.string()));
        QCOMPARE(key.permissions() & (QFile::ReadGroup | QFile::ReadOther), QFile::Permissions());
    }

    void downloadsWithRanges() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto c = t.registerClient("alice");
        auto m = requestWork(c);
        auto full = c.http->Get(m.weightsUrl.c_str(), c.auth());
        QVERIFY(full);
        QCOMPARE(full->status, 200);
        const std::string& body = full->body;
        QCOMPARE(int64_t(body.size()), m.weightsBytes);
        QCOMPARE(net::sha256(body), m.weightsSha256);
        QCOMPARE(full->get_header_value("ETag"), "\"" + net::toHex(m.weightsSha256) + "\"");
        auto ck =
            parseCheckpoint(std::span(reinterpret_cast<const uint8_t*>(body.data()), body.size()));
        QVERIFY(ck.ok());
        QCOMPARE(ck->config, t.coordinator().model());
        QCOMPARE(ck->parameters, t.coordinator().weights());
        const int64_t n = m.weightsBytes;

        auto range = [&](const std::string& r) {
            httplib::Headers h = c.auth();
            h.emplace("Range", r);
            return c.http->Get(m.weightsUrl.c_str(), h);
        };
        auto first = range("bytes=0-99");
        QCOMPARE(first->status, 206);
        QCOMPARE(first->body, body.substr(0, 100));
        QCOMPARE(first->get_header_value("Content-Range"), "bytes 0-99/" + std::to_string(n));
        auto middle = range("bytes=1000-1999");
        QCOMPARE(middle->body, body.substr(1000, 1000));
        auto open = range("bytes=" + std::to_string(n - 5) + "-");
        QCOMPARE(open->status, 206);
        QCOMPARE(open->body, body.substr(size_t(n - 5)));
        auto suffix = range("bytes=-10");
        QCOMPARE(suffix->status, 206);
        QCOMPARE(suffix->body, body.substr(size_t(n - 10)));
        auto clamped = range("bytes=" + std::to_string(n - 3) + "-" + std::to_string(n + 100));
        QCOMPARE(clamped->status, 206);
        QCOMPARE(clamped->body.size(), size_t(3));
        QCOMPARE(clamped->get_header_value("Content-Range"), "bytes " + std::to_string(n - 3) +
                                                                 "-" + std::to_string(n - 1) + "/" +
                                                                 std::to_string(n));
        auto last = range("bytes=" + std::to_string(n - 1) + "-" + std::to_string(n - 1));
        QCOMPARE(last->body, body.substr(size_t(n - 1)));
        auto beyond = range("bytes=" + std::to_string(n) + "-");
        QCOMPARE(beyond->status, 416);
        QCOMPARE(beyond->get_header_value("Content-Range"), "bytes */" + std::to_string(n));
        QCOMPARE(errorCode(beyond), std::string("range_not_satisfiable"));
        auto emptySuffix = range("bytes=-0");
        QCOMPARE(emptySuffix->status, 416);
        // cpp-httplib answers a syntactically invalid range with 416 before routing.
        auto backwards = range("bytes=50-10");
        QCOMPARE(backwards->status, 416);
        QCOMPARE(errorCode(backwards), std::string("range_not_satisfiable"));
        auto several = range("bytes=0-1,5-6");  // several ranges: the whole file
        QCOMPARE(several->status, 200);
        QCOMPARE(several->body.size(), body.size());

        httplib::Headers h = c.auth();
        h.emplace("If-None-Match", full->get_header_value("ETag"));
        auto cached = c.http->Get(m.weightsUrl.c_str(), h);
        QCOMPARE(cached->status, 304);

        auto unknown = c.http->Get("/v1/runs/1/weights/7", c.auth());
        QCOMPARE(unknown->status, 404);
        QCOMPARE(errorCode(unknown), std::string("unknown_version"));
        auto otherRun = c.http->Get("/v1/runs/2/weights/0", c.auth());
        QCOMPARE(otherRun->status, 404);
        auto anonymous = t.connect()->Get(m.weightsUrl.c_str());
        QCOMPARE(anonymous->status, 401);

        // The data range named by the manifest has the manifest's SHA-256.
        httplib::Headers dh = c.auth();
        dh.emplace("Range", "bytes=" + std::to_string(m.dataOffset) + "-" +
                                std::to_string(m.dataOffset + m.dataLength - 1));
        auto data = c.http->Get(m.dataUrl.c_str(), dh);
        QCOMPARE(data->status, 206);
        QCOMPARE(int64_t(data->body.size()), m.dataLength);
        QCOMPARE(net::sha256(data->body), m.dataSha256);
        auto shard = c.http->Get("/v1/runs/1/data/3", c.auth());
        QCOMPARE(shard->status, 404);
        QCOMPARE(errorCode(shard), std::string("unknown_shard"));
    }

    void uploadAcceptedOnceAndIdempotent() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto m = requestWork(a);
        const int64_t P = t.coordinator().parameterCount();
        auto r = buildResult(m, smallDelta(P), a.key);
        auto res = upload(a, m.workUnitId, r);
        QVERIFY(res);
        QCOMPARE(res->status, 200);
        auto receipt = net::Receipt::fromJson(res->body);
        QVERIFY2(receipt.ok(), res->body.c_str());
        QVERIFY(receipt->verify(t.coordinator().publicKey()));
        QCOMPARE(receipt->workUnitId, m.workUnitId);
        QCOMPARE(receipt->clientId, a.id);
        QCOMPARE(receipt->round, 0);
        QCOMPARE(receipt->weight, double(r.header.tokens));
        QCOMPARE(receipt->resultDigest, net::resultDigest(r.header));
        QCOMPARE(totalTokens(t), r.header.tokens);

        auto again = upload(a, m.workUnitId, r);  // a retry after a lost answer
        QVERIFY(again);
        QCOMPARE(again->status, 200);
        QCOMPARE(again->body, res->body);
        QCOMPARE(totalTokens(t), r.header.tokens);

        auto different = buildResult(m, smallDelta(P, 2.0f), a.key);
        auto dup = upload(a, m.workUnitId, different);
        QCOMPARE(dup->status, 409);
        QCOMPARE(errorCode(dup), std::string("duplicate"));
        QCOMPARE(totalTokens(t), r.header.tokens);
        // The connection was closed after the unread body; the client goes on.
        QCOMPARE(a.http->Get("/v1/status")->status, 200);

        auto hb = a.http->Post(("/v1/work/" + std::to_string(m.workUnitId) + "/progress").c_str(),
                               a.auth(), net::ProgressReport{1, 1, 1}.toJson(), "application/json");
        QCOMPARE(net::ProgressReply::fromJson(hb->body)->action, std::string("abandon"));
    }

    void uploadRefusalsChangeNothing() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        auto m = requestWork(a);
        const int64_t P = t.coordinator().parameterCount();
        auto good = buildResult(m, smallDelta(P), a.key);
        const auto weightsBefore = t.coordinator().weights();

        auto expect = [&](const httplib::Result& res, int status, const std::string& code,
                          const std::string& part = "") {
            QVERIFY2(res, "no response");
            QCOMPARE(res->status, status);
            QCOMPARE(errorCode(res), code);
            if (!part.empty())
                QVERIFY2(contains(res->body, part), res->body.c_str());
            QCOMPARE(totalTokens(t), int64_t(0));
        };
        {
            auto http = t.connect();
            auto res = http->Put(("/v1/results/" + std::to_string(m.workUnitId)).c_str(),
                                 reinterpret_cast<const char*>(good.body.data()), good.body.size(),
                                 "application/octet-stream");
            expect(res, 401, "unauthorized");
        }
        expect(upload(a, 999999, good), 404, "unknown_work_unit");
        expect(upload(b, m.workUnitId, good), 403, "not_your_work_unit");
        expect(upload(a, m.workUnitId, good, ""), 400, "bad_signature", "missing");
        expect(upload(a, m.workUnitId, good, "abc"), 400, "bad_signature");
        auto signedByB = good;
        signedByB.signature = net::toBase64(b.key.sign(net::resultDigest(good.header)));
        expect(upload(a, m.workUnitId, signedByB), 403, "bad_signature", "does not verify");

        auto shorter = good;
        shorter.body.resize(shorter.body.size() - 2);
        expect(upload(a, m.workUnitId, shorter), 400, "wrong_size", "exactly");
        auto longer = good;
        longer.body.resize(longer.body.size() + 2);
        expect(upload(a, m.workUnitId, longer), 413, "too_large");

        auto withHeader = [&](auto edit) {
            auto r = good;
            net::ResultHeader h = r.header;
            edit(h);
            auto head = net::serializeResultHeader(h);
            std::copy(head.begin(), head.end(), r.body.begin());
            r.signature = net::toBase64(a.key.sign(net::sha256(std::span<const uint8_t>(head))));
            return r;
        };
        expect(upload(a, m.workUnitId,
                      withHeader([&](net::ResultHeader& h) { h.parameterCount = P - 1; })),
               422, "wrong_size", std::to_string(P));
        expect(upload(a, m.workUnitId,
                      withHeader([&](net::ResultHeader& h) { h.workUnitId = m.workUnitId + 1; })),
               400, "bad_header", "sent to /v1/results/");
        expect(
            upload(a, m.workUnitId, withHeader([&](net::ResultHeader& h) { h.tokens = 1 << 30; })),
            422, "bad_header", "allows at most");
        expect(
            upload(a, m.workUnitId, withHeader([&](net::ResultHeader& h) { h.formatVersion = 9; })),
            400, "bad_header", "version 9");
        auto badMagic = good;
        badMagic.body[0] = 'X';
        expect(upload(a, m.workUnitId, badMagic), 400, "bad_header", "magic");

        auto nanDelta = smallDelta(P);
        nanDelta[size_t(P / 2)] = 0x7e00;  // NaN
        expect(upload(a, m.workUnitId, buildResult(m, nanDelta, a.key)), 422, "non_finite", "NaN");
        auto infDelta = smallDelta(P);
        infDelta[0] = 0x7c00;  // +Inf
        expect(upload(a, m.workUnitId, buildResult(m, infDelta, a.key)), 422, "non_finite");

        auto damaged = good;
        damaged.body[net::kResultHeaderBytes + 10] ^= 0x01;
        expect(upload(a, m.workUnitId, damaged), 422, "digest_mismatch");

        // A body cut short by the network: nothing counted, and the upload slot comes back.
        sendTruncated(t.port(), a.token, m.workUnitId, good, good.body.size() / 2);
        auto res = upload(a, m.workUnitId, good);
        for (int i = 0; i < 200 && res && errorCode(res) == "upload_in_progress"; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            res = upload(a, m.workUnitId, good);
        }
        QCOMPARE(t.coordinator().weights(), weightsBefore);
        // ... and the good result is still accepted afterwards: the refusals left no trace.
        QVERIFY(res);
        QCOMPARE(res->status, 200);
        QCOMPARE(totalTokens(t), good.header.tokens);
        auto log = t.log();
        QVERIFY(std::count_if(log.begin(), log.end(), [](const std::string& l) {
                    return contains(l, "accepted into round");
                }) == 1);
    }

    void expectContinueRefusesBeforeTheBody() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        auto m = requestWork(a);
        auto good = buildResult(m, smallDelta(t.coordinator().parameterCount()), a.key);
        QCOMPARE(expectContinue(t.port(), a.token, m.workUnitId, good),
                 std::string("HTTP/1.1 100 Continue"));
        QCOMPARE(expectContinue(t.port(), b.token, m.workUnitId, good),
                 std::string("HTTP/1.1 403 Forbidden"));
        QCOMPARE(expectContinue(t.port(), "wrong", m.workUnitId, good),
                 std::string("HTTP/1.1 401 Unauthorized"));
        QCOMPARE(expectContinue(t.port(), a.token, 424242, good),
                 std::string("HTTP/1.1 404 Not Found"));
        // The dry run took no upload slot: the real upload goes through.
        QCOMPARE(upload(a, m.workUnitId, good)->status, 200);
    }

    void uploadSlotsAreBounded() {
        auto cfg = smallConfig();
        cfg.maxUploadsPerClient = 1;
        cfg.maxConcurrentUploads = 2;
        TestCoordinator t(cfg);
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        auto c = t.registerClient("c");
        auto& co = t.coordinator();
        auto ma1 = requestWork(a), ma2 = requestWork(a), mb = requestWork(b), mc = requestWork(c);
        const int64_t P = co.parameterCount();
        const int64_t size = co.maxUploadBytes();
        auto sig = buildResult(ma1, smallDelta(P), a.key).signature;
        auto noLength = co.beginUpload(a.id, ma1.workUnitId, -1, sig);
        QVERIFY(!noLength.ok());
        QCOMPARE(noLength.refusal().httpStatus, 411);
        // Sessions held open stand for uploads in progress.
        auto first = co.beginUpload(a.id, ma1.workUnitId, size, sig);
        QVERIFY(first.ok());
        auto same = co.beginUpload(a.id, ma1.workUnitId, size, sig);
        QCOMPARE(same.refusal().code, std::string("upload_in_progress"));
        auto perClient = co.beginUpload(a.id, ma2.workUnitId, size, sig);
        QCOMPARE(perClient.refusal().httpStatus, 429);
        QCOMPARE(perClient.refusal().code, std::string("too_many_uploads"));
        QVERIFY(perClient.refusal().retryAfterSeconds > 0);
        auto second = co.beginUpload(b.id, mb.workUnitId, size, sig);
        QVERIFY(second.ok());
        auto busy = co.beginUpload(c.id, mc.workUnitId, size, sig);
        QCOMPARE(busy.refusal().httpStatus, 503);
        QCOMPARE(busy.refusal().code, std::string("busy"));
        // Over HTTP the refusal carries Retry-After.
        auto res = upload(c, mc.workUnitId, buildResult(mc, smallDelta(P), c.key));
        QCOMPARE(res->status, 503);
        QVERIFY(!res->get_header_value("Retry-After").empty());
        // Ending sessions frees the slots.
        first.value().reset();
        second.value().reset();
        QCOMPARE(upload(c, mc.workUnitId, buildResult(mc, smallDelta(P), c.key))->status, 200);
        QCOMPARE(upload(a, ma2.workUnitId, buildResult(ma2, smallDelta(P), a.key))->status, 200);
    }

    void oneCoordinatorPerStateDirectory() {
        TestCoordinator t(smallConfig(), false);
        QVERIFY2(t.ok(), t.error().c_str());
        auto cfg = smallConfig();
        cfg.stateDir = t.stateDir();
        auto second = coord::Coordinator::open(cfg, nullptr);
        QVERIFY(!second.ok());
        QVERIFY2(contains(second.error().message, "another tandem-coordinator"),
                 second.error().message.c_str());
        t.close();
        auto third = coord::Coordinator::open(cfg, nullptr);
        QVERIFY2(third.ok(), third.ok() ? "" : third.error().message.c_str());
    }

    void refusesANewerDatabase() {
        auto cfg = smallConfig();
        TestCoordinator t(cfg, false);
        QVERIFY2(t.ok(), t.error().c_str());
        t.close();
        {
            auto db = coord::Database::open(t.stateDir() / "coordinator.db");
            QVERIFY(db.ok());
            QVERIFY(db->exec("PRAGMA user_version = 99").ok());
        }
        t.open();
        QVERIFY(!t.ok());
        QVERIFY2(contains(t.error(), "schema version 99 is newer"), t.error().c_str());
    }

    void outlierNormRefused() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        const int64_t P = t.coordinator().parameterCount();
        auto ma = requestWork(a);
        auto mb = requestWork(b);
        QCOMPARE(upload(a, ma.workUnitId, buildResult(ma, smallDelta(P), a.key))->status, 200);
        const int64_t tokens = totalTokens(t);
        auto res = upload(b, mb.workUnitId, buildResult(mb, smallDelta(P, 12.0f), b.key));
        QCOMPARE(res->status, 422);
        QCOMPARE(errorCode(res), std::string("outlier_norm"));
        QVERIFY(contains(res->body, "times the reference"));
        QCOMPARE(totalTokens(t), tokens);
        // The refusal ended the unit; within the bound (5x the median with the default ratio 10)
        // a result of the next one is accepted.
        QCOMPARE(upload(b, mb.workUnitId, buildResult(mb, smallDelta(P, 5.0f), b.key))->status,
                 409);
        auto mb2 = requestWork(b);
        QCOMPARE(upload(b, mb2.workUnitId, buildResult(mb2, smallDelta(P, 5.0f), b.key))->status,
                 200);
    }

    void staleResults() {
        auto cfg = smallConfig();
        cfg.quorum = 1;
        cfg.staleWeightFactor = 0.5;
        TestCoordinator t(cfg);
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        auto c = t.registerClient("c");
        const int64_t P = t.coordinator().parameterCount();
        auto wu1 = requestWork(a);  // version 0
        auto wu2 = requestWork(b);  // version 0
        QCOMPARE(upload(b, wu2.workUnitId, buildResult(wu2, smallDelta(P), b.key))->status, 200);
        QCOMPARE(t.coordinator().currentVersion(), 1);
        auto wu3 = requestWork(a);  // version 1
        auto wu4 = requestWork(c);  // version 1
        QCOMPARE(wu3.baseVersion, 1);
        QCOMPARE(upload(c, wu4.workUnitId, buildResult(wu4, smallDelta(P), c.key))->status, 200);
        QCOMPARE(t.coordinator().currentVersion(), 2);

        const int64_t tokens = totalTokens(t);
        auto stale = upload(a, wu1.workUnitId, buildResult(wu1, smallDelta(P), a.key));
        QCOMPARE(stale->status, 409);
        QCOMPARE(errorCode(stale), std::string("stale"));
        QVERIFY(contains(stale->body, "version 0"));
        QCOMPARE(totalTokens(t), tokens);
        auto hb = a.http->Post(("/v1/work/" + std::to_string(wu1.workUnitId) + "/progress").c_str(),
                               a.auth(), net::ProgressReport{1, 1, 1}.toJson(), "application/json");
        QCOMPARE(net::ProgressReply::fromJson(hb->body)->action, std::string("abandon"));

        // One version old: accepted with half the weight.
        auto r3 = buildResult(wu3, smallDelta(P), a.key);
        auto ok = upload(a, wu3.workUnitId, r3);
        QCOMPARE(ok->status, 200);
        auto receipt = net::Receipt::fromJson(ok->body);
        QCOMPARE(receipt->round, 2);
        QCOMPARE(receipt->weight, 0.5 * double(r3.header.tokens));

        t.coordinator().waitForValidation();
        auto status = t.coordinator().status();
        QCOMPARE(status.round, 3);
        QCOMPARE(status.history.size(), size_t(3));
        std::ifstream in(t.stateDir() / "data" / "validation.bin", std::ios::binary);
        const std::vector<uint8_t> text{std::istreambuf_iterator<char>(in), {}};
        for (const auto& h : status.history) {
            QCOMPARE(h.contributors, 1);
            QVERIFY(h.valLoss.has_value());
            QVERIFY(std::isfinite(*h.valLoss));
            // Exactly the loss of the weights the round published (the function alone is checked
            // against ln 256 in test_coordinator_validation).
            auto published = loadCheckpoint(
                t.stateDir() / "weights" / ("v" + std::to_string(h.round + 1) + ".ckpt"),
                t.coordinator().model());
            QVERIFY(published);
            auto loss =
                coord::validationLoss(t.coordinator().model(), published->parameters, text,
                                      cfg.validationBatches, cfg.validationBatch, cfg.threads);
            QVERIFY(loss);
            QCOMPARE(*h.valLoss, *loss);
        }
    }

    void speedTest() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto http = t.connect();
        auto down = http->Get("/v1/speedtest?bytes=100000");
        QCOMPARE(down->status, 200);
        QCOMPARE(down->body.size(), size_t(100000));
        auto dflt = http->Get("/v1/speedtest");
        QCOMPARE(dflt->body.size(), size_t(1 << 20));
        auto bad = http->Get("/v1/speedtest?bytes=lots");
        QCOMPARE(bad->status, 400);
        auto huge = http->Get("/v1/speedtest?bytes=999999999");
        QCOMPARE(huge->status, 400);
        QVERIFY(contains(huge->body, "exceeds the limit"));
        auto up = http->Post("/v1/speedtest", std::string(50000, 'x'), "application/octet-stream");
        QCOMPARE(up->status, 200);
        QVERIFY(contains(up->body, "\"bytes\":50000"));
        auto tooBig = http->Post("/v1/speedtest", std::string((1 << 20) + 1, 'x'),
                                 "application/octet-stream");
        QVERIFY(tooBig);
        QCOMPARE(tooBig->status, 413);
    }
};

QTEST_APPLESS_MAIN(TestCoordinatorApi)
#include "test_coordinator_api.moc"
