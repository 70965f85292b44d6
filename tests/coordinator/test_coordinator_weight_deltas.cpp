// Weight deltas published by the coordinator (issue 15): a run with --weight-deltas int8 writes
// the delta of every version as a content-addressed blob; a protocol 5 manifest lists the deltas
// up to its base version (a protocol 4 one none); a worker's rebuild from an older version's
// weights file and the listed deltas (kernels/weight_delta_file.hpp) is the coordinator's weights
// file byte for byte, also over a chain of three, on each CPU variant; a damaged delta is
// refused; deltas beyond kKeptWeightDeltas + the staleness bound versions are removed with their
// blobs.
//
// Dimensions: P parameters.
#include "direct.hpp"
#include "state_dir.hpp"
#include "weight_delta_file.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::testing;

namespace {

coord::CoordinatorConfig deltaConfig() {
    auto c = directConfig();
    c.quorum = 1;
    c.maxRelativeNorm = 0;
    c.weightDeltas = WeightDeltaCodec::Int8;
    c.maxStaleness = 3;  // the weights files of versions 0 to 3 stay, as workers would hold them
    return c;
}

std::vector<uint8_t> readFile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

net::Manifest workAt(DirectCoordinator& f, const DirectClient& c, int protocol) {
    net::WorkRequest w;
    w.device = "cpu";
    w.protocol = protocol;
    auto offer = f.coordinator().requestWork(c.id, w.toJson());
    if (!offer.ok() || !offer.value().manifest)
        return {};
    return *offer.value().manifest;
}

// One round: a client takes a unit and uploads a delta that differs per round.
bool closeRound(DirectCoordinator& f, int n) {
    auto client = f.registerClient("r" + std::to_string(n));
    const auto m = f.work(client);
    const int64_t P = f.coordinator().parameterCount();
    return f.upload(client, buildResult(m, patternDelta(P, 1.0f + 0.37f * n), client.key, 64))
               .ok() &&
           f.coordinator().currentVersion() == n + 1;
}

std::filesystem::path blobPath(DirectCoordinator& f, const std::string& url) {
    return f.t().stateDir() / url.substr(1);  // "/blobs/sha256/<hex>"
}

}  // namespace

