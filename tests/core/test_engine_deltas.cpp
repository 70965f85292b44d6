// Weights rebuilt from weight deltas (issue 15; core/weight_rebuild.hpp, core/held_weights.hpp):
// a worker that holds an earlier version of the run's weights rebuilds the next unit's weights
// from the manifest's deltas (a chain of 1 and of 3, in the foreground and as a prefetch), byte
// for byte the coordinator's file, and downloads only the deltas' bytes; a chain that is not
// smaller than the whole file is not used; a corrupted delta and a delta listed but gone fall
// back to the whole file and the unit still completes; the weights held of another run are not
// used.
#include "engine_harness.hpp"
#include "file_io.hpp"
#include "held_weights.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

// Bytes of the unit's weights transfers in the ledger (failed ones too: they used the link).
int64_t weightsBytesDown(Engine& e, const std::string& unitId) {
    int64_t sum = 0;
    const std::vector<Transfer> transfers = e.ledger().recentTransfers(1000).value();
    for (const Transfer& t : transfers)
        if (t.direction == Direction::Down && t.purpose == "weights" && t.workUnitId == unitId)
            sum += t.bytes;
    return sum;
}

int weightsFilesInCache(const fs::path& dataDir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dataDir / "cache"))
        n += e.path().extension() == ".weights";
    return n;
}

std::vector<uint8_t> cachedWeights(const fs::path& dataDir, const std::vector<uint8_t>& like) {
    const fs::path p = dataDir / "cache" / (net::toHex(net::sha256(like)) + ".weights");
    auto bytes = readFile(p);
    return bytes ? *bytes : std::vector<uint8_t>{};
}

// Two units: unit 1 at version 0 of run 1, unit 2 at `version` of `run2`; run to the end.
void runTwoUnits(Harness& h, FakeCoordinator& api, int64_t version, bool prefetch,
                 int64_t run2 = 1) {
    api.maxWorkUnits = 2;
    api.unitVersion[2] = version;
    api.unitRun[2] = run2;
    h.cfg.maxWorkUnits = 2;
    h.cfg.prefetch = prefetch;
    QVERIFY(h.make().ok());
    h.engine->start();
    QVERIFY(h.waitState(EngineState::Stopped));
    h.engine->wait();
    QCOMPARE(api.acceptCount.size(), size_t{2});
}

}  // namespace

class TestEngineDeltas : public QObject {
    Q_OBJECT

  private slots:
    void rebuildsFromAChain_data() {
        QTest::addColumn<int>("chain");
        QTest::addColumn<bool>("prefetch");
        QTest::newRow("1 delta") << 1 << false;
        QTest::newRow("3 deltas") << 3 << false;
        QTest::newRow("1 delta, prefetched") << 1 << true;
        QTest::newRow("3 deltas, prefetched") << 3 << true;
    }
    // Unit 2's weights are the coordinator's file of its version byte for byte, downloaded as
    // the deltas alone: the ledger's bytes for them are the deltas' sizes, and the log says so.
    void rebuildsFromAChain() {
        QFETCH(int, chain);
        QFETCH(bool, prefetch);
        FakeCoordinator api;
        api.publishVersions(1, 4, WeightDeltaCodec::Int8);
        Harness h(api);
        runTwoUnits(h, api, chain, prefetch);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(api.weightsDownloads.load(), 1);
        QCOMPARE(api.deltaDownloads.load(), chain);
        const auto expected = api.versionBytes(1, chain);
        QVERIFY(cachedWeights(h.dataDir, expected) == expected);
        int64_t deltaBytes = 0;
        for (int v = 0; v < chain; ++v)
            deltaBytes += api.deltaFileBytes(1, v);
        const int64_t full = static_cast<int64_t>(expected.size());
        QVERIFY(deltaBytes < full);
        QCOMPARE(weightsBytesDown(*h.engine, "1"), full);
        QCOMPARE(weightsBytesDown(*h.engine, "2"), deltaBytes);
        const std::string line =
            "work unit 2: weights of version " + std::to_string(chain) + " rebuilt from " +
            std::to_string(chain) + (chain == 1 ? " delta (" : " deltas (") +
            std::to_string(deltaBytes) + " bytes) instead of " + std::to_string(full) + " bytes";
        QVERIFY2(h.recorder.logged(line), line.c_str());
        // One weights file held, of the newest version; no delta left behind.
        const auto held = readHeldWeights(DataDir(h.dataDir));
        QVERIFY(held);
        QCOMPARE(held->version, int64_t{chain});
        QCOMPARE(held->runId, int64_t{1});
        if (!prefetch)  // a prefetch keeps the unit in training's weights until the next download
            QCOMPARE(weightsFilesInCache(h.dataDir), 1);
        for (const auto& e : fs::recursive_directory_iterator(h.dataDir))
            QVERIFY2(e.path().filename().string().rfind("delta-", 0) != 0, e.path().c_str());
    }

