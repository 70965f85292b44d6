// The fast CPU ops ("cpu") against the CPU reference: every op forward and backward on several
// shapes (odd channel counts, T = 1, B = 1, NH = 1, sequences longer than one attention block)
// and thread counts; matrix products that split without changing a bit. Whole training steps
// are test_cpu_backend's.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, V vocab, N
// element count, P parameters.
#include "cpu/cpu_ops.hpp"
#include "cpu_reference/reference_ops.hpp"
#include "cpu_test_support.hpp"
#include "model.hpp"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace tandem;
using namespace tandem::testing;

namespace {

Floats randomFloats(size_t n, uint64_t seed, float scale = 1.0f) {
    Rng rng(seed);
    Floats v(n);
    for (float& x : v)
        x = (2.0f * rng.uniform() - 1.0f) * scale;
    return v;
}

// Forward ops: tight. Backward ops sum over more terms in float (the reference in double).
constexpr double kForwardBound = 1e-5;
constexpr double kBackwardBound = 2e-5;

struct Shape {
    int B, T, C, NH;
};

void addShapeRows() {
    QTest::addColumn<int>("B");
    QTest::addColumn<int>("T");
    QTest::addColumn<int>("C");
    QTest::addColumn<int>("NH");
    QTest::addColumn<int>("threads");
    const struct {
        const char* name;
        Shape shape;
    } shapes[] = {
        {"B2 T8 C16 NH4", {2, 8, 16, 4}},
        {"B3 T5 C12 NH3 (C not a multiple of 8)", {3, 5, 12, 3}},
        {"B1 T1 C7 NH1", {1, 1, 7, 1}},
        {"B2 T37 C33 NH3 (T over one attention block)", {2, 37, 33, 3}},
        {"B1 T70 C64 NH2", {1, 70, 64, 2}},
        {"B4 T64 C96 NH3 (several blocks of every product)", {4, 64, 96, 3}},
    };
    for (const auto& s : shapes) {
        for (int threads : {1, 2}) {
            QTest::newRow(qPrintable(QStringLiteral("%1, %2 thread(s)").arg(s.name).arg(threads)))
                << s.shape.B << s.shape.T << s.shape.C << s.shape.NH << threads;
        }
    }
}

#define FETCH_SHAPE()     \
    QFETCH(int, B);       \
    QFETCH(int, T);       \
    QFETCH(int, C);       \
    QFETCH(int, NH);      \
    QFETCH(int, threads); \
    (void)NH, (void)C;    \
    CpuOps fast(threads); \
    ReferenceOps ref;     \
    const size_t BT = size_t(B) * T

// matmulForward and matmulBackward of `fast` against the reference, for three OC and with and
// without a bias.
void matmulAgainstReference(CpuOps& fast, ReferenceOps& ref, int B, int T, int C) {
    const size_t BT = size_t(B) * T;
    for (int OC : {3 * C, C + 5, 1}) {
        for (bool withBias : {true, false}) {
            const Floats inp = randomFloats(BT * C, 21), weight = randomFloats(size_t(OC) * C, 22);
            const Floats bias = randomFloats(OC, 23);
            const float* b = withBias ? bias.data() : nullptr;
            Floats outFast(BT * OC, 5.0f), outRef(BT * OC, -5.0f);
            fast.matmulForward(outFast.data(), inp.data(), weight.data(), b, B, T, C, OC);
            ref.matmulForward(outRef.data(), inp.data(), weight.data(), b, B, T, C, OC);
            CHECK_CLOSE(outFast, outRef, kForwardBound);

            const Floats dout = randomFloats(BT * OC, 24);
            Floats dinpFast = randomFloats(BT * C, 25),
                   dweightFast = randomFloats(size_t(OC) * C, 26), dbiasFast = randomFloats(OC, 27);
            Floats dinpRef = dinpFast, dweightRef = dweightFast, dbiasRef = dbiasFast;
            fast.matmulBackward(dinpFast.data(), dweightFast.data(),
                                withBias ? dbiasFast.data() : nullptr, dout.data(), inp.data(),
                                weight.data(), B, T, C, OC);
            ref.matmulBackward(dinpRef.data(), dweightRef.data(),
                               withBias ? dbiasRef.data() : nullptr, dout.data(), inp.data(),
                               weight.data(), B, T, C, OC);
            CHECK_CLOSE(dinpFast, dinpRef, kBackwardBound);
            CHECK_CLOSE(dweightFast, dweightRef, kBackwardBound);
            CHECK_CLOSE(dbiasFast, dbiasRef, kBackwardBound);
        }
    }
}

}  // namespace

