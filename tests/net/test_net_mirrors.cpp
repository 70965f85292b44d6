// Content-addressed downloads through the real nginx (Debian's nginx-light), started here on
// 127.0.0.1 with the shipped configurations of installer/nginx/: an origin serving the
// coordinator's <state-dir>/blobs as the coordinator does (ETag = SHA-256, Range, immutable), a
// caching mirror of the coordinator (proxy_cache + slice: a second read is a cache hit), and a
// mirror serving corrupted bytes. The worker's client takes a tandem-coordinator's signed
// version 4 manifest (its own blob path, then the --mirror URLs), rejects the corrupted bytes
// and falls back to the next URL, trusts mirrors by their own CA (never by the coordinator's
// pin; the server a front end's manifest names for uploads is the coordinator's own and trusted
// with it), and orders URLs by measured speed. Skipped, saying why, where nginx is not installed.
#include "coordinator_client.hpp"
#include "file_io.hpp"
#include "nginx_process.hpp"

#include <httplib.h>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <fstream>

using namespace tandem;
using namespace tandem::net;
using namespace tandem::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string readText(const fs::path& p) {
    auto bytes = readFile(p);
    return bytes ? std::string(bytes->begin(), bytes->end()) : std::string();
}

void writeText(const fs::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
}

}  // namespace

