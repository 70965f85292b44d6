// Front ends (coordinator/front_end.cpp; issue 16, item 2 with K = 1): the aggregating process and
// two front ends on one PostgreSQL database, driven by direct calls with hand-driven clocks. A
// front end needs PostgreSQL, the run's key and data; its manifests are signed with the run's
// key, send uploads and weight downloads to the aggregating process and hand out data ranges
// that never overlap another process's, also when two front ends are asked at the same time; it
// refuses an upload (421, naming where uploads go), follows the run to its next version, takes
// heartbeats for units another process assigned, and the clock holder reads those before it
// times a unit out. Runs in a cluster that tests/tools/with_postgres starts (label postgres).
//
// Dimensions: P parameters.
#include "api_helpers.hpp"
#include "direct.hpp"
#include "state_store.hpp"

#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <thread>

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

constexpr const char* kUploadBase = "https://127.0.0.1:7443";

coord::CoordinatorConfig aggregatorConfig() {
    auto c = directConfig();
    c.quorum = 2;
    c.maxRelativeNorm = 0;
    return c;
}

// A front end of `aggregator`'s run: first opened without the run's key (refused), then with the
// key and data copied from the aggregating process's state directory, as an operator does.
std::unique_ptr<DirectCoordinator> frontEndOf(DirectCoordinator& aggregator, std::string* refusal) {
    auto cfg = aggregatorConfig();
    cfg.role = coord::CoordinatorRole::Front;
    cfg.uploadBase = kUploadBase;
    cfg.databaseUrl = aggregator.t().config().databaseUrl;
    auto f = std::make_unique<DirectCoordinator>(cfg);
    if (f->t().ok())
        return nullptr;  // it must not open without the key
    *refusal = f->t().error();
    const fs::path from = aggregator.t().stateDir(), to = f->t().stateDir();
    fs::copy_file(from / "coordinator_key.pem", to / "coordinator_key.pem");
    fs::copy(from / "data", to / "data", fs::copy_options::recursive);
    f->t().open();
    return f;
}

struct Range {
    int64_t shard, offset, length;
};

bool overlapping(std::vector<Range> ranges) {
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
        return std::tie(a.shard, a.offset) < std::tie(b.shard, b.offset);
    });
    for (size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].shard == ranges[i - 1].shard &&
            ranges[i].offset < ranges[i - 1].offset + ranges[i - 1].length)
            return true;
    return false;
}

std::string stateOf(DirectCoordinator& f, int64_t workUnitId) {
    auto db = coord::openStateStore(f.t().stateDir(), f.t().config().databaseUrl);
    if (!db)
        return db.error().message;
    auto q = db->prepare("SELECT state FROM work_units WHERE id = ?");
    q->bind(1, workUnitId);
    return q->step() ? q->text(0) : "missing";
}

}  // namespace

