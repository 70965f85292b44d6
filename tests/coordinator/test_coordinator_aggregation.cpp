// Aggregation and the outer step, end to end through the Coordinator (no HTTP): hand-made fp16
// (or int8, in a run with that result encoding) deltas with chosen token counts, a stale result
// with reduced weight, uploads fed in odd-sized pieces, a restart in the middle of a round. The
// oracle decodes halves and int8 blocks with its own code and recomputes DESIGN.md §3 in float
// (bit-exact comparison) and in double (tolerance).
//
// Dimensions: P parameters.
#include "harness.hpp"

#include "codec.hpp"
#include "random.hpp"

#include <QtTest>

#include <cmath>

using namespace tandem;
using namespace tandem::testing;

namespace {

// Independent IEEE half decoder (no code shared with kernels/codec.cpp).
double decodeHalf(uint16_t h) {
    const int sign = (h >> 15) & 1, exponent = (h >> 10) & 31, mantissa = h & 1023;
    double v =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    return sign ? -v : v;
}

// Random halves in about [-scale, scale], from raw bit patterns (finite only).
std::vector<uint16_t> randomDelta(int64_t P, uint64_t seed, int maxExponent) {
    Rng rng(seed);
    std::vector<uint16_t> d(static_cast<size_t>(P));
    for (auto& h : d) {
        const uint16_t sign = static_cast<uint16_t>(rng.below(2) << 15);
        const uint16_t exponent =
            static_cast<uint16_t>(rng.below(static_cast<uint64_t>(maxExponent)));
        h = static_cast<uint16_t>(sign | (exponent << 10) | rng.below(1024));
    }
    return d;
}

std::vector<double> decodeHalves(const std::vector<uint16_t>& halves) {
    std::vector<double> out;
    for (uint16_t h : halves)
        out.push_back(decodeHalf(h));
    return out;
}

// A delta in a result encoding: its payload bytes and the values they stand for, exactly.
struct EncodedDelta {
    std::vector<uint8_t> bytes;
    std::vector<double> values;
};

// fp16: randomDelta's halves. int8 (written here by hand): blocks of an f32 scale between about
// 2^-(maxExponent + 5) and 2^-5 (values up to about 6, as the halves') and 256 values in
// [-127, 127]; value = q x scale, exact in double.
EncodedDelta encodedDelta(uint32_t encoding, int64_t P, uint64_t seed, int maxExponent) {
    EncodedDelta d;
    if (encoding == net::kEncodingFp16) {
        const auto halves = randomDelta(P, seed, maxExponent);
        const auto* raw = reinterpret_cast<const uint8_t*>(halves.data());
        d.bytes.assign(raw, raw + 2 * halves.size());
        d.values = decodeHalves(halves);
        return d;
    }
    Rng rng(seed);
    for (int64_t lo = 0; lo < P; lo += 256) {
        const float scale = std::ldexp(static_cast<float>(rng.uniform()) + 0.5f,
                                       -5 - static_cast<int>(rng.below(uint64_t(maxExponent))));
        const auto* raw = reinterpret_cast<const uint8_t*>(&scale);
        d.bytes.insert(d.bytes.end(), raw, raw + 4);
        for (int64_t i = lo; i < std::min<int64_t>(P, lo + 256); ++i) {
            const int q = static_cast<int>(rng.below(255)) - 127;
            d.bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
            d.values.push_back(double(q) * double(scale));
        }
    }
    return d;
}

struct Contribution {
    std::vector<double> delta;  // exact values
    double weight;
    // For a late result: the weights it was trained from (float and double oracle).
    const std::vector<float>* baseF = nullptr;
    const std::vector<double>* baseD = nullptr;
};

struct Oracle {
    std::vector<float> thetaF, velF;
    std::vector<double> thetaD, velD;
    float lr, mu;

