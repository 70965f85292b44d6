// A sharded run (docs/protocol.md, "Sharded runs"; coordinator/shard_rounds.cpp): three shards
// on one PostgreSQL database, each with its own state directory, driven by direct calls with a
// hand-driven clock; their parts travel through a fetcher that reads the other shards' blob
// folders, as HTTPS would. Against the same run on one SQLite process, with the same uploads in
// the same order (a stale result re-based, a shard restarted mid-round), the weights after every
// round and the momentum must be bit-identical: the outer step is element-wise and each shard
// adds its pieces in acceptance order. Then pieces that do not belong: refused with their code,
// and nothing counted. Runs in a cluster that tests/tools/with_postgres starts (label postgres).
//
// Dimensions: P parameters, N values of a shard's range.
#include "direct.hpp"
#include "state_store.hpp"

#include "file_io.hpp"

#include <QtTest>

#include <unistd.h>
#include <cstring>

using namespace tandem;
using namespace tandem::testing;

namespace {

constexpr int kShards = 3;

coord::CoordinatorConfig config() {
    auto c = directConfig();
    c.quorum = 2;
    c.maxRelativeNorm = 0;
    c.staleWeightFactor = 0.3;
    return c;
}

bool sameBits(std::span<const float> x, std::span<const float> y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// The bytes of a piece upload and its signature.
struct PieceUpload {
    std::vector<uint8_t> body;
    std::string signature;
};

// A result cut into its pieces as a worker does (net::buildPiecedResult), signed once.
std::vector<PieceUpload> pieces(const net::Manifest& m, const std::vector<uint16_t>& payload,
                                const net::SigningKey& key, int64_t tokens,
                                const std::function<void(net::PiecedResult&)>& tamper = {}) {
    net::ResultHeader h = resultHeaderFor(m, tokens);
    h.parameterCount = static_cast<int64_t>(payload.size());
    const auto bytes = std::span(reinterpret_cast<const uint8_t*>(payload.data()),
                                 payload.size() * sizeof(uint16_t));
    std::vector<net::PieceRange> ranges;
    for (const auto& s : m.shards)
        ranges.push_back(s.range);
    auto built = net::buildPiecedResult(h, bytes, ranges);
    if (!built)
        qFatal("%s", built.error().message.c_str());
    if (tamper)
        tamper(*built);
    const std::string signature = net::toBase64(key.sign(net::resultDigest(built->header)));
    std::vector<PieceUpload> out;
    for (size_t k = 0; k < ranges.size(); ++k)
        out.push_back({net::pieceBody(*built, bytes, k), signature});
    return out;
}

coord::Outcome<std::string> send(coord::Coordinator& c, int64_t clientId, int64_t workUnitId,
                                 const PieceUpload& p, int piece) {
    auto session = c.beginUpload(clientId, workUnitId, static_cast<int64_t>(p.body.size()),
                                 p.signature, false, piece);
    if (!session.ok())
        return session.refusal();
    if (auto answer = session.value()->feed(p.body))
        return *answer;
    return session.value()->finish(true);
}

// K shards of one run on one PostgreSQL database.
class ShardedRun {
  public:
    std::shared_ptr<int64_t> clock = std::make_shared<int64_t>(1'000'000);

    explicit ShardedRun(coord::CoordinatorConfig base) : m_base(std::move(base)) {
        static int count = 0;
        auto url = freshPostgresDatabase("shards_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(++count));
        if (!url)
            qFatal("%s", url.error().message.c_str());
        m_url = *url;
        m_corpus = root() / "corpus.txt";
        writeCorpus(m_corpus, 200000);
        m_coords.resize(kShards);
        m_logs.resize(kShards);
        // Shard 0 creates the run; the others start from its key and data, as an operator
        // copies them (docs/operations.md), and fetch the weights from it.
        if (!open(0))
            return;
        for (int k = 1; k < kShards; ++k) {
            std::filesystem::create_directories(stateDir(k));
            std::filesystem::copy_file(stateDir(0) / "coordinator_key.pem",
                                       stateDir(k) / "coordinator_key.pem");
            std::filesystem::copy(stateDir(0) / "data", stateDir(k) / "data",
                                  std::filesystem::copy_options::recursive);
            if (!open(k))
                return;
        }
    }

    std::filesystem::path root() const { return m_dir.path().toStdString(); }
    std::filesystem::path stateDir(int k) const { return root() / ("shard" + std::to_string(k)); }
    const std::string& error() const { return m_error; }
    bool ok() const { return m_error.empty(); }
    const std::string& url() const { return m_url; }
    coord::Coordinator& at(int k) { return *m_coords[static_cast<size_t>(k)]; }

    bool open(int k) {
        auto c = m_base;
        c.databaseUrl = m_url;
        c.stateDir = stateDir(k);
        c.corpus = {m_corpus};
        c.shard = k;
        c.newRunShards = kShards;
        c.publicUrl = "https://shard" + std::to_string(k) + ".test";
        auto now = clock;
        c.clock = [now] { return *now; };
        const auto root = this->root();
        c.fetchShardBlob = [root](const std::string& url) -> Expected<std::vector<uint8_t>> {
            // https://shard<k>.test/blobs/sha256/<hex>: the file shard k serves there.
            const auto host = url.substr(8, url.find('/', 8) - 8);
            const auto name = url.substr(url.rfind('/') + 1);
            return readFile(root / host.substr(0, host.find('.')) / "blobs" / "sha256" / name);
        };
        auto& log = m_logs[static_cast<size_t>(k)];
        auto opened = coord::Coordinator::open(c, [&log](const std::string& line) {
            log.push_back(line);
            if (std::getenv("TANDEM_TEST_LOG"))
                std::fprintf(stderr, "shard: %s\n", line.c_str());
        });
        if (!opened) {
            m_error = "shard " + std::to_string(k) + ": " + opened.error().message;
            return false;
        }
        m_coords[static_cast<size_t>(k)] = std::move(*opened);
        return true;
    }
    void close(int k) { m_coords[static_cast<size_t>(k)].reset(); }

    // Every shard's ticks until each follows `version` (a close takes two rounds of ticks).
    bool settle(int64_t version) {
        for (int tries = 0; tries < 6; ++tries) {
            bool all = true;
            for (int k = 0; k < kShards; ++k) {
                at(k).tick();
                all = all && at(k).currentVersion() == version;
            }
            if (all)
                return true;
        }
        return false;
    }
    bool logged(int k, const std::string& part) const {
        for (const auto& line : m_logs[static_cast<size_t>(k)])
            if (contains(line, part))
                return true;
        return false;
    }

  private:
    QTemporaryDir m_dir;
    coord::CoordinatorConfig m_base;
    std::string m_url, m_error;
    std::filesystem::path m_corpus;
    std::vector<std::unique_ptr<coord::Coordinator>> m_coords;
    std::vector<std::vector<std::string>> m_logs;
};

DirectClient registerOn(coord::Coordinator& c, const std::string& name) {
    DirectClient client{0, net::SigningKey::generate().value()};
    auto r = c.registerClient(net::RegisterRequest{name, client.key.publicKey(), "test"}.toJson());
    if (r.ok())
        client.id = r.value().clientId;
    return client;
}

net::Manifest workFrom(coord::Coordinator& c, const DirectClient& client) {
    net::WorkRequest w;
    w.device = "cpu";
    auto offer = c.requestWork(client.id, w.toJson());
    if (!offer.ok() || !offer.value().manifest)
        return {};
    return *offer.value().manifest;
}

}  // namespace

class TestCoordinatorShards : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        if (!postgresUrl())
            QSKIP(
                "no PostgreSQL cluster: run through tests/tools/with_postgres (ctest -L "
                "postgres)");
    }

