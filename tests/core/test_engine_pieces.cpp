// The worker's side of a sharded run (protocol v6, docs/protocol.md "Sharded runs"): the result
// goes in K pieces, each to its shard's URL, each retried on its own and settled by its own
// receipt or refusal; the result is settled once every piece is, with the credit counted once;
// after a kill only the pieces not settled yet are sent. A run of one shard is unchanged.
#include "engine_harness.hpp"
#include "result_format.hpp"

#include <QtTest>

#include <cmath>
#include <cstring>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;

namespace {

// Sum of squares of an encoded piece, decoded here independently of net/: fp16 halves by their
// bits, int8 blocks of an f32 scale and up to 256 int8 values (q x scale in double).
double independentSquares(uint32_t encoding, std::span<const uint8_t> bytes, int64_t values) {
    double sum = 0;
    if (encoding == net::kEncodingFp16) {
        for (int64_t i = 0; i < values; ++i) {
            uint16_t h = 0;
            std::memcpy(&h, bytes.data() + 2 * i, 2);
            const int e = (h >> 10) & 31, f = h & 1023;
            const double v = e == 0 ? std::ldexp(f, -24) : std::ldexp(f + 1024, e - 25);
            sum += v * v;
        }
        return sum;
    }
    size_t at = 0;
    for (int64_t lo = 0; lo < values; lo += 256) {
        float scale = 0;
        std::memcpy(&scale, bytes.data() + at, 4);
        const int64_t n = std::min<int64_t>(256, values - lo);
        for (int64_t i = 0; i < n; ++i) {
            const double v = static_cast<double>(static_cast<int8_t>(bytes[at + 4 + size_t(i)])) *
                             static_cast<double>(scale);
            sum += v * v;
        }
        at += 4 + size_t(n);
    }
    return sum;
}

// Checks the K piece bodies of work unit id as a shard would, and that they make one result:
// the same header (version 2) and table in each, the table's SHA-256 in the header, the ranges
// of pieceRanges, each slice's digest and sum of squares in its entry, the slices together the
// size of a whole payload.
void checkPieces(FakeCoordinator& api, int64_t id, int shards) {
    std::lock_guard lock(api.mu);
    const auto& pieces = api.acceptedPieces[id];
    QCOMPARE(int(pieces.size()), shards);
    const auto& first = pieces.at(0);
    auto h = net::parseResultHeader(first);
    QVERIFY(h.ok());
    QCOMPARE(h->formatVersion, net::kResultFormatPieces);
    QCOMPARE(h->encoding, api.resultEncoding);
    const int64_t P = api.model().parameterCount();
    QCOMPARE(h->parameterCount, P);
    const size_t tableBytes = size_t(shards) * 64;
    const auto table = std::span<const uint8_t>(first).subspan(128, tableBytes);
    QCOMPARE(net::sha256(table), h->payloadSha256);
    const auto ranges = net::pieceRanges(P, shards);
    int64_t payloadBytes = 0;
    for (int k = 0; k < shards; ++k) {
        const auto& body = pieces.at(k);
        QVERIFY(
            std::equal(first.begin(), first.begin() + ptrdiff_t(128 + tableBytes), body.begin()));
        const uint8_t* entry = table.data() + 64 * k;
        int64_t begin = 0, end = 0;
        double squares = 0;
        std::memcpy(&begin, entry, 8);
        std::memcpy(&end, entry + 8, 8);
        std::memcpy(&squares, entry + 48, 8);
        QCOMPARE(begin, ranges[size_t(k)].begin);
        QCOMPARE(end, ranges[size_t(k)].end);
        const auto slice = std::span<const uint8_t>(body).subspan(128 + tableBytes);
        QVERIFY(std::equal(entry + 16, entry + 48, net::sha256(slice).begin()));
        QCOMPARE(squares, independentSquares(h->encoding, slice, end - begin));
        QVERIFY(squares > 0);
        payloadBytes += int64_t(slice.size());
    }
    QCOMPARE(payloadBytes, net::resultPayloadBytes(h->encoding, P));
}

int attempts(FakeCoordinator& api, int shard) {
    std::lock_guard lock(api.mu);
    return api.pieceAttempts[shard];
}

}  // namespace