    void round(const std::vector<Contribution>& parts) {
        const size_t P = thetaF.size();
        double W = 0;
        for (auto& c : parts)
            W += c.weight;
        std::vector<float> sumF(P, 0.0f);
        std::vector<double> sumD(P, 0.0);
        for (auto& c : parts)
            for (size_t i = 0; i < P; ++i) {
                const double x = c.delta[i];
                sumF[i] = sumF[i] + static_cast<float>(c.weight) * static_cast<float>(x);
                sumD[i] += c.weight * x;
            }
        // Late results are re-based at the close, after every commit: their delta becomes
        // theta - end = delta - (base - theta).
        for (auto& c : parts)
            if (c.baseF != nullptr)
                for (size_t i = 0; i < P; ++i) {
                    sumF[i] -= static_cast<float>(c.weight) * ((*c.baseF)[i] - thetaF[i]);
                    sumD[i] -= c.weight * ((*c.baseD)[i] - thetaD[i]);
                }
        const float scale = static_cast<float>(1.0 / W);
        for (size_t i = 0; i < P; ++i) {
            const float d = scale * sumF[i];
            velF[i] = mu * velF[i] + d;
            thetaF[i] = thetaF[i] - lr * (d + mu * velF[i]);
            const double dd = sumD[i] / W;
            velD[i] = double(mu) * velD[i] + dd;
            thetaD[i] -= double(lr) * (dd + double(mu) * velD[i]);
        }
    }
};

// A tiny model, H = 4, quorum 2, staleness bound 1 at weight x 0.5, the Byzantine gate off (the
// random deltas have no common direction; the weights must be exact).
coord::CoordinatorConfig smallRun(OuterConfig outer) {
    coord::CoordinatorConfig cfg;
    cfg.model = "L=1,NH=2,C=16,T=16";
    cfg.innerSteps = 4;
    cfg.batch = 2;
    cfg.quorum = 2;
    cfg.maxStaleness = 1;
    cfg.staleWeightFactor = 0.5;
    cfg.outer = outer;
    cfg.maxNormRatio = 1e9;
    cfg.clipNormRatio = 0;
    cfg.maxRelativeNorm = 0;
    cfg.minCosine = -1;
    cfg.refuseRepeatedPayloads = false;
    cfg.newClientWorkUnits = 1000;
    cfg.backgroundThreads = false;
    return cfg;
}

struct Direct {
    int64_t id = 0;
    net::SigningKey key = net::SigningKey::generate().value();
};

Direct registerDirect(coord::Coordinator& c, const std::string& name) {
    Direct d;
    auto r = c.registerClient(net::RegisterRequest{name, d.key.publicKey(), "test"}.toJson());
    auto id = c.authenticate("Bearer " + r.value().token);
    d.id = id.value();
    return d;
}

net::Manifest work(coord::Coordinator& c, const Direct& d) {
    auto o = c.requestWork(d.id, net::WorkRequest{"cpu", 1 << 30, 0, 1 << 30}.toJson());
    return *o.value().manifest;
}

// Feeds the body in pieces of 1..4999 bytes (splitting the header and single halves).
std::string uploadInPieces(coord::Coordinator& c, const Direct& d, const BuiltResult& r,
                           uint64_t seed) {
    auto s = c.beginUpload(d.id, r.header.workUnitId, int64_t(r.body.size()), r.signature);
    if (!s.ok())
        return "refused: " + s.refusal().message;
    Rng rng(seed);
    size_t pos = 0;
    while (pos < r.body.size()) {
        const size_t n = std::min<size_t>(r.body.size() - pos, 1 + rng.below(4999));
        auto early = s.value()->feed(std::span(r.body).subspan(pos, n));
        if (early)
            return early->ok() ? early->value() : "refused: " + early->refusal().message;
        pos += n;
    }
    auto out = s.value()->finish(true);
    return out.ok() ? out.value() : "refused: " + out.refusal().message;
}

}  // namespace

