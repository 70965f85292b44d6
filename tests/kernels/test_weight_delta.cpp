// Exact quantized weight deltas (kernels/weight_delta.hpp): a hand-worked int8 step, the
// coordinator's next weights equal to a worker's rebuild byte for byte on every CPU variant the
// build has (and to an independent scalar oracle that a fused multiply-add would not match),
// error feedback keeping the sum of applied updates within one step's quantization error of the
// true sum over many rounds, fp16 saturation carried in the residual, and the refusals.
#include "codec.hpp"
#include "random_floats.hpp"
#include "thread_pool.hpp"
#include "weight_delta.hpp"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace tandem;
using testing::randomFloats;

namespace {

bool sameBytes(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The rebuild written out independently: each product stored through a volatile, so it is
// rounded to float before the add whatever the compiler flags of this file.
std::vector<float> oracleRebuild(const std::vector<float>& old, const QuantizedDelta& q) {
    std::vector<float> out(old.size());
    for (size_t i = 0; i < old.size(); ++i) {
        volatile float d =
            q.codec == WeightDeltaCodec::Int8
                ? static_cast<float>(q.values[i]) * q.scales[i / static_cast<size_t>(q.blockSize)]
                : halfToFloat(q.halves[i]);
        out[i] = old[i] + d;
    }
    return out;
}

std::vector<CpuVariant> variants() {
    std::vector<CpuVariant> v{CpuVariant::Baseline};
    if (cpuVariantAvailable(CpuVariant::Avx2))
        v.push_back(CpuVariant::Avx2);
    return v;
}

}  // namespace

class TestWeightDelta : public QObject {
    Q_OBJECT
  private slots:
    void handWorkedInt8Step() {
        // u = [127, 64.375, -0.25] (exact in float): absmax 127 -> scale 1, q = [127, 64, 0],
        // next = old + [127, 64, 0], e' = [0, 0.375, -0.25].
        const std::vector<float> old{0.5f, 0.25f, 1.0f};
        std::vector<float> next{127.5f, 64.625f, 0.75f};
        std::vector<float> residual(3, 0.0f);
        auto q = quantizeWithFeedback(old, next, residual, WeightDeltaCodec::Int8);
        QVERIFY2(q.ok(), q ? "" : q.error().message.c_str());
        QCOMPARE(q->scales.size(), size_t{1});
        QCOMPARE(q->scales[0], 1.0f);
        QCOMPARE(q->values, (std::vector<int8_t>{127, 64, 0}));
        QCOMPARE(next, (std::vector<float>{127.5f, 64.25f, 1.0f}));
        QCOMPARE(residual, (std::vector<float>{0.0f, 0.375f, -0.25f}));
        QCOMPARE(q->payloadBytes(), int64_t{3 + 4});
        // The next round with no move (u = 0) sends the residual: x = [0, 0.375, -0.25].
        const std::vector<float> old2 = next;
        auto q2 = quantizeWithFeedback(old2, next, residual, WeightDeltaCodec::Int8);
        QVERIFY(q2.ok());
        QCOMPARE(q2->values[0], int8_t{0});
        QCOMPARE(q2->values[1], int8_t{127});
        QCOMPARE(q2->values[2], int8_t{-85});  // -0.25 / (0.375 / 127) = -84.67
        QVERIFY(std::abs(next[1] - 64.625f) < 1e-6f);
    }