class TestNetMirrors : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    QProcess m_proc;
    std::optional<fs::path> m_nginx;
    int m_port = 0, m_originPort = 0, m_mirrorPort = 0, m_badPort = 0;
    std::string m_pin;
    fs::path m_state;
    std::unique_ptr<NginxProcess> m_origin, m_mirror, m_bad;
    Manifest m_manifest;

    fs::path path(const std::string& name) const {
        return fs::path(m_dir.path().toStdString()) / name;
    }
    std::string mirrorUrl(int port) const { return "https://127.0.0.1:" + std::to_string(port); }

    HttpClientConfig config(bool trustMirrors = true) {
        HttpClientConfig c;
        c.baseUrl = mirrorUrl(m_port);
        c.pinnedPublicKey = m_pin;
        if (trustMirrors)
            c.mirrorCaFile = path("mirror-cert.pem");
        c.proxy = "direct";
        c.connectTimeout = 5000ms;
        c.retry.maxAttempts = 3;
        c.sleep = [](std::chrono::milliseconds) {};
        return c;
    }
    std::unique_ptr<CoordinatorClient> client(bool trustMirrors = true) {
        auto r = CoordinatorClient::create(config(trustMirrors));
        return r ? std::move(r.value()) : nullptr;
    }
    std::unique_ptr<httplib::SSLClient> raw(int port) {
        auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", port);
        c->set_ca_cert_path(path("mirror-cert.pem").c_str());
        c->enable_server_certificate_verification(true);
        c->set_read_timeout(20, 0);
        return c;
    }

    // installer/nginx/<name> with its placeholders filled.
    std::unique_ptr<NginxProcess> nginx(const std::string& file, const std::string& instance,
                                        int port, std::map<std::string, std::string> values) {
        values["LISTEN"] = "127.0.0.1:" + std::to_string(port);
        values["TLS_CERT"] = path("mirror-cert.pem").string();
        values["TLS_KEY"] = path("mirror-key.pem").string();
        auto block = fillPlaceholders(
            readText(fs::path(TANDEM_SOURCE_DIR) / "installer" / "nginx" / file), values);
        if (!block) {
            qWarning("%s", block.error().message.c_str());
            return nullptr;
        }
        fs::create_directories(path(instance));
        auto n = std::make_unique<NginxProcess>(*m_nginx, path(instance), *block, port);
        if (auto st = n->start(); !st) {
            qWarning("%s", st.error().message.c_str());
            return nullptr;
        }
        return n;
    }

    // The same blobs with one byte changed (inside the unit's data range for the shard).
    void writeCorruptCopy(const Manifest& m) {
        const fs::path dir = path("corrupt") / "blobs" / "sha256";
        fs::create_directories(dir);
        const std::string w = m.weightsUrls[0].substr(14), d = m.dataUrls[0].substr(14);
        std::string weights = readText(m_state / "blobs" / "sha256" / w);
        weights[weights.size() / 2] ^= 0x01;
        writeText(dir / w, weights);
        std::string shard = readText(m_state / "blobs" / "sha256" / d);
        shard[static_cast<size_t>(m.dataByteOffset() + m.dataByteLength() / 2)] ^= 0x01;
        writeText(dir / d, shard);
    }

  private slots:
    void initTestCase() {
        std::signal(SIGPIPE, SIG_IGN);
        m_nginx = findNginx();
        if (!m_nginx)
            QSKIP(
                "nginx is not installed (Debian: apt-get install nginx-light, as scripts/setup "
                "does): the mirror tests need the real server");
        // The mirrors' own TLS identity, unrelated to the coordinator's.
        QProcess openssl;
        openssl.start("openssl",
                      {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                       "-nodes", "-keyout", QString::fromStdString(path("mirror-key.pem")), "-out",
                       QString::fromStdString(path("mirror-cert.pem")), "-days", "2", "-subj",
                       "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"});
        QVERIFY(openssl.waitForFinished(30000));
        QVERIFY2(openssl.exitCode() == 0, openssl.readAllStandardError().constData());

        m_originPort = freeLoopbackPort();
        m_mirrorPort = freeLoopbackPort();
        m_badPort = freeLoopbackPort();
        m_state = path("state");
        {
            std::ofstream out(path("corpus.txt"));
            const char* words[] = {"the quick ", "brown fox ", "jumps over ", "lazy dogs\n"};
            for (int i = 0; i < 40000; ++i)
                out << words[(i * 7 + i / 3) % 4];
        }
        m_proc.setProgram(TANDEM_COORDINATOR_BIN);
        m_proc.setArguments({"--listen",       "127.0.0.1:0",
                             "--state-dir",    QString::fromStdString(m_state.string()),
                             "--corpus",       QString::fromStdString(path("corpus.txt").string()),
                             "--model",        "L=2,NH=4,C=64,T=32",
                             "--inner-steps",  "8",
                             "--batch",        "4",
                             "--quorum",       "4",
                             "--threads",      "1",
                             "--http-threads", "8",
                             "--mirror",       QString::fromStdString(mirrorUrl(m_mirrorPort)),
                             "--mirror",       QString::fromStdString(mirrorUrl(m_badPort) + "/")});
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

        auto c = client();
        QVERIFY(c);
        QVERIFY(c->registerClient({"mirrors", SigningKey::generate()->publicKey(), "test"}).ok());
        auto offer = c->requestWork(WorkRequest{"cpu", 1 << 30, 0, 1 << 30});
        QVERIFY2(offer.ok(), offer.ok() ? "" : offer.error().message.c_str());
        QVERIFY(offer->manifest);
        m_manifest = *offer->manifest;
        writeCorruptCopy(m_manifest);

        m_origin = nginx("tandem-blobs-origin.conf", "origin", m_originPort,
                         {{"STATE_DIR", m_state.string()}});
        QVERIFY(m_origin);
        m_mirror = nginx("tandem-blobs-mirror.conf", "mirror", m_mirrorPort,
                         {{"CACHE_DIR", path("mirror-cache").string()},
                          {"CACHE_SIZE", "1g"},
                          {"ORIGIN", mirrorUrl(m_port)},
                          {"ORIGIN_NAME", "localhost"},
                          {"ORIGIN_CA", (m_state / "tls" / "cert.pem").string()}});
        QVERIFY(m_mirror);
        m_bad = nginx("tandem-blobs-origin.conf", "bad", m_badPort,
                      {{"STATE_DIR", path("corrupt").string()}});
        QVERIFY(m_bad);
    }
    void cleanupTestCase() {
        m_origin.reset();
        m_mirror.reset();
        m_bad.reset();
        m_proc.terminate();
        m_proc.waitForFinished(10000);
    }

    void signedManifestListsOwnThenMirrors() {
        const Manifest& m = m_manifest;
        QVERIFY(m.protocol >= 4);  // version 4 and later list blob URLs
        const std::string w = "/blobs/sha256/" + toHex(m.weightsSha256);
        QCOMPARE(m.weightsUrls, (std::vector<std::string>{w, mirrorUrl(m_mirrorPort) + w,
                                                          mirrorUrl(m_badPort) + w}));
        QCOMPARE(m.dataUrls.size(), size_t{3});
    }

    // The shipped origin configuration answers as the coordinator's own route does.
    void originServesBlobsAsTheCoordinatorDoes() {
        const Manifest& m = m_manifest;
        auto origin = raw(m_originPort);
        auto res = origin->Get(m.weightsUrls[0]);
        QVERIFY(res);
        QCOMPARE(res->status, 200);
        QCOMPARE(sha256(res->body), m.weightsSha256);
        QCOMPARE(res->get_header_value("ETag"), "\"" + toHex(m.weightsSha256) + "\"");
        QCOMPARE(res->get_header_value("Cache-Control"),
                 std::string("public, max-age=31536000, immutable"));
        // A resume: Range with If-Range of that ETag is honoured.
        auto part = origin->Get(m.weightsUrls[0], {{"Range", "bytes=100-"},
                                                   {"If-Range", res->get_header_value("ETag")}});
        QVERIFY(part);
        QCOMPARE(part->status, 206);
        QCOMPARE(part->body, res->body.substr(100));
        const std::string range = "bytes=" + std::to_string(m.dataByteOffset()) + "-" +
                                  std::to_string(m.dataByteOffset() + m.dataByteLength() - 1);
        auto data = origin->Get(m.dataUrls[0], {{"Range", range}});
        QVERIFY(data);
        QCOMPARE(data->status, 206);
        QCOMPARE(sha256(data->body), m.dataSha256);
        auto bad = origin->Get("/blobs/sha256/" + std::string(64, 'A'));
        QVERIFY(bad && bad->status == 400);
        QVERIFY(bad->body.find("bad_blob_name") != std::string::npos);
        auto unknown = origin->Get("/blobs/sha256/" + std::string(64, 'a'));
        QVERIFY(unknown && unknown->status == 404);
        auto outside = origin->Get("/coordinator.db");
        QVERIFY(outside && outside->status == 404);
        QVERIFY(outside->body.find("SQLite") == std::string::npos);
    }

    // The caching mirror: the first read goes to the coordinator, the second is a cache hit;
    // ranges come out right through 1 MiB slices.
    void mirrorCachesSlicesOfTheCoordinator() {
        const Manifest& m = m_manifest;
        auto mirror = raw(m_mirrorPort);
        auto first = mirror->Get(m.weightsUrls[0]);
        QVERIFY(first);
        QVERIFY2(first->status == 200, m_mirror->errorLog().c_str());
        QCOMPARE(sha256(first->body), m.weightsSha256);
        QCOMPARE(first->get_header_value("X-Cache-Status"), std::string("MISS"));
        auto second = mirror->Get(m.weightsUrls[0]);
        QVERIFY(second && second->status == 200);
        QCOMPARE(second->get_header_value("X-Cache-Status"), std::string("HIT"));
        QCOMPARE(second->body, first->body);
        QCOMPARE(second->get_header_value("ETag"), "\"" + toHex(m.weightsSha256) + "\"");
        const std::string range = "bytes=" + std::to_string(m.dataByteOffset()) + "-" +
                                  std::to_string(m.dataByteOffset() + m.dataByteLength() - 1);
        auto data = mirror->Get(m.dataUrls[0], {{"Range", range}});
        QVERIFY(data);
        QCOMPARE(data->status, 206);
        QCOMPARE(sha256(data->body), m.dataSha256);
    }

    // Corrupted bytes from a mirror are rejected and the next URL gives the file.
    void corruptMirrorIsRejectedAndTheNextUrlUsed() {
        Manifest m = m_manifest;
        const std::string w = m.weightsUrls[0], d = m.dataUrls[0];
        m.weightsUrls = {mirrorUrl(m_badPort) + w, mirrorUrl(m_mirrorPort) + w, w};
        m.dataUrls = {mirrorUrl(m_badPort) + d, d};
        auto c = client();
        auto weights = c->downloadWeights(m, path("weights-a.ckpt"));
        QVERIFY2(weights.ok(), weights.ok() ? "" : weights.error().message.c_str());
        QCOMPARE(weights->url, mirrorUrl(m_mirrorPort) + w);
        QCOMPARE(sha256File(path("weights-a.ckpt"))->digest, m.weightsSha256);
        // The corrupted copy was downloaded whole, then refused.
        QVERIFY(weights->bytesTransferred >= 2 * m.weightsBytes);
        auto data = c->downloadData(m, path("data-a.bin"));
        QVERIFY2(data.ok(), data.ok() ? "" : data.error().message.c_str());
        QCOMPARE(data->url, d);
        QCOMPARE(sha256File(path("data-a.bin"))->digest, m.dataSha256);
        // The corrupt server goes last from now on.
        QCOMPARE(c->sources().order({mirrorUrl(m_badPort) + w, w}).back(),
                 mirrorUrl(m_badPort) + w);

        // Only corrupt copies: an error that says so, and nothing left on disk.
        Manifest onlyBad = m_manifest;
        onlyBad.weightsUrls = {mirrorUrl(m_badPort) + w};
        auto none = client()->downloadWeights(onlyBad, path("weights-bad.ckpt"));
        QVERIFY(!none);
        QCOMPARE(none.error().kind, HttpErrorKind::ChecksumMismatch);
        QVERIFY2(
            none.error().message.find("no URL of the manifest gave the file") != std::string::npos,
            none.error().message.c_str());
        QVERIFY(!fs::exists(path("weights-bad.ckpt")));
        QVERIFY(!fs::exists(path("weights-bad.ckpt.part")));
    }

    // A mirror is trusted by its own CA, never by the coordinator's pin: without the mirror CA
    // its TLS fails and the coordinator's own URL gives the file.
    void mirrorTrustIsNotTheCoordinatorPin() {
        Manifest m = m_manifest;
        const std::string w = m.weightsUrls[0];
        m.weightsUrls = {mirrorUrl(m_mirrorPort) + w, w};
        auto c = client(/*trustMirrors*/ false);
        auto weights = c->downloadWeights(m, path("weights-b.ckpt"));
        QVERIFY2(weights.ok(), weights.ok() ? "" : weights.error().message.c_str());
        QCOMPARE(weights->url, w);
        auto direct = client(false)->downloadWeights(
            [&] {
                Manifest only = m;
                only.weightsUrls = {mirrorUrl(m_mirrorPort) + w};
                return only;
            }(),
            path("weights-c.ckpt"));
        QVERIFY(!direct);
        QCOMPARE(direct.error().kind, HttpErrorKind::TlsUnknownCa);
        QVERIFY2(
            direct.error().message.find("a mirror's certificate must chain") != std::string::npos,
            direct.error().message.c_str());
    }

    // A front end's manifest names the aggregating process, another server with the
    // coordinator's TLS identity, in its absolute upload URL, and its blobs are there: the worker
    // trusts that server with the coordinator's pin, not as a mirror. "localhost" reaches the
    // coordinator here by another origin than the client's base URL (127.0.0.1).
    void theUploadOriginIsTrustedAsTheCoordinator() {
        Manifest m = m_manifest;
        const std::string other = "https://localhost:" + std::to_string(m_port);
        const std::string w = m.weightsUrls[0];
        m.weightsUrls = {other + w};
        m.dataUrls = {other + m.dataUrls[0]};
        // Without it that server is a mirror, and no CA of the system's store signed its
        // certificate.
        auto asMirror = client(/*trustMirrors*/ false)->downloadWeights(m, path("weights-d.ckpt"));
        QVERIFY(!asMirror);
        QCOMPARE(asMirror.error().kind, HttpErrorKind::TlsUnknownCa);

        m.uploadUrl = other + "/v1/results/" + std::to_string(m.workUnitId);
        auto c = client(false);
        auto weights = c->downloadWeights(m, path("weights-d.ckpt"));
        QVERIFY2(weights.ok(), weights.ok() ? "" : weights.error().message.c_str());
        QCOMPARE(weights->url, other + w);
        QCOMPARE(sha256File(path("weights-d.ckpt"))->digest, m.weightsSha256);
        auto data = c->downloadData(m, path("data-d.bin"));
        QVERIFY2(data.ok(), data.ok() ? "" : data.error().message.c_str());
        QCOMPARE(sha256File(path("data-d.bin"))->digest, m.dataSha256);
        const WeightDeltaRef delta{m.baseVersion, m.weightsSha256, m.weightsBytes, {other + w}};
        auto got = c->downloadWeightDelta(m, delta, path("delta-d.bin"));
        QVERIFY2(got.ok(), got.ok() ? "" : got.error().message.c_str());

        // The pin is lent to that server only: a mirror stays a mirror.
        m.weightsUrls = {mirrorUrl(m_mirrorPort) + w};
        auto mirror = client(false)->downloadWeights(m, path("weights-e.ckpt"));
        QVERIFY(!mirror);
        QCOMPARE(mirror.error().kind, HttpErrorKind::TlsUnknownCa);
    }

    // The signed manifest's order: untried servers first, in order; then the fastest; the
    // corrupt mirror, once tried, last. Every file is checked whatever its source.
    void signedManifestInMeasuredOrder() {
        const Manifest& m = m_manifest;
        auto c = client();
        auto first = c->downloadWeights(m, path("w1.ckpt"));
        QVERIFY2(first.ok(), first.ok() ? "" : first.error().message.c_str());
        QCOMPARE(first->url, m.weightsUrls[0]);  // the coordinator's own, never tried before
        auto second = c->downloadWeights(m, path("w2.ckpt"));
        QVERIFY(second.ok());
        QCOMPARE(second->url, m.weightsUrls[1]);  // the caching mirror, next untried
        auto third = c->downloadWeights(m, path("w3.ckpt"));
        QVERIFY2(third.ok(), third.ok() ? "" : third.error().message.c_str());
        // The corrupt mirror, untried, came first: refused, then the fastest measured one.
        QVERIFY(third->url == m.weightsUrls[0] || third->url == m.weightsUrls[1]);
        QVERIFY(third->attempts >= 2);
        QVERIFY(c->sources().bytesPerSecond(m.weightsUrls[0]).has_value());
        QVERIFY(c->sources().bytesPerSecond(m.weightsUrls[1]).has_value());
        const auto order = c->sources().order(m.weightsUrls);
        QCOMPARE(order.back(), m.weightsUrls[2]);
        const bool ownFaster = *c->sources().bytesPerSecond(m.weightsUrls[0]) >
                               *c->sources().bytesPerSecond(m.weightsUrls[1]);
        QCOMPARE(order.front(), m.weightsUrls[ownFaster ? 0 : 1]);
        for (const char* f : {"w1.ckpt", "w2.ckpt", "w3.ckpt"})
            QCOMPARE(sha256File(path(f))->digest, m.weightsSha256);
    }
};

QTEST_GUILESS_MAIN(TestNetMirrors)
#include "test_net_mirrors.moc"