class TestCoordinatorAggregation : public QObject {
    Q_OBJECT
  private slots:
    void roundsGiveExactlyTheExpectedWeights_data() {
        QTest::addColumn<bool>("backgroundThreads");
        QTest::addColumn<uint32_t>("encoding");
        QTest::newRow("commit adds, commit closes") << false << net::kEncodingFp16;
        // The aggregator thread adds the stored payloads, the ticker closes the round.
        QTest::newRow("aggregator thread, ticker closes") << true << net::kEncodingFp16;
        // A run with int8 results (--result-encoding int8): the same sums from int8 blocks.
        QTest::newRow("int8, commit adds") << false << net::kEncodingInt8;
        QTest::newRow("int8, aggregator thread") << true << net::kEncodingInt8;
    }
    void roundsGiveExactlyTheExpectedWeights() {
        QFETCH(bool, backgroundThreads);
        QFETCH(uint32_t, encoding);
        coord::CoordinatorConfig cfg = smallRun(OuterConfig{0.5f, 0.75f});
        cfg.backgroundThreads = backgroundThreads;
        cfg.resultEncoding = encoding;
        TestCoordinator t(cfg, /*withServer=*/false);
        QVERIFY2(t.ok(), t.error().c_str());
        coord::Coordinator* c = &t.coordinator();
        const int64_t P = c->parameterCount();

        Oracle oracle{c->weights(), std::vector<float>(size_t(P), 0.0f), {}, {}, 0.5f, 0.75f};
        oracle.thetaD.assign(oracle.thetaF.begin(), oracle.thetaF.end());
        oracle.velD.assign(size_t(P), 0.0);

        auto a = registerDirect(*c, "a");
        auto b = registerDirect(*c, "b");
        auto cc = registerDirect(*c, "c");
        auto wuA = work(*c, a), wuB = work(*c, b), wuC = work(*c, cc);
        QCOMPARE(wuA.resultEncoding, encoding);
        QCOMPARE(wuA.maxUploadBytes,
                 int64_t(net::kResultHeaderBytes) +
                     (encoding == net::kEncodingFp16 ? 2 * P : P + 4 * ((P + 255) / 256)));
        const auto eA = encodedDelta(encoding, P, 1, 18), eB = encodedDelta(encoding, P, 2, 18),
                   eC = encodedDelta(encoding, P, 3, 18);
        const auto &dA = eA.values, &dB = eB.values, &dC = eC.values;

        auto rA = buildEncodedResult(wuA, encoding, eA.bytes, a.key, 32);
        auto rB = buildEncodedResult(wuB, encoding, eB.bytes, b.key, 96);
        auto receiptA = net::Receipt::fromJson(uploadInPieces(*c, a, rA, 11));
        QVERIFY(receiptA.ok());
        QCOMPARE(receiptA->weight, 32.0);
        QCOMPARE(receiptA->credit, std::optional<int64_t>(32));
        QCOMPARE(c->currentVersion(), 0);
        QVERIFY(net::Receipt::fromJson(uploadInPieces(*c, b, rB, 12)).ok());
        QTRY_COMPARE_WITH_TIMEOUT(c->currentVersion(), int64_t(1),
                                  30000);  // quorum 2 closed round 0
        const std::vector<float> theta0F = oracle.thetaF;
        const std::vector<double> theta0D = oracle.thetaD;
        oracle.round({{dA, 32}, {dB, 96}});
        QCOMPARE(c->weights(), oracle.thetaF);
        QCOMPARE(c->velocity(), oracle.velF);

        // Round 1: C's result is one version old (weight 128 x 0.5); then a restart mid-round.
        auto rC = buildEncodedResult(wuC, encoding, eC.bytes, cc.key, 128);
        auto receiptC = net::Receipt::fromJson(uploadInPieces(*c, cc, rC, 13));
        QVERIFY(receiptC.ok());
        QCOMPARE(receiptC->round, 1);
        QCOMPARE(receiptC->weight, 64.0);                         // 128 tokens x 0.5^1
        QCOMPARE(receiptC->credit, std::optional<int64_t>(128));  // full credit all the same
        t.close();
        t.open();
        QVERIFY2(t.ok(), t.error().c_str());
        c = &t.coordinator();
        QCOMPARE(c->currentVersion(), 1);
        QCOMPARE(c->weights(), oracle.thetaF);
        QCOMPARE(c->velocity(), oracle.velF);
        // A retry of C after the restart is answered with the same receipt, not counted again.
        QCOMPARE(net::Receipt::fromJson(uploadInPieces(*c, cc, rC, 14))->weight, 64.0);

        auto wuA2 = work(*c, a);
        QCOMPARE(wuA2.baseVersion, 1);
        // The run-wide inner schedule: version 1 starts at the run's step 1 x H = 4, in the
        // default 100-step warmup.
        QCOMPARE(wuA2.lrStartStep, int64_t(4));
        QCOMPARE(wuA2.learningRate(0), cfg.innerPeakLr * 5 / 100);
        const auto eA2 = encodedDelta(encoding, P, 4, 16);
        const auto& dA2 = eA2.values;
        auto rA2 = buildEncodedResult(wuA2, encoding, eA2.bytes, a.key, 64);
        QVERIFY(net::Receipt::fromJson(uploadInPieces(*c, a, rA2, 15)).ok());
        QTRY_COMPARE_WITH_TIMEOUT(c->currentVersion(), int64_t(2), 30000);
        oracle.round({{dC, 64, &theta0F, &theta0D}, {dA2, 64}});
        QCOMPARE(c->weights(), oracle.thetaF);
        QCOMPARE(c->velocity(), oracle.velF);
        const auto w = c->weights();
        for (int64_t i = 0; i < P; ++i) {
            const double x = oracle.thetaD[size_t(i)];
            QVERIFY2(std::abs(w[size_t(i)] - x) <= 1e-6 * (1 + std::abs(x)),
                     qPrintable(
                         QString("parameter %1: %2 vs double %3").arg(i).arg(w[size_t(i)]).arg(x)));
        }

        auto status = c->status();
        QCOMPARE(status.history.size(), size_t(2));
        QCOMPARE(status.history[0].contributors, 2);
        QCOMPARE(status.history[0].tokens, int64_t(128));
        QCOMPARE(status.history[1].contributors, 2);
        QCOMPARE(status.history[1].tokens, int64_t(192));
        QCOMPARE(status.totalTokens, int64_t(320));
        // The published version-2 file holds the same weights.
        t.close();
        t.open();
        QCOMPARE(t.coordinator().weights(), oracle.thetaF);
    }