class TestCpuOps : public QObject {
    Q_OBJECT
  private slots:
    void encoder_data() { addShapeRows(); }
    void encoder() {
        FETCH_SHAPE();
        const int maxT = T + 3;
        const auto inp = randomTokens(BT, 1, kV);
        const Floats wte = randomFloats(size_t(kV) * C, 2), wpe = randomFloats(size_t(maxT) * C, 3);
        Floats outFast(BT * C, 9.0f), outRef(BT * C, -9.0f);
        fast.encoderForward(outFast.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
        ref.encoderForward(outRef.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
        CHECK_CLOSE(outFast, outRef, kForwardBound);

        const Floats dout = randomFloats(BT * C, 4);
        Floats dwteFast = randomFloats(size_t(kV) * C, 5),
               dwpeFast = randomFloats(size_t(maxT) * C, 6);
        Floats dwteRef = dwteFast, dwpeRef = dwpeFast;
        fast.encoderBackward(dwteFast.data(), dwpeFast.data(), dout.data(), inp.data(), B, T, C);
        ref.encoderBackward(dwteRef.data(), dwpeRef.data(), dout.data(), inp.data(), B, T, C);
        CHECK_CLOSE(dwteFast, dwteRef, kBackwardBound);
        CHECK_CLOSE(dwpeFast, dwpeRef, kBackwardBound);
    }

    void layernorm_data() { addShapeRows(); }
    void layernorm() {
        FETCH_SHAPE();
        Floats inp = randomFloats(BT * C, 11, 2.0f);
        for (size_t i = 0; i < inp.size(); ++i)
            inp[i] += float(i % 5);  // a mean far from 0
        const Floats weight = randomFloats(C, 12), bias = randomFloats(C, 13);
        Floats outFast(BT * C), meanFast(BT), rstdFast(BT), outRef(BT * C), meanRef(BT),
            rstdRef(BT);
        fast.layernormForward(outFast.data(), meanFast.data(), rstdFast.data(), inp.data(),
                              weight.data(), bias.data(), B, T, C);
        ref.layernormForward(outRef.data(), meanRef.data(), rstdRef.data(), inp.data(),
                             weight.data(), bias.data(), B, T, C);
        CHECK_CLOSE(outFast, outRef, kForwardBound);
        CHECK_CLOSE(meanFast, meanRef, kForwardBound);
        CHECK_CLOSE(rstdFast, rstdRef, kForwardBound);

        const Floats dout = randomFloats(BT * C, 14);
        Floats dinpFast = randomFloats(BT * C, 15), dweightFast = randomFloats(C, 16),
               dbiasFast = randomFloats(C, 17);
        Floats dinpRef = dinpFast, dweightRef = dweightFast, dbiasRef = dbiasFast;
        fast.layernormBackward(dinpFast.data(), dweightFast.data(), dbiasFast.data(), dout.data(),
                               inp.data(), weight.data(), meanRef.data(), rstdRef.data(), B, T, C);
        ref.layernormBackward(dinpRef.data(), dweightRef.data(), dbiasRef.data(), dout.data(),
                              inp.data(), weight.data(), meanRef.data(), rstdRef.data(), B, T, C);
        CHECK_CLOSE(dinpFast, dinpRef, kBackwardBound);
        CHECK_CLOSE(dweightFast, dweightRef, kBackwardBound);
        CHECK_CLOSE(dbiasFast, dbiasRef, kBackwardBound);
    }

    void matmul_data() { addShapeRows(); }
    // Both product paths: the own AVX-512 GEMM (where this CPU has it) and OpenBLAS.
    void matmul() {
        FETCH_SHAPE();
        (void)BT, (void)fast;
        for (CpuProducts products : {CpuProducts::Fastest, CpuProducts::OpenBlas}) {
            CpuOps ops(threads, products);
            matmulAgainstReference(ops, ref, B, T, C);
        }
    }
    void attention_data() { addShapeRows(); }
    void attention() {
        FETCH_SHAPE();
        const size_t att = size_t(B) * NH * T * T;
        const Floats inp = randomFloats(BT * 3 * C, 31, 1.5f);
        // Garbage in the outputs: every element must be written.
        Floats outFast(BT * C, 7.0f), preFast(att, 7.0f), attFast(att, 7.0f);
        Floats outRef(BT * C), preRef(att), attRef(att);
        fast.attentionForward(outFast.data(), preFast.data(), attFast.data(), inp.data(), B, T, C,
                              NH);
        ref.attentionForward(outRef.data(), preRef.data(), attRef.data(), inp.data(), B, T, C, NH);
        CHECK_CLOSE(outFast, outRef, kForwardBound);
        CHECK_CLOSE(preFast, preRef, kForwardBound);
        CHECK_CLOSE(attFast, attRef, kForwardBound);

        const Floats dout = randomFloats(BT * C, 32);
        Floats dinpFast = randomFloats(BT * 3 * C, 33), dpreFast(att, 3.0f), dattFast(att, 3.0f);
        Floats dinpRef = dinpFast, dpreRef(att), dattRef(att);
        fast.attentionBackward(dinpFast.data(), dpreFast.data(), dattFast.data(), dout.data(),
                               inp.data(), attRef.data(), B, T, C, NH);
        ref.attentionBackward(dinpRef.data(), dpreRef.data(), dattRef.data(), dout.data(),
                              inp.data(), attRef.data(), B, T, C, NH);
        CHECK_CLOSE(dinpFast, dinpRef, kBackwardBound);
        CHECK_CLOSE(dpreFast, dpreRef, kBackwardBound);
        CHECK_CLOSE(dattFast, dattRef, kBackwardBound);
    }

    void gelu_data() { addShapeRows(); }
    void gelu() {
        FETCH_SHAPE();
        const size_t N = BT * 4 * C;
        Floats inp = randomFloats(N, 41, 6.0f);
        inp[0] = -30.0f;  // far tails: the exp clamp
        if (N > 1)
            inp[1] = 30.0f;
        Floats outFast(N), outRef(N);
        fast.geluForward(outFast.data(), inp.data(), int64_t(N));
        ref.geluForward(outRef.data(), inp.data(), int64_t(N));
        CHECK_CLOSE(outFast, outRef, kForwardBound);

        const Floats dout = randomFloats(N, 42);
        Floats dinpFast = randomFloats(N, 43), dinpRef = dinpFast;
        fast.geluBackward(dinpFast.data(), inp.data(), dout.data(), int64_t(N));
        ref.geluBackward(dinpRef.data(), inp.data(), dout.data(), int64_t(N));
        CHECK_CLOSE(dinpFast, dinpRef, kBackwardBound);
    }

    void residual_data() { addShapeRows(); }
    void residual() {
        FETCH_SHAPE();
        const size_t N = BT * C;
        const Floats a = randomFloats(N, 51), b = randomFloats(N, 52);
        Floats outFast(N), outRef(N);
        fast.residualForward(outFast.data(), a.data(), b.data(), int64_t(N));
        ref.residualForward(outRef.data(), a.data(), b.data(), int64_t(N));
        QCOMPARE(outFast, outRef);  // one addition: exact
    }

    void softmaxCrossEntropy_data() { addShapeRows(); }
    // Byte vocabulary, then odd ones whose logits rows are padded (300 -> 320, 50257 -> 50304).
    void softmaxCrossEntropy() {
        FETCH_SHAPE();
        for (const int V : {kV, 300, 50257}) {
            const int Vp = ModelConfig{1, 1, 1, 1, V}.paddedVocab();
            const size_t N = BT * Vp;
            Floats logits = randomFloats(N, 61, 8.0f);
            logits[0] = 60.0f;  // a dominant logit: other probabilities underflow the exp clamp
            for (size_t row = 0; row < BT; ++row) {  // padded logits that would win if counted
                for (int j = V; j < Vp; ++j)
                    logits[row * Vp + j] = 1000.0f;
            }
            const auto targets = randomTokens(BT, 62, V);
            Floats lossFast(BT), probsFast(N, 5.0f), lossRef(BT), probsRef(N, -5.0f);
            fast.softmaxCrossEntropyForward(lossFast.data(), probsFast.data(), logits.data(),
                                            targets.data(), B, T, V, Vp);
            ref.softmaxCrossEntropyForward(lossRef.data(), probsRef.data(), logits.data(),
                                           targets.data(), B, T, V, Vp);
            CHECK_CLOSE(probsFast, probsRef, kForwardBound);
            CHECK_CLOSE(lossFast, lossRef, kForwardBound);
            for (size_t row = 0; row < BT; ++row) {
                for (int j = V; j < Vp; ++j)
                    QCOMPARE(probsFast[row * Vp + j], 0.0f);
            }

            const Floats dloss = randomFloats(BT, 63);
            Floats dFast = randomFloats(N, 64), dRef = dFast;
            const Floats before = dFast;
            fast.crossEntropySoftmaxBackward(dFast.data(), dloss.data(), probsRef.data(),
                                             targets.data(), B, T, V, Vp);
            ref.crossEntropySoftmaxBackward(dRef.data(), dloss.data(), probsRef.data(),
                                            targets.data(), B, T, V, Vp);
            CHECK_CLOSE(dFast, dRef, kBackwardBound);
            for (size_t row = 0; row < BT; ++row) {  // the padded columns get nothing
                for (int j = V; j < Vp; ++j)
                    QCOMPARE(dFast[row * Vp + j], before[row * Vp + j]);
            }
        }
    }

    void nanPropagates() {
        CpuOps fast(2);
        const int B = 1, T = 1, V = kV;
        Floats logits = randomFloats(V, 71);
        logits[7] = std::numeric_limits<float>::quiet_NaN();
        const std::vector<int32_t> target{3};
        Floats loss(1), probs(V);
        fast.softmaxCrossEntropyForward(loss.data(), probs.data(), logits.data(), target.data(), B,
                                        T, V, V);
        QVERIFY(std::isnan(loss[0]));
        Floats x{std::numeric_limits<float>::quiet_NaN(), 1.0f}, y(2);
        fast.geluForward(y.data(), x.data(), 2);
        QVERIFY(std::isnan(y[0]));
        QVERIFY(std::isnan(fast.sumSquares(x.data(), 2)));
    }

    void optimizer_data() {
        QTest::addColumn<int>("N");
        QTest::addColumn<int>("threads");
        for (int N : {1, 37, 100'003, 1'000'000}) {
            for (int threads : {1, 2})
                QTest::newRow(qPrintable(QStringLiteral("N=%1, %2 thread(s)").arg(N).arg(threads)))
                    << N << threads;
        }
    }
    void optimizer() {
        QFETCH(int, N);
        QFETCH(int, threads);
        CpuOps fast(threads);
        ReferenceOps ref;
        const Floats grads = randomFloats(N, 81, 0.1f);
        const double sumFast = fast.sumSquares(grads.data(), N);
        const double sumRef = ref.sumSquares(grads.data(), N);
        QVERIFY2(std::fabs(sumFast - sumRef) <= 1e-12 * sumRef,
                 qPrintable(
                     QStringLiteral("%1 vs %2").arg(sumFast, 0, 'g', 17).arg(sumRef, 0, 'g', 17)));

        Floats pFast = randomFloats(N, 82), mFast = randomFloats(N, 83, 0.01f),
               vFast = randomFloats(N, 84, 0.001f);
        for (float& v : vFast)
            v = std::fabs(v);
        Floats pRef = pFast, mRef = mFast, vRef = vFast;
        for (int64_t t : {1, 2, 7}) {
            fast.adamwUpdate(pFast.data(), grads.data(), mFast.data(), vFast.data(), N, 1e-3f, 0.9f,
                             0.95f, 1e-8f, 0.1f, 0.5f, t);
            ref.adamwUpdate(pRef.data(), grads.data(), mRef.data(), vRef.data(), N, 1e-3f, 0.9f,
                            0.95f, 1e-8f, 0.1f, 0.5f, t);
        }
        CHECK_CLOSE(pFast, pRef, 1e-6);
        CHECK_CLOSE(mFast, mRef, 1e-6);
        CHECK_CLOSE(vFast, vRef, 1e-6);
    }

    void encodeDelta() {
        const int N = 200'000;
        Floats start = randomFloats(N, 91, 3.0f), current = randomFloats(N, 92, 3.0f);
        start[5] = 1e6f;                                    // saturates
        start[6] = -7e4f;                                   // saturates
        start[7] = std::numeric_limits<float>::infinity();  // non-finite
        current[8] = std::numeric_limits<float>::quiet_NaN();
        start[9] = 6e-8f;  // a subnormal half
        current[9] = 0.0f;
        for (int threads : {1, 2}) {
            CpuOps fast(threads);
            ReferenceOps ref;
            std::vector<uint16_t> outFast(N), outRef(N);
            const EncodeStats sFast =
                fast.encodeDeltaFp16(outFast.data(), start.data(), current.data(), N);
            const EncodeStats sRef =
                ref.encodeDeltaFp16(outRef.data(), start.data(), current.data(), N);
            QCOMPARE(sFast.saturated, sRef.saturated);
            QCOMPARE(sFast.nonFinite, sRef.nonFinite);
            QCOMPARE(sFast.saturated, int64_t{2});
            QCOMPARE(sFast.nonFinite, int64_t{2});
            QVERIFY(outFast == outRef);  // same rounding, bit for bit
        }
    }

    void fillZero() {
        CpuOps fast(2);
        Floats x = randomFloats(1'000'003, 95);
        fast.fillZero(x.data(), x.size());
        QVERIFY(std::all_of(x.begin(), x.end(), [](float v) { return v == 0.0f; }));
    }

    // One thread multiplies all rows (and dweight's channels) in one call, two threads in
    // blocks: the same bits, for either product path, on shapes of the `small` and `medium`
    // benchmarks (B = 8) and odd ones.
    void matmulSplitKeepsBits_data() {
        QTest::addColumn<int>("BT");
        QTest::addColumn<int>("C");
        QTest::addColumn<int>("OC");
        QTest::newRow("small qkv") << 1024 << 256 << 768;
        QTest::newRow("small mlp proj") << 1024 << 1024 << 256;
        QTest::newRow("medium fc") << 2048 << 384 << 1536;
        QTest::newRow("odd") << 203 << 36 << 108;
        QTest::newRow("odd, 100 channels") << 1000 << 100 << 300;
    }
    void matmulSplitKeepsBits() {
        QFETCH(int, BT);
        QFETCH(int, C);
        QFETCH(int, OC);
        const Floats inp = randomFloats(size_t(BT) * C, 101),
                     weight = randomFloats(size_t(OC) * C, 102), bias = randomFloats(OC, 103),
                     dout = randomFloats(size_t(BT) * OC, 104);
        Floats out[4], dinp[4], dweight[4], dbias[4];
        for (int i = 0; i < 4; ++i) {
            const int threads = 1 + i % 2;
            CpuOps fast(threads, i < 2 ? CpuProducts::Fastest : CpuProducts::OpenBlas);
            out[i].assign(size_t(BT) * OC, 0.0f);
            dinp[i].assign(size_t(BT) * C, 0.5f);
            dweight[i].assign(size_t(OC) * C, 0.25f);
            dbias[i].assign(OC, 0.125f);
            fast.matmulForward(out[i].data(), inp.data(), weight.data(), bias.data(), 1, BT, C, OC);
            fast.matmulBackward(dinp[i].data(), dweight[i].data(), dbias[i].data(), dout.data(),
                                inp.data(), weight.data(), 1, BT, C, OC);
        }
        for (int i : {0, 2}) {
            QVERIFY(out[i] == out[i + 1]);
            QVERIFY(dinp[i] == dinp[i + 1]);
            QVERIFY(dweight[i] == dweight[i + 1]);
            QVERIFY(dbias[i] == dbias[i + 1]);
        }
    }

    // One thread takes the layernorm backward in one pass over the rows (dinp, dweight and
    // dbias together), more threads split rows and channels: the same bits.
    void layernormBackwardSplitKeepsBits_data() {
        QTest::addColumn<int>("BT");
        QTest::addColumn<int>("C");
        QTest::newRow("small") << 1024 << 256;
        QTest::newRow("odd") << 203 << 37;
    }
    void layernormBackwardSplitKeepsBits() {
        QFETCH(int, BT);
        QFETCH(int, C);
        Floats inp = randomFloats(size_t(BT) * C, 111, 2.0f);
        const Floats weight = randomFloats(C, 112), dout = randomFloats(size_t(BT) * C, 113);
        Floats mean(BT), rstd(BT), out(size_t(BT) * C);
        ReferenceOps().layernormForward(out.data(), mean.data(), rstd.data(), inp.data(),
                                        weight.data(), weight.data(), 1, BT, C);
        Floats dinp[2], dweight[2], dbias[2];
        for (int threads : {1, 2}) {
            CpuOps fast(threads);
            const int i = threads - 1;
            dinp[i] = randomFloats(size_t(BT) * C, 114);
            dweight[i] = randomFloats(C, 115);
            dbias[i] = randomFloats(C, 116);
            fast.layernormBackward(dinp[i].data(), dweight[i].data(), dbias[i].data(), dout.data(),
                                   inp.data(), weight.data(), mean.data(), rstd.data(), 1, BT, C);
        }
        QVERIFY(dinp[0] == dinp[1]);
        QVERIFY(dweight[0] == dweight[1]);
        QVERIFY(dbias[0] == dbias[1]);
    }
};

QTEST_APPLESS_MAIN(TestCpuOps)
#include "test_cpu_ops.moc"