class TestEnginePieces : public QObject {
    Q_OBJECT

  private slots:
    // K = 3, int8: three pieces arrive, each its own slice behind the same header and table; the
    // unit is accepted once with its credit, and its files are gone.
    void threePiecesArrive() {
        FakeCoordinator api;
        api.shards = 3;
        api.resultEncoding = net::kEncodingInt8;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
        checkPieces(api, 1, 3);
        for (int k = 0; k < 3; ++k)
            QCOMPARE(attempts(api, k), 1);
        QCOMPARE(api.uploadAttempts.load(), 0);  // never a whole result
        const auto totals = h.engine->ledger().totals().value();
        QCOMPARE(totals.workUnitsAccepted, int64_t(1));
        QCOMPARE(totals.credit, double(unit(*h.engine, "1")->tokens));
        QCOMPARE(h.engine->ledger().pieceOutcomes("1")->size(), size_t(3));
        QVERIFY(!fs::exists(h.dataDir / "results" / "1.result"));
        for (int k = 0; k < 3; ++k)
            QVERIFY(!fs::exists(h.dataDir / "results" / ("1." + std::to_string(k) + ".piece")));
    }

    // fp16, one piece answered 503 twice: only that piece is sent again, on its own backoff.
    void onePieceRetriedAlone() {
        FakeCoordinator api;
        api.shards = 3;
        for (int i = 0; i < 2; ++i)
            api.pieceFailures[1].push_back(
                apiFailure("HTTP 503: busy", true, std::nullopt, "busy", 503));
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        h.cfg.backoffJitter = 0;
        h.cfg.backoffInitialMs = 1000;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(eventually([&] {
            return h.recorder.logged("(retry in 1 s)") &&
                   h.engine->ledger().pieceOutcomes("1")->size() == 2 &&
                   unit(*h.engine, "1")->state == WorkUnitState::Trained;
        }));
        h.clock.advanceMs(1000);
        h.engine->wake();
        QVERIFY(eventually([&] { return attempts(api, 1) == 2; }));
        QVERIFY(eventually([&] { return h.recorder.logged("(retry in 2 s)"); }));
        h.clock.advanceMs(2000);  // the second failure waits twice as long
        h.engine->wake();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
        QCOMPARE(attempts(api, 0), 1);
        QCOMPARE(attempts(api, 1), 3);
        QCOMPARE(attempts(api, 2), 1);
        checkPieces(api, 1, 3);
        auto transfers = h.engine->ledger().recentTransfers(100);
        QVERIFY(transfers.ok());
        int failed = 0;
        for (auto& t : *transfers)
            failed += t.purpose == "result" && !t.ok;
        QCOMPARE(failed, 2);
    }