    void coordinatorEqualsRebuildOnEveryVariant_data() {
        QTest::addColumn<int>("codec");
        QTest::addColumn<int>("threads");
        QTest::newRow("int8, 1 thread") << static_cast<int>(WeightDeltaCodec::Int8) << 1;
        QTest::newRow("int8, 3 threads") << static_cast<int>(WeightDeltaCodec::Int8) << 3;
        QTest::newRow("fp16, 1 thread") << static_cast<int>(WeightDeltaCodec::Fp16) << 1;
        QTest::newRow("fp16, 3 threads") << static_cast<int>(WeightDeltaCodec::Fp16) << 3;
    }
    void coordinatorEqualsRebuildOnEveryVariant() {
        QFETCH(int, codec);
        QFETCH(int, threads);
        const auto c = static_cast<WeightDeltaCodec>(codec);
        ThreadPool pool(threads);
        // Several chunks and a partial last block; weights of mixed magnitudes, so that the
        // rounding of each product matters.
        const int64_t P = 3 * 65536 + 1000;
        std::vector<float> old = randomFloats(P, 1, 0.05f);
        for (int64_t i = 0; i < P; i += 7)
            old[static_cast<size_t>(i)] *= 300.0f;
        const std::vector<float> move = randomFloats(P, 2, 1e-3f);
        const std::vector<float> carried = randomFloats(P, 3, 1e-5f);
        std::vector<std::vector<float>> results;
        for (CpuVariant v : variants()) {
            std::vector<float> next(old.size()), residual = carried;
            for (size_t i = 0; i < old.size(); ++i)
                next[i] = old[i] + move[i];
            auto q = quantizeWithFeedback(old, next, residual, c, &pool, v);
            QVERIFY2(q.ok(), q ? "" : q.error().message.c_str());
            // What a worker holding `old` rebuilds, on each variant, with and without threads.
            for (CpuVariant w : variants()) {
                std::vector<float> rebuilt = old;
                QVERIFY(
                    applyWeightDelta(rebuilt, *q, w == CpuVariant::Baseline ? nullptr : &pool, w));
                QVERIFY2(sameBytes(rebuilt, next),
                         "a worker's rebuild differs from the "
                         "coordinator's next weights");
            }
            const std::vector<float> oracle = oracleRebuild(old, *q);
            QVERIFY2(sameBytes(oracle, next), "next weights differ from old + float(q) * scale");
            // The test can see a fused multiply-add: somewhere it rounds differently.
            int64_t fusedDiffers = 0;
            for (size_t i = 0; i < old.size(); ++i) {
                const float fused =
                    c == WeightDeltaCodec::Int8
                        ? std::fma(static_cast<float>(q->values[i]),
                                   q->scales[i / static_cast<size_t>(q->blockSize)], old[i])
                        : old[i] + halfToFloat(q->halves[i]);  // fp16: the product is exact
                fusedDiffers += fused != next[i];
            }
            if (c == WeightDeltaCodec::Int8)
                QVERIFY2(fusedDiffers > 0, "no element where an FMA would round differently");
            // e' = x - deq(q) with x = (target - old) + carried, checked against the oracle's deq.
            for (size_t i = 0; i < old.size(); i += 97) {
                const float x = ((old[i] + move[i]) - old[i]) + carried[i];
                volatile float d = c == WeightDeltaCodec::Int8
                                       ? static_cast<float>(q->values[i]) *
                                             q->scales[i / static_cast<size_t>(q->blockSize)]
                                       : halfToFloat(q->halves[i]);
                QCOMPARE(residual[i], x - d);
            }
            results.push_back(next);
        }
        for (const auto& r : results)
            QVERIFY2(sameBytes(r, results.front()), "CPU variants give different next weights");
        if (!cpuVariantAvailable(CpuVariant::Avx2))
            qInfo("this CPU has no AVX2: only the baseline variant was run");
    }

