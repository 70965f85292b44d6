// Content-addressed downloads on the coordinator (coordinator/blob_store.hpp, docs/protocol.md
// "Blobs"): a version 4 manifest lists the coordinator's own blob path and then each --mirror's
// URL, in order; an older worker's manifest has none; GET /blobs/sha256/<hex> serves the very
// bytes of the weights and the train shard (their SHA-256 is the name) without a token, with
// Cache-Control immutable, the digest as ETag and Range; malformed and unknown names are 4xx and
// change nothing; a blob lost in a crash is made again at start; blobs no kept version needs are
// removed as rounds move on; bad --mirror URLs are refused at start with a clear message.
#include "api_helpers.hpp"
#include "direct.hpp"

#include "blob_store.hpp"
#include "file_io.hpp"
#include "http_io.hpp"

#include <nlohmann/json.hpp>

#include <QtTest>

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

std::string fileText(const fs::path& p) {
    auto bytes = readFile(p);
    return bytes ? std::string(bytes->begin(), bytes->end()) : std::string();
}

size_t blobCount(const fs::path& state) {
    size_t n = 0;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(state / "blobs" / "sha256", ec)) {
        (void)e;
        ++n;
    }
    return n;
}

coord::CoordinatorConfig withMirrors() {
    coord::CoordinatorConfig c = directConfig();
    c.mirrors = {"https://mirror-a.example:8443/", "https://mirror-b.example/tandem"};
    return c;
}

}  // namespace

class TestCoordinatorBlobs : public QObject {
    Q_OBJECT

  private slots:
    void manifestListsOwnThenMirrors() {
        DirectCoordinator f(withMirrors());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto client = f.registerClient("w");
        const net::Manifest m = f.work(client);
        QVERIFY(m.protocol >= 4);  // version 4 and later list blob URLs
        const std::string w = "/blobs/sha256/" + net::toHex(m.weightsSha256);
        QCOMPARE(m.weightsUrls, (std::vector<std::string>{w, "https://mirror-a.example:8443" + w,
                                                          "https://mirror-b.example/tandem" + w}));
        QCOMPARE(m.dataUrls.size(), size_t{3});
        QVERIFY(m.dataUrls[0].starts_with("/blobs/sha256/"));
        QCOMPARE(m.dataUrls[2], "https://mirror-b.example/tandem" + m.dataUrls[0]);
        // The old URLs stay, for older workers and as they were.
        QCOMPARE(m.weightsUrl, std::string("/v1/runs/1/weights/0"));
        // The urls are signed: changing one breaks the signature.
        net::Manifest forged = m;
        QVERIFY(forged.verify(f.coordinator().publicKey()));
        forged.weightsUrls[0] = "https://evil.example" + w;
        QVERIFY(!forged.verify(f.coordinator().publicKey()));

        // A worker that asks with version 3 gets a version 3 manifest, without urls.
        net::WorkRequest old;
        old.device = "cpu";
        old.protocol = 3;
        auto other = f.registerClient("old");
        auto offer = f.coordinator().requestWork(other.id, old.toJson());
        QVERIFY(offer.ok() && offer.value().manifest);
        const net::Manifest m3 = *offer.value().manifest;
        QCOMPARE(m3.protocol, 3);
        QVERIFY(m3.weightsUrls.empty() && m3.dataUrls.empty());
        QVERIFY(m3.toJson().find("urls") == std::string::npos);
        QVERIFY(m3.verify(f.coordinator().publicKey()));
    }

    void blobsAreTheFilesServedWithoutToken() {
        DirectCoordinator f(directConfig(), 200000, true);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto client = f.registerClient("w");
        const net::Manifest m = f.work(client);
        auto http = f.t().connect();

        auto weights = http->Get(m.weightsUrls[0]);
        QVERIFY(weights);
        QCOMPARE(weights->status, 200);
        QCOMPARE(net::sha256(weights->body), m.weightsSha256);
        QCOMPARE(static_cast<int64_t>(weights->body.size()), m.weightsBytes);
        QCOMPARE(weights->get_header_value("Cache-Control"),
                 std::string("public, max-age=31536000, immutable"));
        QCOMPARE(weights->get_header_value("ETag"), "\"" + net::toHex(m.weightsSha256) + "\"");

        // The data blob is the whole shard; the unit's range of it has the manifest's digest.
        const std::string range = "bytes=" + std::to_string(m.dataByteOffset()) + "-" +
                                  std::to_string(m.dataByteOffset() + m.dataByteLength() - 1);
        auto data = http->Get(m.dataUrls[0], {{"Range", range}});
        QVERIFY(data);
        QCOMPARE(data->status, 206);
        QCOMPARE(net::sha256(data->body), m.dataSha256);
        auto shard = http->Get(m.dataUrls[0]);
        QVERIFY(shard && shard->status == 200);
        QCOMPARE(net::toHex(net::sha256(shard->body)), m.dataUrls[0].substr(14));
        QCOMPARE(shard->body, fileText(f.t().stateDir() / "data" / "shard-0.bin"));
    }

