// Work assignment: the sizing and placing rules alone (exact cases), then through the
// Coordinator without HTTP and with a hand-driven clock: disjoint ranges in order, the signed
// manifest, the per-client limit, an abandoned range handed out again, no work when the round has
// spanned the shard, and heartbeats.
#include "direct.hpp"
#include "memory_estimate.hpp"
#include "work_assignment.hpp"

#include <QtTest>

#include <cmath>

using namespace tandem;
using namespace tandem::testing;

namespace {

coord::RunSettings settings() {
    coord::RunSettings s;
    s.batch = 2;
    s.seqLen = 16;  // 32 tokens per step
    s.innerSteps = 8;
    s.minInnerSteps = 2;
    return s;
}

struct Fixture : DirectCoordinator {
    explicit Fixture(size_t corpusBytes = 200000, int maxUnitsPerClient = 2)
        : DirectCoordinator(config(maxUnitsPerClient), corpusBytes) {}
    static coord::CoordinatorConfig config(int maxUnitsPerClient) {
        auto c = directConfig();
        c.maxWorkUnitsPerClient = maxUnitsPerClient;
        return c;
    }
    std::vector<uint8_t> trainShard() { return readStateFile("data/shard-0.bin"); }
};

}  // namespace

class TestCoordinatorWork : public QObject {
    Q_OBJECT

  private slots:
    void innerStepsFromThroughput() {
        const auto s = settings();
        QCOMPARE(coord::innerStepsFor(s, 0, 100), 8);    // unknown: the maximum
        QCOMPARE(coord::innerStepsFor(s, -5, 100), 8);   // nonsense: the maximum
        QCOMPARE(coord::innerStepsFor(s, 1.0, 100), 3);  // 100 tokens / 32 per step = 3.125
        QCOMPARE(coord::innerStepsFor(s, 2.0, 100), 6);  // 6.25
        QCOMPARE(coord::innerStepsFor(s, 0.5, 100), 2);  // 1.5625, raised to the minimum
        QCOMPARE(coord::innerStepsFor(s, 4.0, 100), 8);  // 12.5, capped at the maximum
    }

    // With the worker's uplink, a unit lasts 1.1 x its fp16 result's upload (128 + 2P bytes).
    void innerStepsFitTheUpload() {
        auto s = settings();
        s.model = ModelConfig::parse("L=1,NH=2,C=16,T=16,V=64").value();
        const double resultBytes = 128.0 + 2.0 * static_cast<double>(s.model.parameterCount());
        // An uplink that moves the result in 20 s: 22 s x 1 token/s / 32 = 0.69 steps; the
        // 100 s target (3 steps) wins.
        QCOMPARE(coord::innerStepsFor(s, 1.0, 100, resultBytes / 20), 3);
        // In 200 s: 220 s x 1 / 32 = 6.875 steps.
        QCOMPARE(coord::innerStepsFor(s, 1.0, 100, resultBytes / 200), 6);
        // In 2,000 s: 68.75, capped at the maximum.
        QCOMPARE(coord::innerStepsFor(s, 1.0, 100, resultBytes / 2000), 8);
        QCOMPARE(coord::innerStepsFor(s, 1.0, 100, 0), 3);  // unknown uplink: as before
        // An int8 run's result is P + 4 ceil(P / 256) bytes: the uplink that moves an fp16
        // result in 200 s moves it in about half that, so the unit needs about half the steps.
        s.resultEncoding = net::kEncodingInt8;
        const double P = static_cast<double>(s.model.parameterCount());
        const double int8Bytes = 128.0 + P + 4.0 * std::ceil(P / 256);
        QCOMPARE(coord::innerStepsFor(s, 1.0, 100, resultBytes / 200), 3);  // 3.7: the target
        QCOMPARE(coord::innerStepsFor(s, 1.0, 100, int8Bytes / 200), 6);    // the same 200 s
    }

    void unitBytes() {
        const auto s = settings();
        QCOMPARE(coord::workUnitBytes(s, 3, 100000), int64_t{96});
        QCOMPARE(coord::workUnitBytes(s, 0, 100000), int64_t{17});  // at least one window
        QCOMPARE(coord::workUnitBytes(s, 8, 200), int64_t{200});    // at most the shard
    }