    // Three fp16 deltas (2 bytes per parameter each) are more than the whole file (4 bytes per
    // parameter): the whole file it is.
    void aChainLargerThanTheFileIsNotUsed() {
        FakeCoordinator api;
        api.publishVersions(1, 3, WeightDeltaCodec::Fp16);
        Harness h(api);
        runTwoUnits(h, api, 3, false);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(api.deltaDownloads.load(), 0);
        QCOMPARE(api.weightsDownloads.load(), 2);
        QVERIFY(
            h.recorder.logged("work unit 2: weights of version 3 downloaded whole: its 3 "
                              "deltas from version 0 are not smaller"));
    }

    void fallsBackToTheWholeFile_data() {
        QTest::addColumn<QString>("fault");
        QTest::addColumn<QString>("why");
        QTest::newRow("corrupted") << "corrupt"
                                   << "the delta from version 1 does not match its SHA-256";
        QTest::newRow("gone") << "missing"
                              << "downloading the delta from version 1 failed: HTTP 404";
    }
    // The second of three deltas is damaged or gone: one log line says why, the whole file is
    // downloaded, and the unit trains and is accepted.
    void fallsBackToTheWholeFile() {
        QFETCH(QString, fault);
        QFETCH(QString, why);
        FakeCoordinator api;
        api.publishVersions(1, 3, WeightDeltaCodec::Int8);
        (fault == "corrupt" ? api.corruptDeltas : api.missingDeltas).insert(1);
        Harness h(api);
        runTwoUnits(h, api, 3, false);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(api.weightsDownloads.load(), 2);
        const auto expected = api.versionBytes(1, 3);
        QVERIFY(cachedWeights(h.dataDir, expected) == expected);
        const std::string line =
            "work unit 2: weights of version 3 not rebuilt from deltas: " + why.toStdString();
        QVERIFY2(h.recorder.logged(line), line.c_str());
        QVERIFY(h.recorder.logged("; downloading the whole file (" +
                                  std::to_string(expected.size()) + " bytes)"));
        QCOMPARE(weightsBytesDown(*h.engine, "2") >= static_cast<int64_t>(expected.size()), true);
        QCOMPARE(unit(*h.engine, "2")->state, WorkUnitState::Accepted);
    }

    // Unit 2 is of run 2, whose manifest lists a delta from version 0 (run 2's): the weights
    // held (run 1's version 0) are not used, and they are let go.
    void heldWeightsOfAnotherRunAreNotUsed() {
        FakeCoordinator api;
        api.publishVersions(1, 1, WeightDeltaCodec::Int8);
        api.publishVersions(2, 1, WeightDeltaCodec::Int8);
        Harness h(api);
        runTwoUnits(h, api, 1, false, 2);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(api.deltaDownloads.load(), 0);
        QCOMPARE(api.weightsDownloads.load(), 2);
        const auto run1 = api.versionBytes(1, 0);
        QVERIFY(cachedWeights(h.dataDir, run1).empty());
        const auto run2 = api.versionBytes(2, 1);
        QVERIFY(cachedWeights(h.dataDir, run2) == run2);
        const auto held = readHeldWeights(DataDir(h.dataDir));
        QVERIFY(held);
        QCOMPARE(held->runId, int64_t{2});
        QCOMPARE(weightsFilesInCache(h.dataDir), 1);
    }
};

QTEST_GUILESS_MAIN(TestEngineDeltas)
#include "test_engine_deltas.moc"