    // With outer lr 1 and no momentum, a round of results that are all one version late must
    // publish the weighted mean of their workers' end points (theta_0 - delta), not re-apply
    // round 0's step on top of version 1.
    void lateResultsLandOnTheirEndPoints() {
        coord::CoordinatorConfig cfg = smallRun(OuterConfig{1.0f, 0.0f});
        cfg.lrWarmupSteps = 3;
        TestCoordinator t(cfg, false);
        QVERIFY2(t.ok(), t.error().c_str());
        auto& c = t.coordinator();
        const int64_t P = c.parameterCount();
        const std::vector<float> theta0 = c.weights();
        std::vector<Direct> clients;
        std::vector<net::Manifest> units;
        for (const char* name : {"a", "b", "c", "d"}) {
            clients.push_back(registerDirect(c, name));
            units.push_back(work(c, clients.back()));
        }
        // Warmup over the run's first 3 steps, then constant at the peak (no decay set).
        QCOMPARE(units[0].learningRate(0), cfg.innerPeakLr / 3);
        QCOMPARE(units[0].learningRate(2), cfg.innerPeakLr);
        QCOMPARE(units[0].learningRate(1000), cfg.innerPeakLr);
        std::vector<std::vector<uint16_t>> deltas;
        for (uint64_t k = 0; k < 4; ++k)
            deltas.push_back(randomDelta(P, 20 + k, 13));
        const int64_t tokens[4] = {64, 64, 32, 96};
        for (size_t k = 0; k < 4; ++k) {
            auto receipt = net::Receipt::fromJson(uploadInPieces(
                c, clients[k], buildResult(units[k], deltas[k], clients[k].key, tokens[k]), k));
            QVERIFY(receipt.ok());
            QCOMPARE(receipt->round, int64_t(k / 2));
        }
        QCOMPARE(c.currentVersion(), 2);
        const auto theta2 = c.weights();
        double farthest = 0;
        for (int64_t i = 0; i < P; ++i) {
            const double endC = theta0[size_t(i)] - decodeHalf(deltas[2][size_t(i)]);
            const double endD = theta0[size_t(i)] - decodeHalf(deltas[3][size_t(i)]);
            const double mean = (32 * endC + 96 * endD) / 128;
            QVERIFY2(std::abs(theta2[size_t(i)] - mean) <= 1e-5,
                     qPrintable(QString("parameter %1: %2, mean of the end points %3")
                                    .arg(i)
                                    .arg(theta2[size_t(i)])
                                    .arg(mean)));
            farthest = std::max(
                farthest, std::abs(mean - (theta0[size_t(i)] - decodeHalf(deltas[0][size_t(i)]))));
        }
        QVERIFY(farthest > 1e-3);  // round 0's step is big enough to tell the two apart
    }