    void dataRanges() {
        auto r = coord::nextDataRange(0, 0, 100, 1000);
        QVERIFY(r);
        QCOMPARE(r->offset, int64_t{0});
        QCOMPARE(r->length, int64_t{100});
        QCOMPARE(r->nextCursor, int64_t{100});
        QCOMPARE(r->assignedBytes, int64_t{100});
        // Ends exactly at the end of the shard: the cursor wraps to 0.
        r = coord::nextDataRange(900, 900, 100, 1000);
        QVERIFY(r);
        QCOMPARE(r->offset, int64_t{900});
        QCOMPARE(r->nextCursor, int64_t{0});
        QCOMPARE(r->assignedBytes, int64_t{1000});
        // Would run past the end: starts at 0, the 50-byte tail counts as assigned.
        r = coord::nextDataRange(950, 300, 100, 1000);
        QVERIFY(r);
        QCOMPARE(r->offset, int64_t{0});
        QCOMPARE(r->nextCursor, int64_t{100});
        QCOMPARE(r->assignedBytes, int64_t{450});
        // The round would span more than the shard.
        QVERIFY(!coord::nextDataRange(950, 950, 100, 1000));
        QVERIFY(!coord::nextDataRange(500, 901, 100, 1000));
        QVERIFY(coord::nextDataRange(500, 900, 100, 1000));
    }

    void assignsDisjointRangesInOrder() {
        Fixture f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto m1 = f.work(a, 1.0);  // H = 3: 96 bytes
        const auto m2 = f.work(b, 0);    // H = 8: 256 bytes
        QCOMPARE(m1.innerSteps, 3);
        QCOMPARE(m2.innerSteps, 8);
        QCOMPARE(m1.dataOffset, int64_t{0});
        QCOMPARE(m1.dataLength, int64_t{96});
        QCOMPARE(m2.dataOffset, int64_t{96});
        QCOMPARE(m2.dataLength, int64_t{256});

        const auto shard = f.trainShard();
        const auto pk = f.coordinator().publicKey();
        for (const auto* m : {&m1, &m2}) {
            QVERIFY(m->verify(pk));
            QVERIFY(m->dataSha256 ==
                    net::sha256(std::span<const uint8_t>(shard).subspan(
                        static_cast<size_t>(m->dataOffset), static_cast<size_t>(m->dataLength))));
            QCOMPARE(m->runId, f.coordinator().runId());
            QCOMPARE(m->baseVersion, int64_t{0});
            QCOMPARE(m->lrStartStep, int64_t{0});
            QCOMPARE(m->batch, 2);
            QCOMPARE(m->seqLen, 16);
            QCOMPARE(m->deadlineUnix, *f.clock + 600 * 2);  // round timeout x (1 + staleness)
            QCOMPARE(m->heartbeatSeconds, 30);
            QCOMPARE(m->weightsUrl, "/v1/runs/" + std::to_string(m->runId) + "/weights/0");
            QCOMPARE(m->uploadUrl, "/v1/results/" + std::to_string(m->workUnitId));
            QCOMPARE(m->maxUploadBytes, f.coordinator().maxUploadBytes());
            QVERIFY(m->seed < (uint64_t{1} << 53));
        }
        QVERIFY(m1.workUnitId != m2.workUnitId);
    }