class TestCoordinatorWeightDeltas : public QObject {
    Q_OBJECT
  private slots:
    void manifestsListDeltasThatRebuildTheWeights() {
        DirectCoordinator f(deltaConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto v0 = f.readStateFile("weights/v0.ckpt");
        QVERIFY(!v0.empty());
        for (int n = 0; n < 3; ++n)
            QVERIFY(closeRound(f, n));
        auto client = f.registerClient("worker");
        const net::Manifest m = workAt(f, client, 5);
        QCOMPARE(m.protocol, 5);
        QCOMPARE(m.baseVersion, int64_t{3});
        QCOMPARE(m.weightDeltas.size(), size_t{3});
        // The manifest survives its JSON (signed, parsed as a worker does).
        auto parsed = net::Manifest::fromJson(m.toJson());
        QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().message.c_str());
        QVERIFY(parsed->verify(f.coordinator().publicKey()));
        QCOMPARE(parsed->weightDeltas.size(), size_t{3});
        const int64_t P = f.coordinator().parameterCount();
        std::vector<WeightDeltaFile> chain;
        for (size_t i = 0; i < 3; ++i) {
            const net::WeightDeltaRef& d = parsed->weightDeltas[i];
            QCOMPARE(d.fromVersion, static_cast<int64_t>(i));
            QCOMPARE(d.urls.front().substr(0, 14), std::string("/blobs/sha256/"));
            const auto bytes = readFile(blobPath(f, d.urls.front()));
            QCOMPARE(static_cast<int64_t>(bytes.size()), d.bytes);
            QVERIFY(net::sha256(bytes) == d.sha256);
            QCOMPARE(d.bytes, weightDeltaFileBytes(WeightDeltaCodec::Int8, P));
            QVERIFY(d.bytes < m.weightsBytes / 3);  // P + P/64 + 60 against 4P + 56
            auto file = parseWeightDelta(bytes);
            QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
            chain.push_back(std::move(*file));
        }
        // A worker holding version r rebuilds version 3 from r's file and the deltas from r.
        for (int64_t r = 0; r < 3; ++r) {
            const auto held =
                readFile(f.t().stateDir() / "weights" / ("v" + std::to_string(r) + ".ckpt"));
            for (CpuVariant v : {CpuVariant::Baseline, CpuVariant::Avx2}) {
                if (!cpuVariantAvailable(v))
                    continue;
                auto ck = parseCheckpoint(held);
                QVERIFY(ck.ok());
                std::vector<float> w = ck->parameters;
                for (size_t i = static_cast<size_t>(r); i < chain.size(); ++i)
                    QVERIFY(applyWeightDelta(w, chain[i].delta, nullptr, v));
                ck->parameters = w;
                const auto rebuilt = serializeCheckpoint(*ck);
                QVERIFY2(rebuilt == f.readStateFile("weights/v3.ckpt"),
                         qPrintable(QString("rebuilt from version %1 differs").arg(r)));
                QVERIFY(net::sha256(rebuilt) == m.weightsSha256);
            }
            auto ck = parseCheckpoint(held);
            QVERIFY(applyWeightDeltaChain(ck->parameters, r,
                                          std::span(chain).subspan(static_cast<size_t>(r))));
            QVERIFY(net::sha256(serializeCheckpoint(*ck)) == m.weightsSha256);
        }
        // A chain that skips a version is refused and leaves the weights alone.
        auto ck = parseCheckpoint(v0);
        const auto before = ck->parameters;
        const WeightDeltaFile gap[] = {chain[0], chain[2]};
        auto st = applyWeightDeltaChain(ck->parameters, 0, gap);
        QVERIFY(!st);
        QVERIFY2(st.error().message.find("do not chain") != std::string::npos,
                 st.error().message.c_str());
        QVERIFY(ck->parameters == before);
        // A damaged byte is caught by the file's checksum (and the manifest's SHA-256).
        auto bytes = readFile(blobPath(f, parsed->weightDeltas[1].urls.front()));
        bytes[100] ^= 0x40;
        QVERIFY(net::sha256(bytes) != parsed->weightDeltas[1].sha256);
        auto damaged = parseWeightDelta(bytes);
        QVERIFY(!damaged);
        QVERIFY2(damaged.error().message.find("checksum") != std::string::npos,
                 damaged.error().message.c_str());
        bytes.resize(bytes.size() - 10);
        QVERIFY(parseWeightDelta(bytes).error().message.find("truncated") != std::string::npos);

        // An older worker gets a version 4 manifest without deltas.
        auto old = f.registerClient("old");
        const net::Manifest m4 = workAt(f, old, 4);
        QCOMPARE(m4.protocol, 4);
        QVERIFY(m4.weightDeltas.empty());
        QVERIFY(m4.toJson().find("deltas") == std::string::npos);
    }

    void oldDeltasGoWithTheirBlobs() {
        DirectCoordinator f(deltaConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int kept = coord::kKeptWeightDeltas + 3;  // + maxStaleness: live units' manifests
        for (int n = 0; n < kept + 2; ++n)
            QVERIFY(closeRound(f, n));
        const int64_t version = f.coordinator().currentVersion();
        auto client = f.registerClient("worker");
        const net::Manifest m = workAt(f, client, 5);
        QCOMPARE(m.weightDeltas.size(), static_cast<size_t>(coord::kKeptWeightDeltas));
        QCOMPARE(m.weightDeltas.front().fromVersion, version - coord::kKeptWeightDeltas);
        for (int64_t v = 1; v <= version; ++v) {
            QCOMPARE(std::filesystem::exists(f.t().stateDir() / "deltas" /
                                             ("v" + std::to_string(v) + ".wdlt")),
                     v > version - kept);
        }
        size_t blobs = 0;
        for (auto& e : std::filesystem::directory_iterator(f.t().stateDir() / "blobs" / "sha256"))
            blobs += readFile(e.path()).size() == static_cast<size_t>(m.weightDeltas.front().bytes);
        QCOMPARE(blobs, static_cast<size_t>(kept));
        // A restart lists the same deltas.
        f.t().close();
        f.t().open();
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto again = f.registerClient("again");
        const net::Manifest m2 = workAt(f, again, 5);
        QCOMPARE(m2.weightDeltas.size(), m.weightDeltas.size());
        for (size_t i = 0; i < m.weightDeltas.size(); ++i)
            QVERIFY(m2.weightDeltas[i].sha256 == m.weightDeltas[i].sha256);
    }

    void aPlainRunHasNoDeltas() {
        auto cfg = deltaConfig();
        cfg.weightDeltas = WeightDeltaCodec::Off;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        QVERIFY(closeRound(f, 0));
        auto client = f.registerClient("worker");
        QVERIFY(workAt(f, client, 5).weightDeltas.empty());
        QVERIFY(std::filesystem::is_empty(f.t().stateDir() / "deltas"));
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorWeightDeltas)
#include "test_coordinator_weight_deltas.moc"
