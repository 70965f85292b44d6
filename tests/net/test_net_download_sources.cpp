// The order in which a version 4 manifest's URLs are tried (net/download_sources.hpp), with
// hand-made measurements: untried servers first in the manifest's order, then measured ones
// fastest first, a failed one last; speeds averaged per server (scheme, host, port), small
// downloads not counted, a success clearing a failure.
#include "download_sources.hpp"

#include <QtTest>

using namespace tandem::net;

namespace {

const std::string kOwn = "/blobs/sha256/ab";
const std::string kA = "https://a.example/blobs/sha256/ab";
const std::string kB = "https://B.example:8443/x/blobs/sha256/ab";
constexpr int64_t kMiB = 1 << 20;

}  // namespace

class TestNetDownloadSources : public QObject {
    Q_OBJECT
  private slots:
    void serverOfUrl() {
        QCOMPARE(DownloadSources::serverOf(kOwn), std::string());
        QCOMPARE(DownloadSources::serverOf(kA), std::string("https://a.example"));
        QCOMPARE(DownloadSources::serverOf(kB), std::string("https://b.example:8443"));
        QCOMPARE(DownloadSources::serverOf("https://c.example"), std::string("https://c.example"));
    }
    void untriedFirstInManifestOrder() {
        DownloadSources s;
        const std::vector<std::string> urls{kOwn, kA, kB};
        QCOMPARE(s.order(urls), urls);
        s.recordSuccess(kOwn, 4 * kMiB, 1.0);  // 4 MiB/s
        QCOMPARE(s.order(urls), (std::vector<std::string>{kA, kB, kOwn}));
        s.recordSuccess(kA, 8 * kMiB, 1.0);  // 8 MiB/s
        QCOMPARE(s.order(urls), (std::vector<std::string>{kB, kA, kOwn}));
        s.recordSuccess(kB, 1 * kMiB, 1.0);  // 1 MiB/s
        QCOMPARE(s.order(urls), (std::vector<std::string>{kA, kOwn, kB}));
        // Another file on the same server shares its measurement.
        QCOMPARE(s.order({"https://a.example/blobs/sha256/cd", kOwn}).front(),
                 std::string("https://a.example/blobs/sha256/cd"));
    }
    void averageOfDownloads() {
        DownloadSources s;
        s.recordSuccess(kA, 8 * kMiB, 1.0);
        QCOMPARE(*s.bytesPerSecond(kA), 8.0 * kMiB);
        s.recordSuccess(kA, 2 * kMiB, 1.0);  // (8 + 2) / 2 with kNewWeight 0.5
        QCOMPARE(*s.bytesPerSecond(kA), 5.0 * kMiB);
        // Too small to say anything: the average stays.
        s.recordSuccess(kA, 1000, 0.001);
        QCOMPARE(*s.bytesPerSecond(kA), 5.0 * kMiB);
        QVERIFY(!s.bytesPerSecond(kB));
        s.recordSuccess(kB, DownloadSources::kMinMeasuredBytes - 1, 0.5);
        QVERIFY(!s.bytesPerSecond(kB));
        s.recordSuccess(kB, 0, 0);  // already on disk
        QVERIFY(!s.bytesPerSecond(kB));
    }
    void failedServerLastUntilItSucceeds() {
        DownloadSources s;
        const std::vector<std::string> urls{kOwn, kA, kB};
        s.recordSuccess(kOwn, 4 * kMiB, 1.0);
        s.recordSuccess(kB, 2 * kMiB, 1.0);
        s.recordFailure(kA);  // untried, then failed: behind the measured ones
        QCOMPARE(s.order(urls), (std::vector<std::string>{kOwn, kB, kA}));
        s.recordFailure(kOwn);  // the fastest failed: last, in the manifest's order
        QCOMPARE(s.order(urls), (std::vector<std::string>{kB, kOwn, kA}));
        s.recordSuccess(kOwn, 100, 1.0);  // too small to measure, but it worked
        QCOMPARE(s.order(urls), (std::vector<std::string>{kOwn, kB, kA}));
        QCOMPARE(*s.bytesPerSecond(kOwn), 4.0 * kMiB);
    }
};

QTEST_GUILESS_MAIN(TestNetDownloadSources)
#include "test_net_download_sources.moc"