    // The manifest's start_blend (docs/protocol.md): the eager start for a unit whose client's
    // previous unit is not in the weights it gets (still out, or its result waits in the open
    // round), 0 otherwise; a worker that asks with protocol 2 gets a version 2 manifest.
    void startBlendWhenTheLastResultIsNotInTheWeights() {
        Fixture f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto pk = f.coordinator().publicKey();
        const auto c = f.registerClient("c"), d = f.registerClient("d");
        const auto u1 = f.work(c);
        QCOMPARE(u1.protocol, net::kProtocolVersion);
        QCOMPARE(u1.startBlend, 0.0f);  // its first unit of the run: nothing to blend with
        const auto delta = patternDelta(u1.model.parameterCount());
        QVERIFY(f.upload(c, buildResult(u1, delta, c.key)).ok());
        const auto u2 = f.work(c);  // u1's result waits in the open round 0
        QCOMPARE(u2.baseVersion, int64_t{0});
        QCOMPARE(u2.startBlend, 0.5f);
        QVERIFY(u2.verify(pk));
        QVERIFY(f.upload(c, buildResult(u2, delta, c.key)).ok());
        const auto d1 = f.work(d);
        QVERIFY(f.upload(d, buildResult(d1, delta, d.key)).ok());  // the third: round 0 closes
        const auto u3 = f.work(c);                                 // u2 is in version 1
        QCOMPARE(u3.baseVersion, int64_t{1});
        QCOMPARE(u3.startBlend, 0.0f);
        const auto u4 = f.work(c);  // u3 is still out: the overlap
        QCOMPARE(u4.startBlend, 0.5f);

        // An older worker: no protocol in its request.
        auto oldRequest = [&] {
            return f.coordinator().requestWork(
                d.id, R"({"device":"cpu","memory_bytes":0,"tokens_per_second":0,)"
                      R"("free_disk_bytes":0})");
        };
        auto d2 = oldRequest();
        auto d3 = oldRequest();  // d2 is out, but this worker would not know the field
        QVERIFY(d2.ok() && d2.value().manifest && d3.ok() && d3.value().manifest);
        const net::Manifest& m3 = *d3.value().manifest;
        QCOMPARE(m3.protocol, 2);
        QCOMPARE(m3.startBlend, 0.0f);
        QVERIFY(m3.toJson().find("start_blend") == std::string::npos);
        QVERIFY(m3.verify(pk));
    }

    // A unit trained to its end whose result never arrived (here: its heartbeats stopped after
    // the last step, as when an upload is lost): the next unit continues from the worker's own
    // end point (DiLoCo's rule for dropped results), once; a unit abandoned before its end, or
    // a second loss in a row, starts from the weights.
    void startBlendOneAfterALostResult() {
        Fixture f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto c = f.registerClient("c");
        auto loseAfter = [&](const net::Manifest& m, int64_t step) {
            auto ok = f.coordinator().progress(c.id, m.workUnitId,
                                               net::ProgressReport{step, 3.0f, 1.0}.toJson());
            *f.clock += 200;  // past the heartbeat timeout (180 s)
            f.coordinator().tick();
            return ok.ok();
        };
        const auto u1 = f.work(c);
        QVERIFY(f.upload(c, buildResult(u1, patternDelta(u1.model.parameterCount()), c.key)).ok());
        const auto u2 = f.work(c);
        QCOMPARE(u2.startBlend, 0.5f);  // u1 waits in the open round
        QVERIFY(loseAfter(u2, u2.innerSteps));
        const auto u3 = f.work(c);
        QCOMPARE(u3.startBlend, 1.0f);
        QVERIFY(loseAfter(u3, u3.innerSteps));
        const auto u4 = f.work(c);  // lost twice in a row: back to the weights
        QCOMPARE(u4.startBlend, 0.0f);
        QVERIFY(loseAfter(u4, u4.innerSteps - 1));
        const auto u5 = f.work(c);  // abandoned before its end: nothing was lost
        QCOMPARE(u5.startBlend, 0.0f);
        QVERIFY(f.logged("abandoned"));
        // A unit trained to its end whose result the gate refused (all zeros) ends at once, and
        // its end point is not trained on: the next unit starts from the weights.
        const int64_t P = u5.model.parameterCount();
        QVERIFY(f.upload(c, buildResult(u5, patternDelta(P, 1.2f), c.key)).ok());
        const auto u6 = f.work(c);
        QVERIFY(f.coordinator()
                    .progress(c.id, u6.workUnitId,
                              net::ProgressReport{u6.innerSteps, 3.0f, 1.0}.toJson())
                    .ok());
        const auto zero = f.upload(c, buildResult(u6, std::vector<uint16_t>(size_t(P), 0), c.key));
        QCOMPARE(zero.ok() ? std::string() : zero.refusal().code, std::string("zero_delta"));
        QVERIFY(f.logged("work unit " + std::to_string(u6.workUnitId) +
                         " abandoned: its result was refused (zero_delta)"));
        const auto u7 = f.work(c);
        QCOMPARE(u7.startBlend, 0.0f);
    }

    void startBlendZeroIsOff() {
        auto config = Fixture::config(2);
        config.startBlend = 0;
        DirectCoordinator f(config);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto c = f.registerClient("c");
        const auto u1 = f.work(c), u2 = f.work(c);
        QVERIFY(u1.workUnitId > 0 && u2.workUnitId > 0);
        QCOMPARE(u2.protocol, net::kProtocolVersion);
        QCOMPARE(u2.startBlend, 0.0f);
    }