    // Two clients, rounds 0 to 3, each round one result of each; a's round-2 result is based on
    // version 1 (stale, re-based); shard 1 restarts between a's and b's pieces of round 1.
    void threeShardsMatchOneProcessBitForBit() {
        qunsetenv("TANDEM_TEST_POSTGRES");  // the one-process run on SQLite
        DirectCoordinator single(config());
        qputenv("TANDEM_TEST_POSTGRES", "1");
        QVERIFY2(single.t().ok(), single.t().error().c_str());
        ShardedRun sharded(config());
        QVERIFY2(sharded.ok(), sharded.error().c_str());
        QVERIFY(sharded.logged(1, "fetched the weights of version 0 from another shard"));

        auto& one = single.coordinator();
        const int64_t P = one.parameterCount();
        QCOMPARE(sharded.at(0).parameterCount(), P);
        QVERIFY(sameBits(one.weights(), sharded.at(2).weights()));  // the same start
        const auto ranges = net::pieceRanges(P, kShards);
        auto sa = single.registerClient("a"), sb = single.registerClient("b");
        auto pa = registerOn(sharded.at(0), "a"), pb = registerOn(sharded.at(0), "b");
        net::Manifest staleA, staleAs;
        for (int round = 0; round < 4; ++round) {
            const auto mb = single.work(sb);
            const auto mbs = workFrom(sharded.at(round % kShards), pb);
            const auto ma = round == 2 ? staleA : single.work(sa);
            const auto mas = round == 2 ? staleAs : workFrom(sharded.at(0), pa);
            if (round == 1) {
                staleA = single.work(sa);
                staleAs = workFrom(sharded.at(1), pa);
            }
            QCOMPARE(mas.protocol, 6);
            QCOMPARE(mas.shards.size(), size_t{kShards});
            QCOMPARE(mas.shards[2].uploadUrl, "https://shard2.test/v1/results/" +
                                                  std::to_string(mas.workUnitId) + "/pieces/2");
            QCOMPARE(mas.baseVersion, ma.baseVersion);
            const auto da = patternDelta(P, 1.0f + 0.37f * float(round));
            const auto db = patternDelta(P, -0.6f + 0.21f * float(round));
            QVERIFY(single.upload(sa, buildResult(ma, da, sa.key, 48)).ok());
            const auto piecesA = pieces(mas, da, pa.key, 48);
            for (int k = 0; k < kShards; ++k) {
                auto r = send(sharded.at(k), pa.id, mas.workUnitId, piecesA[size_t(k)], k);
                QVERIFY2(r.ok(), r.ok() ? "" : r.refusal().message.c_str());
                auto receipt = net::Receipt::fromJson(r.value());
                QVERIFY(receipt.ok());
                QCOMPARE(receipt->shard, std::optional<int>(k));
                QVERIFY(receipt->verify(sharded.at(k).publicKey()));
            }
            if (round == 1) {
                sharded.close(1);
                QVERIFY2(sharded.open(1), sharded.error().c_str());
                QVERIFY(sharded.logged(1, "(1 re-added to its sum)"));
            }
            QVERIFY(single.upload(sb, buildResult(mb, db, sb.key, 80)).ok());
            const auto piecesB = pieces(mbs, db, pb.key, 80);
            for (int k = kShards - 1; k >= 0; --k)  // any order: each shard alone
                QVERIFY(send(sharded.at(k), pb.id, mbs.workUnitId, piecesB[size_t(k)], k).ok());
            QCOMPARE(one.currentVersion(), int64_t{round + 1});
            QVERIFY2(sharded.settle(round + 1), "the shards did not reach the next version");
            for (int k = 0; k < kShards; ++k) {
                QVERIFY2(sameBits(one.weights(), sharded.at(k).weights()),
                         ("the weights of shard " + std::to_string(k) + " differ after round " +
                          std::to_string(round))
                             .c_str());
                const auto v = one.velocity();
                const auto& r = ranges[size_t(k)];
                QVERIFY2(sameBits(std::span(v).subspan(size_t(r.begin), size_t(r.end - r.begin)),
                                  sharded.at(k).velocity()),
                         "the momentum differs");
            }
        }
        // Not trivially equal: the run moved.
        const auto v = one.velocity();
        QVERIFY(std::any_of(v.begin(), v.end(), [](float x) { return x != 0.0f; }));
        // The same weights file at every shard and the one process.
        auto w = sharded.at(0).weightsFile(sharded.at(0).runId(), 4);
        QVERIFY(w.ok());
        auto w1 = one.weightsFile(one.runId(), 4);
        QCOMPARE(net::sha256File(w.value().path)->digest, net::sha256File(w1.value().path)->digest);

        // In the database: each result once, each piece once, the rounds counting them.
        auto db = coord::openStateStore(sharded.stateDir(0), sharded.url());
        QVERIFY(db.ok());
        auto q = db->prepare(kResultCountsSql);
        QVERIFY(q->step());
        QCOMPARE(q->integer(0), int64_t{8});
        QCOMPARE(q->integer(1), int64_t{8});
        QCOMPARE(q->integer(2), int64_t{8});
        QCOMPARE(q->integer(3), int64_t{4});
        QCOMPARE(q->integer(4), int64_t{0});
        auto p = db->prepare(
            "SELECT COUNT(*), COUNT(DISTINCT work_unit_id), (SELECT COUNT(*) FROM round_parts), "
            "(SELECT SUM(tokens) FROM donor_totals) FROM result_pieces");
        QVERIFY(p->step());
        QCOMPARE(p->integer(0), int64_t{8 * kShards});
        QCOMPARE(p->integer(1), int64_t{8});
        QCOMPARE(p->integer(2), int64_t{4 * kShards});
        QCOMPARE(p->integer(3), int64_t{4 * (48 + 80)});  // credited once per result
    }