    // --quorum auto: a round waits for every worker holding a live unit, and a worker that
    // goes silent stops holding it up once its heartbeat times out.
    void roundWaitsForEveryActiveWorker() {
        coord::CoordinatorConfig cfg = smallRun(OuterConfig{0.5f, 0.75f});
        cfg.quorum = 1;
        cfg.quorumOfActiveWorkers = true;
        cfg.heartbeatTimeoutSeconds = 60;
        int64_t now = 1'800'000'000;
        cfg.clock = [&now] { return now; };
        TestCoordinator t(cfg, false);
        QVERIFY2(t.ok(), t.error().c_str());
        auto& c = t.coordinator();
        const int64_t P = c.parameterCount();
        std::vector<Direct> clients;
        std::vector<net::Manifest> units;
        for (const char* name : {"a", "b", "c"}) {
            clients.push_back(registerDirect(c, name));
            units.push_back(work(c, clients.back()));
        }
        auto send = [&](size_t k, const net::Manifest& m, uint64_t seed) {
            return net::Receipt::fromJson(
                       uploadInPieces(c, clients[k],
                                      buildResult(m, randomDelta(P, seed, 12), clients[k].key),
                                      seed))
                .ok();
        };
        QVERIFY(send(0, units[0], 1));
        QVERIFY(send(1, units[1], 2));
        QCOMPARE(c.currentVersion(), 0);  // c still trains
        QVERIFY(send(2, units[2], 3));
        QCOMPARE(c.currentVersion(), 1);

        const auto a1 = work(c, clients[0]);
        work(c, clients[1]);  // b takes a unit and goes silent
        QVERIFY(send(0, a1, 4));
        QCOMPARE(c.currentVersion(), 1);
        now += 30;
        c.tick();
        QCOMPARE(c.currentVersion(), 1);  // b's heartbeat is still live
        now += 31;
        c.tick();  // b's unit times out: a was the only active worker
        QCOMPARE(c.currentVersion(), 2);
    }