    void errorFeedbackKeepsTheSum_data() {
        QTest::addColumn<int>("codec");
        QTest::newRow("int8") << static_cast<int>(WeightDeltaCodec::Int8);
        QTest::newRow("fp16") << static_cast<int>(WeightDeltaCodec::Fp16);
    }
    void errorFeedbackKeepsTheSum() {
        QFETCH(int, codec);
        const auto c = static_cast<WeightDeltaCodec>(codec);
        // 50 rounds of small moves: theta_R = theta_0 + sum(u_t) - e_R, up to float rounding of
        // the weights; without feedback the int8 error would grow with the rounds.
        const int64_t P = 4096;
        std::vector<float> theta = randomFloats(P, 7, 0.02f), residual(P, 0.0f);
        std::vector<double> exact(theta.begin(), theta.end());
        double withoutFeedbackError = 0;
        std::vector<double> noFeedback(theta.begin(), theta.end());
        for (int r = 0; r < 50; ++r) {
            const std::vector<float> u = randomFloats(P, 100 + r, 1e-3f);
            std::vector<float> next(P);
            for (int64_t i = 0; i < P; ++i)
                next[i] = theta[i] + u[i];
            std::vector<float> plainResidual(P, 0.0f), plainNext = next;
            auto plain = quantizeWithFeedback(theta, plainNext, plainResidual, c);
            QVERIFY(plain.ok());
            for (int64_t i = 0; i < P; ++i) {
                exact[i] += static_cast<double>(next[i]) - theta[i];
                noFeedback[i] += static_cast<double>(plainNext[i]) - theta[i];
            }
            auto q = quantizeWithFeedback(theta, next, residual, c);
            QVERIFY(q.ok());
            theta = next;
        }
        double worst = 0, worstResidual = 0;
        for (int64_t i = 0; i < P; ++i) {
            worst = std::max(worst, std::abs(exact[i] - (theta[i] + residual[i])));
            worstResidual = std::max(worstResidual, static_cast<double>(std::abs(residual[i])));
            withoutFeedbackError =
                std::max(withoutFeedbackError, std::abs(exact[i] - noFeedback[i]));
        }
        // theta + e' tracks the exact sum to float rounding of weights near 0.1.
        QVERIFY2(worst < 1e-6, qPrintable(QString::number(worst)));
        // The residual stays one step's quantization error (int8: half a step of absmax ~4e-3).
        QVERIFY2(worstResidual < (c == WeightDeltaCodec::Int8 ? 2e-5 : 1e-9) * 1000,
                 qPrintable(QString::number(worstResidual)));
        if (c == WeightDeltaCodec::Int8)
            QVERIFY2(withoutFeedbackError > 3 * worstResidual,
                     qPrintable(QString::number(withoutFeedbackError)));
    }

    void fp16SaturationIsCarried() {
        const std::vector<float> old{0.0f, 1.0f};
        std::vector<float> next{100000.0f, 1.0f};
        std::vector<float> residual(2, 0.0f);
        auto q = quantizeWithFeedback(old, next, residual, WeightDeltaCodec::Fp16);
        QVERIFY(q.ok());
        QCOMPARE(next[0], kHalfMax);
        QCOMPARE(residual[0], 100000.0f - kHalfMax);
        QCOMPARE(next[1], 1.0f);
        QCOMPARE(q->payloadBytes(), int64_t{4});
    }

    void refusals() {
        const std::vector<float> old{1.0f, 2.0f};
        std::vector<float> next{1.0f, std::numeric_limits<float>::quiet_NaN()};
        std::vector<float> residual(2, 0.0f);
        auto q = quantizeWithFeedback(old, next, residual, WeightDeltaCodec::Int8);
        QVERIFY(!q);
        QVERIFY2(q.error().message.find("non-finite") != std::string::npos,
                 q.error().message.c_str());
        QVERIFY(!quantizeWithFeedback(old, next, residual, WeightDeltaCodec::Off));
        std::vector<float> shortResidual(1, 0.0f);
        QVERIFY(!quantizeWithFeedback(old, next, shortResidual, WeightDeltaCodec::Int8));

        // A delta for another size leaves the weights untouched.
        QuantizedDelta wrong;
        wrong.values.assign(3, int8_t{1});
        wrong.scales.assign(1, 1.0f);
        std::vector<float> weights = old;
        auto st = applyWeightDelta(weights, wrong);
        QVERIFY(!st);
        QVERIFY2(st.error().message.find("expected 2 values") != std::string::npos,
                 st.error().message.c_str());
        QCOMPARE(weights, old);

        QCOMPARE(parseWeightDeltaCodec("int8"), std::optional(WeightDeltaCodec::Int8));
        QCOMPARE(parseWeightDeltaCodec("fp16"), std::optional(WeightDeltaCodec::Fp16));
        QCOMPARE(parseWeightDeltaCodec("off"), std::optional(WeightDeltaCodec::Off));
        QVERIFY(!parseWeightDeltaCodec("int4"));
    }
};

QTEST_APPLESS_MAIN(TestWeightDelta)
#include "test_weight_delta.moc"