    // A run with int8 results (--result-encoding int8): its manifests say so (version 5, signed,
    // max_upload_bytes of the int8 size), twins' too; a worker of an older protocol gets no
    // work, with words it shows as a protocol mismatch.
    void int8RunsStateTheirEncoding() {
        auto config = Fixture::config(2);
        config.resultEncoding = net::kEncodingInt8;
        config.replicateFraction = 1;  // every unit waits for a twin
        DirectCoordinator f(config);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto c = f.registerClient("c"), d = f.registerClient("d");
        const auto u = f.work(c);
        QCOMPARE(u.protocol, net::kResultEncodingProtocol);  // a twin's: the oldest with int8
        QCOMPARE(u.resultEncoding, net::kEncodingInt8);
        const int64_t P = u.model.parameterCount();
        QCOMPARE(u.maxUploadBytes, 128 + P + 4 * ((P + 255) / 256));
        QCOMPARE(f.coordinator().maxUploadBytes(), u.maxUploadBytes);
        QVERIFY(u.verify(f.coordinator().publicKey()));
        QCOMPARE(f.coordinator().status().resultEncoding, std::string("int8"));  // for the costs
        QVERIFY(u.toJson().find("\"result_encoding\":\"int8\"") != std::string::npos);
        const auto twin = f.work(d);
        QCOMPARE(twin.resultEncoding, net::kEncodingInt8);
        QCOMPARE(twin.protocol, net::kResultEncodingProtocol);
        for (const char* request :
             {R"({"device":"cpu","memory_bytes":0,"tokens_per_second":0,"free_disk_bytes":0})",
              R"({"device":"cpu","memory_bytes":0,"tokens_per_second":0,"free_disk_bytes":0,)"
              R"("protocol":4})"}) {
            auto old = f.coordinator().requestWork(d.id, request);
            QVERIFY(!old.ok());
            QCOMPARE(old.refusal().httpStatus, 409);
            QCOMPARE(old.refusal().code, std::string("protocol_too_old"));
            QVERIFY2(old.refusal().message.find("is not supported by this run: it takes int8 "
                                                "results") != std::string::npos,
                     old.refusal().message.c_str());
        }
        // The encoding is the run's: a restart with another --result-encoding keeps it.
        f.t().close();
        f.t().config().resultEncoding = net::kEncodingFp16;
        f.t().open();
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        QCOMPARE(f.coordinator().maxUploadBytes(), u.maxUploadBytes);
        bool noted = false;
        for (const auto& line : f.t().log())
            noted = noted || line.find(
                                 "takes int8 results; --result-encoding fp16 applies to new "
                                 "state directories only") != std::string::npos;
        QVERIFY(noted);
    }

    void limitsUnitsPerClient() {
        Fixture f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto a = f.registerClient("a");
        const auto m1 = f.work(a, 0), m2 = f.work(a, 0);
        QVERIFY(m1.workUnitId > 0 && m2.workUnitId > 0);
        auto third = f.request(a, 0);
        QVERIFY(!third.ok());
        QCOMPARE(third.refusal().httpStatus, 409);
        QCOMPARE(third.refusal().code, std::string("too_many_work_units"));
        QVERIFY(third.refusal().message.find("(" + std::to_string(m1.workUnitId) + ", " +
                                             std::to_string(m2.workUnitId) + ")") !=
                std::string::npos);
    }

    // A device that reports less memory than a unit needs gets no unit: all of the estimate for a
    // CPU, the backend's part for a GPU; exactly enough is enough.
    void refusesUnitThatDoesNotFitTheDevice() {
        Fixture f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto a = f.registerClient("a"), b = f.registerClient("b");
        const net::Manifest m = f.work(a, 0);
        const UnitMemoryEstimate e = estimateUnitMemory(m.model, m.batch, m.seqLen);
        auto ask = [&](const char* device, int64_t memory) {
            net::WorkRequest w;
            w.device = device;
            w.memoryBytes = memory;
            return f.coordinator().requestWork(b.id, w.toJson());
        };
        auto small = ask("cpu", e.sharedTotalBytes() - 1);
        QVERIFY(!small.ok());
        QCOMPARE(small.refusal().httpStatus, 409);
        QCOMPARE(small.refusal().code, std::string("insufficient_memory"));
        const std::string& why = small.refusal().message;
        QVERIFY2(why.find("needs " + formatMemory(e.sharedTotalBytes())) != std::string::npos,
                 why.c_str());
        QVERIFY2(why.find("available") != std::string::npos, why.c_str());
        QVERIFY(!ask("cuda:0 GPU", e.backendBytes() - 1).ok());
        QVERIFY(ask("cuda:0 GPU", e.backendBytes()).ok());
    }