    void badBlobRequestsAreRefused() {
        DirectCoordinator f(directConfig(), 200000, true);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const size_t before = blobCount(f.t().stateDir());
        QCOMPARE(before, size_t{2});  // version 0's weights and the train shard
        auto http = f.t().connect();
        const std::string unknown(64, 'a');
        struct Case {
            std::string path;
            int status;
            std::string code;
        };
        const std::vector<Case> cases{
            {"/blobs/sha256/" + unknown, 404, "unknown_blob"},
            {"/blobs/sha256/" + std::string(64, 'A'), 400, "bad_blob_name"},
            {"/blobs/sha256/" + std::string(63, 'a'), 400, "bad_blob_name"},
            {"/blobs/sha256/" + std::string(65, 'a'), 400, "bad_blob_name"},
            {"/blobs/sha256/" + std::string(5000, 'a'), 400, "bad_blob_name"},
            {"/blobs/sha256/..%2f..%2fcoordinator.db", 400, "bad_blob_name"},
            {"/blobs/sha256/", 400, "bad_blob_name"},
        };
        for (const Case& c : cases) {
            auto res = http->Get(c.path);
            QVERIFY2(res, c.path.c_str());
            QCOMPARE(res->status, c.status);
            QCOMPARE(errorCode(res), c.code);
        }
        auto put = http->Put("/blobs/sha256/" + unknown, "x", "application/octet-stream");
        QVERIFY(put && put->status >= 400 && put->status < 500);
        QCOMPARE(blobCount(f.t().stateDir()), before);
        QVERIFY(!fs::exists(f.t().stateDir() / "blobs" / "sha256" / unknown));
    }

    // A stop between a version's weights and its blob (or a state directory from before blobs):
    // the start makes the blob again, so no manifest names a missing one.
    void lostBlobIsMadeAgainAtStart() {
        DirectCoordinator f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto client = f.registerClient("w");
        const net::Manifest m = f.work(client);
        const fs::path blob = f.t().stateDir() / "blobs" / "sha256" / net::toHex(m.weightsSha256);
        QVERIFY(fs::exists(blob));
        f.t().close();
        fs::remove(blob);
        fs::remove_all(f.t().stateDir() / "blobs");
        f.t().open();
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        QVERIFY(fs::exists(blob));
        QCOMPARE(net::sha256File(blob)->digest, m.weightsSha256);
        QCOMPARE(blobCount(f.t().stateDir()), size_t{2});
    }

    // A blob (or a version's weights) removed between its lookup and the read, as a round
    // close that drops the oldest kept version can do: 404 no_longer_kept, which a worker takes
    // as any missing file (the next URL, or new work), not a 500.
    void aFileRemovedAfterItsLookupIsGone() {
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "removed";
        const coord::ServedFile gone{path, 10, net::sha256(std::string_view("0123456789"))};
        httplib::Request req;
        req.method = "GET";
        httplib::Response res;
        coord::serveFile(req, res, gone);
        QCOMPARE(res.status, 404);
        QCOMPARE(QString::fromStdString(
                     nlohmann::json::parse(res.body)["error"]["code"].get<std::string>()),
                 QStringLiteral("no_longer_kept"));
    }

    // Rounds move on: the blobs of versions beyond the staleness bound go, the kept ones and
    // the shard stay, and every blob a new manifest names is there.
    void unreferencedBlobsAreRemoved() {
        DirectCoordinator f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const fs::path dir = f.t().stateDir() / "blobs" / "sha256";
        std::vector<net::Sha256Digest> versions;
        std::vector<DirectClient> clients;
        for (const char* name : {"a", "b", "c"})
            clients.push_back(f.registerClient(name));
        for (int round = 0; round < 3; ++round) {
            for (int i = 0; i < 3; ++i) {
                const net::Manifest m = f.work(clients[static_cast<size_t>(i)]);
                QVERIFY(m.workUnitId > 0);
                if (i == 0)
                    versions.push_back(m.weightsSha256);
                QVERIFY(fs::exists(dir / m.weightsUrls[0].substr(14)));
                QVERIFY(fs::exists(dir / m.dataUrls[0].substr(14)));
                const auto r =
                    buildResult(m, patternDelta(f.coordinator().parameterCount(), float(round + 1)),
                                clients[static_cast<size_t>(i)].key);
                QVERIFY(f.upload(clients[static_cast<size_t>(i)], r).ok());
            }
            f.coordinator().tick();
        }
        QCOMPARE(f.coordinator().currentVersion(), int64_t{3});
        // maxStaleness 1: versions 2 and 3 are kept, 0 and 1 are not.
        QVERIFY(!fs::exists(dir / net::toHex(versions[0])));
        QVERIFY(!fs::exists(dir / net::toHex(versions[1])));
        QVERIFY(fs::exists(dir / net::toHex(versions[2])));
        QCOMPARE(blobCount(f.t().stateDir()), size_t{3});  // versions 2, 3 and the shard
        const net::Manifest m = f.work(clients[0]);
        QCOMPARE(m.baseVersion, int64_t{3});
        QVERIFY(fs::exists(dir / m.weightsUrls[0].substr(14)));
        QCOMPARE(net::sha256File(dir / m.weightsUrls[0].substr(14))->digest, m.weightsSha256);
    }

    void badMirrorsAreRefusedAtStart() {
        const std::vector<std::pair<std::string, std::string>> cases{
            {"http://mirror.example", "https://"},
            {"https://", "no host name"},
            {"https://mirror.example/a b", "does not belong"},
            {"https://mirror.example/?x=1", "does not belong"},
            {"https://user@mirror.example", "does not belong"},
        };
        for (const auto& [url, why] : cases) {
            coord::CoordinatorConfig c = directConfig();
            c.mirrors = {url};
            TestCoordinator t(c, false);
            QVERIFY2(!t.ok(), url.c_str());
            QVERIFY2(contains(t.error(), why) && contains(t.error(), "--mirror"),
                     t.error().c_str());
        }
        coord::CoordinatorConfig many = directConfig();
        many.mirrors.assign(net::kMaxBlobUrls, "https://mirror.example");
        TestCoordinator t(many, false);
        QVERIFY(!t.ok());
        QVERIFY2(contains(t.error(), "at most 15 mirrors"), t.error().c_str());
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorBlobs)
#include "test_coordinator_blobs.moc"