    void piecesThatDoNotBelongAreRefusedAndCountNothing() {
        ShardedRun run(config());
        QVERIFY2(run.ok(), run.error().c_str());
        auto& c0 = run.at(0);
        const int64_t P = c0.parameterCount();
        auto a = registerOn(c0, "a");
        const auto m = workFrom(c0, a);
        QCOMPARE(m.shards.size(), size_t{kShards});
        const auto delta = patternDelta(P);
        const auto good = pieces(m, delta, a.key, 32);
        auto piecesAt = [&](int k) {
            auto db = coord::openStateStore(run.stateDir(0), run.url());
            auto q = db->prepare("SELECT COUNT(*) FROM result_pieces WHERE shard = ?");
            q->bind(1, int64_t{k});
            q->step();
            return q->integer(0);
        };
        auto refused = [&](const coord::Outcome<std::string>& r, int status, const char* code) {
            if (r.ok())
                return std::string("accepted");
            if (r.refusal().httpStatus != status || r.refusal().code != code)
                return std::to_string(r.refusal().httpStatus) + " " + r.refusal().code + ": " +
                       r.refusal().message;
            return std::string();
        };
        // Piece 1 at shard 0: where it belongs is named.
        auto r = send(c0, a.id, m.workUnitId, good[1], 1);
        QCOMPARE(refused(r, 421, "wrong_shard"), std::string());
        QVERIFY2(contains(r.refusal().message, "https://shard1.test/v1/results/" +
                                                   std::to_string(m.workUnitId) + "/pieces/1"),
                 r.refusal().message.c_str());
        // A whole result: a sharded run takes pieces.
        const auto whole = buildResult(m, delta, a.key, 32);
        auto w = c0.beginUpload(a.id, m.workUnitId, int64_t(whole.body.size()), whole.signature);
        QVERIFY(!w.ok());
        QCOMPARE(w.refusal().code, std::string("pieces_required"));
        // A table whose ranges are not the run's, re-signed: refused by its shard.
        auto badRanges = pieces(m, delta, a.key, 32, [](net::PiecedResult& p) {
            p.entries[1].range.end -= 256;  // piece 0 keeps its size: the table is what is wrong
            p.entries[2].range.begin -= 256;
            p.table = net::serializePieceTable(p.entries);
            p.header.payloadSha256 = net::sha256(p.table);
        });
        QCOMPARE(refused(send(c0, a.id, m.workUnitId, badRanges[0], 0), 422, "bad_piece_table"),
                 std::string());
        // A table that is not the one the header names.
        auto swapped = good[0];
        swapped.body[net::kResultHeaderBytes + 20] ^= 0xff;
        QCOMPARE(refused(send(c0, a.id, m.workUnitId, swapped, 0), 422, "bad_piece_table"),
                 std::string());
        // The piece's own bytes damaged.
        auto damaged = good[2];
        damaged.body.back() ^= 0x01;
        QCOMPARE(refused(send(run.at(2), a.id, m.workUnitId, damaged, 2), 422, "digest_mismatch"),
                 std::string());
        // A table that lies about a piece's sum of squares (the norm every shard gates on).
        auto lying = pieces(m, delta, a.key, 32, [](net::PiecedResult& p) {
            p.entries[1].sumSquares *= 0.999;  // 0.1%: far beyond the tolerance
            p.table = net::serializePieceTable(p.entries);
            p.header.payloadSha256 = net::sha256(p.table);
        });
        QCOMPARE(refused(send(run.at(1), a.id, m.workUnitId, lying[1], 1), 422, "norm_mismatch"),
                 std::string());
        QCOMPARE(piecesAt(0) + piecesAt(1) + piecesAt(2), int64_t{0});

        // The good pieces count once; a replay of one gets its receipt again and counts nothing.
        auto first = send(run.at(1), a.id, m.workUnitId, good[1], 1);
        QVERIFY(first.ok());
        auto again = send(run.at(1), a.id, m.workUnitId, good[1], 1);
        QVERIFY(again.ok());
        QCOMPARE(again.value(), first.value());
        QCOMPARE(piecesAt(1), int64_t{1});
        // Another result for the unit (a different digest) at a shard that has no piece yet.
        const auto other = pieces(m, patternDelta(P, 2.0f), a.key, 32);
        QCOMPARE(refused(send(c0, a.id, m.workUnitId, other[0], 0), 409, "duplicate"),
                 std::string());
        // The unit is accepted at shard 1, and still wanted for its other pieces.
        auto hb =
            c0.progress(a.id, m.workUnitId, R"({"step":8,"loss":3.0,"tokens_per_second":100})");
        QVERIFY(hb.ok());
        QCOMPARE(hb.value().action, std::string("continue"));
        QVERIFY(send(c0, a.id, m.workUnitId, good[0], 0).ok());
        QVERIFY(send(run.at(2), a.id, m.workUnitId, good[2], 2).ok());
        QCOMPARE(piecesAt(0) + piecesAt(1) + piecesAt(2), int64_t{3});
        hb = c0.progress(a.id, m.workUnitId, R"({"step":8,"loss":3.0,"tokens_per_second":100})");
        QCOMPARE(hb.value().action, std::string("abandon"));

        // A piece of a unit beyond the staleness bound.
        auto b = registerOn(c0, "b");
        const auto old = workFrom(c0, b);
        for (int64_t v = 1; v <= 2; ++v) {
            auto c = registerOn(c0, "c" + std::to_string(v));
            const auto mc = workFrom(c0, c);
            const auto pc = pieces(mc, patternDelta(P, 0.5f), c.key, 32);
            for (int k = 0; k < kShards; ++k)
                QVERIFY(send(run.at(k), c.id, mc.workUnitId, pc[size_t(k)], k).ok());
            *run.clock += 601;  // past the deadline: closes with what it has
            QVERIFY(run.settle(v));
        }
        const auto late = pieces(old, patternDelta(P), b.key, 32);
        QCOMPARE(refused(send(run.at(2), b.id, old.workUnitId, late[2], 2), 409, "stale"),
                 std::string());
    }

    void aWorkerOfAnOlderProtocolGetsNoWorkFromAShardedRun() {
        ShardedRun run(config());
        QVERIFY2(run.ok(), run.error().c_str());
        auto a = registerOn(run.at(0), "a");
        net::WorkRequest w;
        w.device = "cpu";
        w.protocol = 5;
        auto offer = run.at(0).requestWork(a.id, w.toJson());
        QVERIFY(!offer.ok());
        QCOMPARE(offer.refusal().code, std::string("protocol_too_old"));
        QVERIFY2(contains(offer.refusal().message, "aggregated by 3 shards"),
                 offer.refusal().message.c_str());
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorShards)
#include "test_coordinator_shards.moc"