    // One piece refused (422): the result settles, accepted on the others, credit once; all
    // refused: Rejected.
    void refusedPieceSettles() {
        FakeCoordinator api;
        api.shards = 3;
        api.pieceFailures[2].push_back(
            apiFailure("the sum of squares of piece 2 is not its entry's", false, std::nullopt,
                       "norm_mismatch", 422));
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
        for (int k = 0; k < 3; ++k)
            QCOMPARE(attempts(api, k), 1);
        const auto outcomes = h.engine->ledger().pieceOutcomes("1").value();
        QCOMPARE(outcomes.size(), size_t(3));
        QVERIFY(outcomes[0].accepted && outcomes[1].accepted && !outcomes[2].accepted);
        QVERIFY2(outcomes[2].detail.find("norm_mismatch") != std::string::npos ||
                     outcomes[2].detail.find("sum of squares") != std::string::npos,
                 outcomes[2].detail.c_str());
        const auto totals = h.engine->ledger().totals().value();
        QCOMPARE(totals.workUnitsAccepted, int64_t(1));
        QCOMPARE(totals.credit, double(unit(*h.engine, "1")->tokens));
        QVERIFY(h.recorder.logged("these were refused: 2"));
        QVERIFY(!fs::exists(h.dataDir / "results" / "1.json"));

        FakeCoordinator all;
        all.shards = 2;
        for (int k = 0; k < 2; ++k)
            all.pieceFailures[k].push_back(apiFailure("stale", false, std::nullopt, "stale", 409));
        Harness h2(all);
        h2.cfg.maxWorkUnits = 1;
        QVERIFY(h2.make().ok());
        h2.engine->start();
        QVERIFY(h2.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h2.engine, "1")->state, WorkUnitState::Rejected);
        QCOMPARE(h2.engine->ledger().totals()->credit, 0.0);
        QVERIFY(!fs::exists(h2.dataDir / "results" / "1.json"));
    }

    // Killed with piece 0 accepted and the others waiting on a retry: after the restart only
    // pieces 1 and 2 are sent; the unit is accepted once.
    void restartSendsOnlyMissingPieces() {
        FakeCoordinator api;
        api.shards = 3;
        api.maxWorkUnits = 1;
        for (int k = 1; k < 3; ++k)
            api.pieceFailures[k].push_back(
                apiFailure("connection reset", true, std::nullopt, {}, 0));
        QTemporaryDir dir;
        const fs::path data = fs::path(dir.path().toStdString()) / "data";
        {
            Harness h(api, data);
            h.cfg.backoffJitter = 0;
            h.cfg.backoffInitialMs = 60000;
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(eventually([&] {
                return h.recorder.logged("upload of piece 1 of work unit 1 failed") &&
                       h.recorder.logged("upload of piece 2 of work unit 1 failed") &&
                       h.engine->ledger().pieceOutcomes("1")->size() == 1;
            }));
            h.engine->crashForTesting();
            QVERIFY(eventually([&] { return h.engine->finished(); }));
            QVERIFY(fs::exists(data / "results" / "1.result"));
            QVERIFY(fs::exists(data / "results" / "1.1.piece"));
        }
        QCOMPARE(attempts(api, 0), 1);
        {
            Harness h(api, data);
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(
                eventually([&] { return unit(*h.engine, "1")->state == WorkUnitState::Accepted; }));
            QCOMPARE(attempts(api, 0), 1);  // settled before the kill: not sent again
            QCOMPARE(attempts(api, 1), 2);
            QCOMPARE(attempts(api, 2), 2);
            checkPieces(api, 1, 3);
            QCOMPARE(h.engine->ledger().totals()->credit, double(unit(*h.engine, "1")->tokens));
            QVERIFY(eventually([&] { return !fs::exists(data / "results" / "1.0.piece"); }));
            h.engine->quit();
            h.engine->wait();
            QVERIFY(h.engine->ledger().integrityCheck().ok());
        }
    }

    // A run of one shard: a version 6 manifest without shards, one whole result of format
    // version 1 to the coordinator's path, no piece.
    void oneShardIsUnchanged() {
        FakeCoordinator api;
        QCOMPARE(api.manifestFor(1).protocol, 6);
        QVERIFY(api.manifestFor(1).shards.empty());
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
        QCOMPARE(api.uploadAttempts.load(), 1);
        QVERIFY(api.pieceAttempts.empty());
        const auto& body = api.accepted[1];
        auto header = net::parseResultHeader(body);
        QVERIFY(header.ok());
        QCOMPARE(header->formatVersion, net::kResultFormatVersion);
        QCOMPARE(int64_t(body.size()), header->totalBytes());
        QVERIFY(h.engine->ledger().pieceOutcomes("1")->empty());
    }
};

QTEST_APPLESS_MAIN(TestEnginePieces)
#include "test_engine_pieces.moc"