    void reassignsAnAbandonedRange() {
        Fixture f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto m1 = f.work(a, 1.0);  // [0, 96)
        *f.clock += 181;                 // no heartbeat for longer than the timeout
        f.coordinator().tick();
        const std::string why = "no heartbeat for 181 s; its data was reassigned";
        QVERIFY(f.logged("work unit " + std::to_string(m1.workUnitId) + " abandoned: " + why));
        auto hb = f.coordinator().progress(a.id, m1.workUnitId,
                                           net::ProgressReport{1, 2.0f, 1.0}.toJson());
        QVERIFY(hb.ok());
        QCOMPARE(hb.value().action, std::string("abandon"));
        QCOMPARE(hb.value().reason, why);

        const auto m2 = f.work(b, 0);  // the same bytes, whatever its own H
        QCOMPARE(m2.dataOffset, int64_t{0});
        QCOMPARE(m2.dataLength, int64_t{96});
        QCOMPARE(m2.innerSteps, 8);
        QVERIFY(f.logged("(reassigned from work unit " + std::to_string(m1.workUnitId) + ")"));
        const auto m3 = f.work(b, 0);  // once only; then the cursor goes on
        QCOMPARE(m3.dataOffset, int64_t{96});
    }

    void noWorkOnceTheRoundSpansTheShard() {
        Fixture f(2000, 100);  // about 1900 train bytes: seven units of 256
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const size_t trainBytes = f.trainShard().size();
        QVERIFY(trainBytes >= 7 * 256 && trainBytes < 8 * 256);
        const auto a = f.registerClient("a");
        for (int i = 0; i < 7; ++i)
            QCOMPARE(f.work(a, 0).dataOffset, int64_t{256} * i);
        auto none = f.request(a, 0);
        QVERIFY(none.ok());
        QVERIFY(!none.value().manifest);
        QCOMPARE(none.value().retryAfterSeconds, 60);  // the deadline is 600 s away: at most 60
        *f.clock += 570;
        none = f.request(a, 0);
        QCOMPARE(none.value().retryAfterSeconds, 30);  // until the round's deadline
        *f.clock += 28;
        none = f.request(a, 0);
        QCOMPARE(none.value().retryAfterSeconds, 5);  // at least 5
    }

    void heartbeats() {
        Fixture f;
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto m = f.work(a, 0);
        *f.clock += 170;
        auto ok = f.coordinator().progress(a.id, m.workUnitId,
                                           net::ProgressReport{3, 4.5f, 2.0}.toJson());
        QVERIFY(ok.ok());
        QCOMPARE(ok.value().action, std::string("continue"));
        *f.clock += 170;  // 340 s after the start, 170 after the heartbeat: still alive
        f.coordinator().tick();
        QCOMPARE(f.coordinator()
                     .progress(a.id, m.workUnitId, net::ProgressReport{}.toJson())
                     .value()
                     .action,
                 std::string("continue"));

        auto other = f.coordinator().progress(b.id, m.workUnitId, net::ProgressReport{}.toJson());
        QCOMPARE(other.refusal().httpStatus, 403);
        QCOMPARE(other.refusal().code, std::string("not_your_work_unit"));
        auto unknown = f.coordinator().progress(a.id, 999, net::ProgressReport{}.toJson());
        QCOMPARE(unknown.refusal().httpStatus, 404);
        QCOMPARE(unknown.refusal().code, std::string("unknown_work_unit"));
        auto bad = f.coordinator().progress(a.id, m.workUnitId, "not json");
        QCOMPARE(bad.refusal().httpStatus, 400);
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorWork)
#include "test_coordinator_work.moc"