class TestCoordinatorFrontEnds : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        if (!postgresUrl())
            QSKIP(
                "no PostgreSQL cluster: run through tests/tools/with_postgres (ctest -L "
                "postgres)");
    }

    void aFrontEndNeedsPostgresAnUploadBaseAndTheRunsKey() {
        QTemporaryDir dir;
        auto cfg = aggregatorConfig();
        cfg.role = coord::CoordinatorRole::Front;
        cfg.uploadBase = kUploadBase;
        cfg.stateDir = fs::path(dir.path().toStdString()) / "front";
        auto sqlite = coord::Coordinator::open(cfg, {});
        QVERIFY(!sqlite);
        QVERIFY2(contains(sqlite.error().message,
                          "--role front needs the run state in PostgreSQL (--db postgresql://"),
                 sqlite.error().message.c_str());
        QVERIFY(!fs::exists(cfg.stateDir));  // refused before anything was made

        DirectCoordinator aggregator(aggregatorConfig());
        QVERIFY2(aggregator.t().ok(), aggregator.t().error().c_str());
        cfg.databaseUrl = aggregator.t().config().databaseUrl;
        cfg.uploadBase = "http://127.0.0.1:7443";
        auto plain = coord::Coordinator::open(cfg, {});
        QVERIFY(!plain);
        QVERIFY2(contains(plain.error().message,
                          "--upload-base 'http://127.0.0.1:7443': an "
                          "https:// URL"),
                 plain.error().message.c_str());
        cfg.uploadBase = "https://127.0.0.1:7443/v1";
        auto path = coord::Coordinator::open(cfg, {});
        QVERIFY(!path);
        QVERIFY2(contains(path.error().message, "the character '/' does not belong in it"),
                 path.error().message.c_str());

        std::string refusal;
        auto front = frontEndOf(aggregator, &refusal);
        QVERIFY(front);
        QVERIFY2(contains(refusal, "a front end uses the run's key: copy coordinator_key.pem"),
                 refusal.c_str());
        QVERIFY2(front->t().ok(), front->t().error().c_str());
        // Neither a database file nor weights of its own: the run is the aggregating process's.
        QVERIFY(!fs::exists(front->t().stateDir() / "coordinator.db"));
        QVERIFY(!fs::exists(front->t().stateDir() / "weights" / "v0.ckpt"));
        // Any number of front ends beside the one aggregating process (ServeLock is its alone).
        auto second = frontEndOf(aggregator, &refusal);
        QVERIFY(second && second->t().ok());
    }

    void frontEndsServeTheRunTheAggregatorAggregates() {
        DirectCoordinator aggregator(aggregatorConfig());
        QVERIFY2(aggregator.t().ok(), aggregator.t().error().c_str());
        std::string refusal;
        auto f1 = frontEndOf(aggregator, &refusal), f2 = frontEndOf(aggregator, &refusal);
        QVERIFY(f1 && f1->t().ok() && f2 && f2->t().ok());
        auto& agg = aggregator.coordinator();
        const int64_t P = agg.parameterCount();
        QCOMPARE(f1->coordinator().parameterCount(), P);

        // Registered at a front end, known to every process (the token is in the database).
        auto a = f1->registerClient("a"), b = f2->registerClient("b");
        QVERIFY(a.id > 0 && b.id > 0 && a.id != b.id);
        const auto ma = f1->work(a), mb = f2->work(b);
        QVERIFY(ma.workUnitId > 0 && mb.workUnitId > 0);
        for (const auto* m : {&ma, &mb}) {
            QVERIFY(m->verify(agg.publicKey()));  // signed with the run's key
            QCOMPARE(m->uploadUrl,
                     std::string(kUploadBase) + "/v1/results/" + std::to_string(m->workUnitId));
            QVERIFY(!m->weightsUrls.empty());
            QCOMPARE(m->weightsUrls.front(),
                     std::string(kUploadBase) + "/blobs/sha256/" + net::toHex(m->weightsSha256));
            QVERIFY(m->dataUrls.front().starts_with("/blobs/sha256/"));  // the front end's own
        }
        // The weights it names are the aggregating process's version 0.
        auto w0 = net::sha256File(aggregator.t().stateDir() / "weights" / "v0.ckpt");
        QVERIFY(w0.ok());
        QVERIFY(ma.weightsSha256 == w0->digest);
        QVERIFY(ma.dataOffset != mb.dataOffset);

        // An upload sent to a front end: 421, saying where it goes; nothing counted.
        auto misdirected = f1->upload(a, buildResult(ma, patternDelta(P), a.key, 32));
        QVERIFY(!misdirected.ok());
        QCOMPARE(misdirected.refusal().httpStatus, 421);
        QCOMPARE(misdirected.refusal().code, std::string("not_on_front_end"));
        QVERIFY2(contains(misdirected.refusal().message, std::string(kUploadBase) + "/v1/results/" +
                                                             std::to_string(ma.workUnitId)),
                 misdirected.refusal().message.c_str());
        QVERIFY(!f1->coordinator().weightsFile(agg.runId(), 0).ok());

        // A heartbeat at the other front end for a unit this one assigned.
        net::ProgressReport report{3, 4.5f, 100};
        auto beat = f2->coordinator().progress(a.id, ma.workUnitId, report.toJson());
        QVERIFY(beat.ok());
        QCOMPARE(beat.value().action, std::string("continue"));

        // Cached at the front end before any result (checked again after the round).
        auto empty = f1->coordinator().leaderboard(agg.runId(), std::nullopt);
        QVERIFY(empty.ok());
        QCOMPARE(empty.value().donorCount, int64_t{0});

        // Both results to the aggregating process: the round closes there...
        QVERIFY(aggregator.upload(a, buildResult(ma, patternDelta(P), a.key, 32)).ok());
        QVERIFY(aggregator.upload(b, buildResult(mb, patternDelta(P, 2), b.key, 32)).ok());
        QCOMPARE(agg.currentVersion(), int64_t{1});
        // ... and the front ends follow at their next tick.
        QCOMPARE(f1->coordinator().currentVersion(), int64_t{0});
        f1->coordinator().tick();
        QCOMPARE(f1->coordinator().currentVersion(), int64_t{1});
        QVERIFY(f1->logged("following the run to version 1"));
        const auto next = f1->work(a);
        QCOMPARE(next.baseVersion, int64_t{1});
        auto w1 = net::sha256File(aggregator.t().stateDir() / "weights" / "v1.ckpt");
        QVERIFY(w1.ok());
        QVERIFY(next.weightsSha256 == w1->digest);
        QCOMPARE(next.weightsBytes, w1->bytes);
        // The leaderboard a front end shows has the results the aggregating process took.
        auto board = f1->coordinator().leaderboard(agg.runId(), std::nullopt);
        QVERIFY(board.ok());
        QCOMPARE(board.value().donorCount, int64_t{2});
    }

    // Two front ends asked for work at the same time never hand out overlapping data ranges
    // (the run's row is locked from the cursor's read to its update).
    void concurrentFrontEndsHandOutDisjointRanges() {
        DirectCoordinator aggregator(aggregatorConfig(), 2000000);
        QVERIFY2(aggregator.t().ok(), aggregator.t().error().c_str());
        std::string refusal;
        auto f1 = frontEndOf(aggregator, &refusal), f2 = frontEndOf(aggregator, &refusal);
        QVERIFY(f1 && f1->t().ok() && f2 && f2->t().ok());
        constexpr int kClients = 12, kUnitsEach = 4;
        std::vector<DirectClient> c1, c2;
        for (int i = 0; i < kClients; ++i) {
            c1.push_back(f1->registerClient("p" + std::to_string(i)));
            c2.push_back(f2->registerClient("q" + std::to_string(i)));
        }
        std::vector<Range> r1, r2;
        auto hammer = [](DirectCoordinator& f, std::vector<DirectClient>& clients,
                         std::vector<Range>& out) {
            for (int u = 0; u < kUnitsEach; ++u)
                for (auto& c : clients) {
                    const auto m = f.work(c);
                    if (m.workUnitId > 0)
                        out.push_back({m.dataShard, m.dataOffset, m.dataLength});
                }
        };
        std::thread t1([&] { hammer(*f1, c1, r1); });
        std::thread t2([&] { hammer(*f2, c2, r2); });
        t1.join();
        t2.join();
        // newClientWorkUnits (1000 in directConfig) and maxWorkUnitsPerClient (3) allow 3 each.
        QCOMPARE(r1.size(), size_t(kClients * 3));
        QCOMPARE(r2.size(), size_t(kClients * 3));
        std::vector<Range> all = r1;
        all.insert(all.end(), r2.begin(), r2.end());
        QVERIFY2(!overlapping(all), "two units were given overlapping data");
    }

    // The clock holder times a unit out only after reading the heartbeats a front end wrote.
    void heartbeatsAtAFrontEndKeepAUnitAlive() {
        DirectCoordinator aggregator(aggregatorConfig());
        QVERIFY2(aggregator.t().ok(), aggregator.t().error().c_str());
        std::string refusal;
        auto front = frontEndOf(aggregator, &refusal);
        QVERIFY(front && front->t().ok());
        auto a = front->registerClient("a");
        const auto m = front->work(a);
        QVERIFY(m.workUnitId > 0);
        // 170 s after the unit's start: a heartbeat at the front end, written a second later.
        *front->clock += 170;
        net::ProgressReport report{2, 4.0f, 50};
        QVERIFY(front->coordinator().progress(a.id, m.workUnitId, report.toJson()).ok());
        *front->clock += 1;
        front->coordinator().tick();
        // At 200 s the aggregating process has seen no heartbeat itself (timeout 180 s).
        *aggregator.clock += 200;
        aggregator.coordinator().tick();
        QCOMPARE(stateOf(aggregator, m.workUnitId), std::string("assigned"));
        // Silent since 170 s: at 352 s it is timed out.
        *aggregator.clock += 152;
        aggregator.coordinator().tick();
        QCOMPARE(stateOf(aggregator, m.workUnitId), std::string("abandoned"));
        QVERIFY(aggregator.logged("work unit " + std::to_string(m.workUnitId) +
                                  " abandoned: no heartbeat for 182 s"));
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorFrontEnds)
#include "test_coordinator_front_ends.moc"