    // Four results of one round accepted in an order other than their work units' (d, b, a, c),
    // with the aggregator thread and a restart after the third: the weights are the float
    // oracle's summing in acceptance order, bit for bit (and summing in work-unit order gives
    // other bits, so the order is what is checked).
    void theSumIsAddedInAcceptanceOrder() {
        coord::CoordinatorConfig cfg = smallRun(OuterConfig{0.5f, 0.75f});
        cfg.quorum = 4;
        cfg.backgroundThreads = true;
        TestCoordinator t(cfg, /*withServer=*/false);
        QVERIFY2(t.ok(), t.error().c_str());
        coord::Coordinator* c = &t.coordinator();
        const int64_t P = c->parameterCount();
        Oracle accepted{c->weights(), std::vector<float>(size_t(P), 0.0f), {}, {}, 0.5f, 0.75f};
        accepted.thetaD.assign(accepted.thetaF.begin(), accepted.thetaF.end());
        accepted.velD.assign(size_t(P), 0.0);
        Oracle byUnit = accepted;
        std::vector<Direct> clients;
        std::vector<net::Manifest> units;
        std::vector<std::vector<uint16_t>> deltas;
        for (int i = 0; i < 4; ++i) {
            clients.push_back(registerDirect(*c, "c" + std::to_string(i)));
            units.push_back(work(*c, clients.back()));
            deltas.push_back(randomDelta(P, 40 + uint64_t(i), 20));  // wide range: rounding shows
        }
        const int order[4] = {3, 1, 0, 2};
        const double weights[4] = {16, 48, 80, 112};  // tokens, at most 4 steps x 2 x 16
        for (int k = 0; k < 4; ++k) {
            const int i = order[k];
            const auto r = buildResult(units[size_t(i)], deltas[size_t(i)], clients[size_t(i)].key,
                                       int64_t(weights[i]));
            QVERIFY(net::Receipt::fromJson(uploadInPieces(*c, clients[size_t(i)], r, 20 + k)).ok());
            if (k == 2) {  // the first three are re-added from their files, in their order
                t.close();
                t.open();
                QVERIFY2(t.ok(), t.error().c_str());
                c = &t.coordinator();
            }
        }
        QTRY_COMPARE_WITH_TIMEOUT(c->currentVersion(), int64_t(1), 30000);
        std::vector<Contribution> inAcceptanceOrder, inUnitOrder;
        for (int k = 0; k < 4; ++k)
            inAcceptanceOrder.push_back(
                {decodeHalves(deltas[size_t(order[k])]), weights[order[k]]});
        for (int i = 0; i < 4; ++i)
            inUnitOrder.push_back({decodeHalves(deltas[size_t(i)]), weights[i]});
        accepted.round(inAcceptanceOrder);
        byUnit.round(inUnitOrder);
        QVERIFY(accepted.thetaF != byUnit.thetaF);
        QCOMPARE(c->weights(), accepted.thetaF);
        QCOMPARE(c->velocity(), accepted.velF);
    }

    void refusedUploadLeavesTheSumUntouched() {
        coord::CoordinatorConfig cfg = smallRun(OuterConfig{0.5f, 0.75f});
        TestCoordinator t(cfg, false);
        QVERIFY2(t.ok(), t.error().c_str());
        auto& c = t.coordinator();
        const int64_t P = c.parameterCount();
        Oracle oracle{c.weights(), std::vector<float>(size_t(P), 0.0f), {}, {}, 0.5f, 0.75f};
        oracle.thetaD.assign(oracle.thetaF.begin(), oracle.thetaF.end());
        oracle.velD.assign(size_t(P), 0.0);
        auto a = registerDirect(c, "a");
        auto b = registerDirect(c, "b");
        auto wuA = work(c, a), wuB = work(c, b);
        const auto dA = randomDelta(P, 5, 18), dB = randomDelta(P, 6, 18);
        // B first sends a payload that is fully staged and scanned, then fails the digest.
        auto bad = buildResult(wuB, randomDelta(P, 7, 20), b.key, 64);
        bad.body.back() ^= 0x01;
        QVERIFY(uploadInPieces(c, b, bad, 1).find("SHA-256") != std::string::npos);
        QVERIFY(
            net::Receipt::fromJson(uploadInPieces(c, a, buildResult(wuA, dA, a.key, 64), 2)).ok());
        QVERIFY(
            net::Receipt::fromJson(uploadInPieces(c, b, buildResult(wuB, dB, b.key, 64), 3)).ok());
        oracle.round({{decodeHalves(dA), 64}, {decodeHalves(dB), 64}});
        QCOMPARE(c.weights(), oracle.thetaF);
    }
};

QTEST_APPLESS_MAIN(TestCoordinatorAggregation)
#include "test_coordinator_aggregation.moc"
