// Any vocabulary size on every backend (cpu-reference, cpu, the CUDA op set through the emulation
// and, when one is present, GPU 0), at an odd V (300, padded to 320) and GPT-2's (50257, padded
// to 50304) with a small C: the loss of zero weights is ln V (hand-worked; ln Vp if padding
// counted); padded logits, however large their weights, change nothing; padded rows get exactly
// zero gradient and stay exactly zero through AdamW with weight decay, moments included; the
// gradient of the reference against finite differences of the independent double forward; every
// backend against the reference over a few steps; the memory estimate against what the emulated
// device (and a real GPU's cudaMemGetInfo) says was allocated.
//
// Dimensions: L layers, C channels, T sequence, B batch, V vocabulary, Vp padded, P parameters.
#include "../kernels/double_forward.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/emulation/cuda_emulation.hpp"
#include "memory_estimate.hpp"
#include "random.hpp"
#if TANDEM_HAVE_CUDA
#include "cuda/cuda_ops_internal.hpp"
#endif

#include <QtTest>

#include <cmath>
#include <memory>
#include <vector>

using namespace tandem;
using namespace tandem::test;

namespace {

using Floats = std::vector<float>;

Floats initial(const ModelConfig& c, uint64_t seed) {
    const ParameterLayout layout(c);
    Floats p(layout.parameterCount());
    initParameters(layout, p, seed);
    return p;
}

std::vector<int32_t> tokens(size_t n, int V, uint64_t seed) {
    Rng rng(seed);
    std::vector<int32_t> v;
    v.push_back(V - 1);  // the last real row is used and predicted
    while (v.size() < n)
        v.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(V))));
    return v;
}

std::unique_ptr<Backend> make(const QString& name) {
    auto b = makeBackendByName(name.toStdString(), 2);
    if (!b)
        qFatal("%s", b.error().message.c_str());
    return std::move(*b);
}

// The padded part of wte: [V*C, Vp*C).
struct PaddedRange {
    size_t begin, end;
    explicit PaddedRange(const ModelConfig& c)
        : begin(size_t(c.vocabSize) * c.channels), end(size_t(c.paddedVocab()) * c.channels) {}
};

int nonZeroIn(const Floats& x, PaddedRange r) {
    int n = 0;
    for (size_t i = r.begin; i < r.end; ++i)
        n += x[i] != 0.0f;
    return n;
}

}  // namespace

class TestVocabPadding : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() {
        QCOMPARE(ModelConfig::parse(kOdd.toStdString())->paddedVocab(), 320);
        QCOMPARE(ModelConfig::parse(kGpt2.toStdString())->paddedVocab(), 50304);
    }

    // With every weight zero the logits are all zero: a uniform softmax over the V real tokens.
    void zeroWeightsGiveLnV_data() { rows(); }
    void zeroWeightsGiveLnV() {
        QFETCH(QString, backendName);
        QFETCH(QString, config);
        const ModelConfig c = *ModelConfig::parse(config.toStdString());
        auto b = make(backendName);
        VERIFY_OK(b->allocate(c, 2, 8));
        VERIFY_OK(b->loadParameters(Floats(size_t(c.parameterCount()), 0.0f)));
        auto loss = b->forward(tokens(16, c.vocabSize, 1), tokens(16, c.vocabSize, 2), 2, 8);
        VERIFY_OK(loss);
        const double lnV = std::log(double(c.vocabSize));
        QVERIFY2(std::abs(*loss - lnV) < 2e-6 * lnV,
                 qPrintable(QString("loss %1, ln V %2, ln Vp %3")
                                .arg(*loss, 0, 'g', 9)
                                .arg(lnV, 0, 'g', 9)
                                .arg(std::log(double(c.paddedVocab())), 0, 'g', 9)));
    }

    // Padded rows filled with large weights: the loss and every real gradient stay the same (the
    // padded logits are never in the softmax), and the padded rows still get exactly zero.
    // Then AdamW steps with weight decay from zero padded rows: they stay exactly zero, and so
    // do their moments.
    void paddedRowsNeverPredicted_data() { rows(); }
    void paddedRowsNeverPredicted() {
        QFETCH(QString, backendName);
        QFETCH(QString, config);
        const ModelConfig c = *ModelConfig::parse(config.toStdString());
        const PaddedRange pad(c);
        const int B = 2, T = 16;
        const auto in = tokens(B * T, c.vocabSize, 3), out = tokens(B * T, c.vocabSize, 4);
        auto b = make(backendName);
        VERIFY_OK(b->allocate(c, B, T));
        Floats params = initial(c, 9);
        QCOMPARE(nonZeroIn(params, pad), 0);
        const size_t P = params.size();
        Floats grads(P), loud = params, loudGrads(P);
        for (size_t i = pad.begin; i < pad.end; ++i)
            loud[i] = (i % 2 ? 4.0f : -4.0f);
        VERIFY_OK(b->loadParameters(loud));
        auto loudLoss = b->forward(in, out, B, T);
        VERIFY_OK(loudLoss);
        VERIFY_OK(b->backward());
        VERIFY_OK(b->storeGradients(loudGrads));
        VERIFY_OK(b->loadParameters(params));
        auto loss = b->forward(in, out, B, T);
        VERIFY_OK(loss);
        VERIFY_OK(b->backward());
        VERIFY_OK(b->storeGradients(grads));
        QCOMPARE(*loudLoss, *loss);
        QCOMPARE(nonZeroIn(grads, pad), 0);
        QCOMPARE(nonZeroIn(loudGrads, pad), 0);
        for (size_t i = pad.end; i < P; ++i)  // past wte: the same gradients
            QVERIFY(std::abs(loudGrads[i] - grads[i]) <= 1e-6f * (1.0f + std::abs(grads[i])));
        QVERIFY(std::any_of(grads.begin(), grads.begin() + pad.begin,
                            [](float g) { return g != 0.0f; }));

        AdamWConfig adamw;
        adamw.weightDecay = 0.1f;
        for (int step = 0; step < 4; ++step) {
            VERIFY_OK(b->forward(in, out, B, T));
            VERIFY_OK(b->backward());
            VERIFY_OK(b->adamwStep(adamw, 1e-2f));
        }
        Floats after(P);
        VERIFY_OK(b->storeParameters(after));
        QCOMPARE(nonZeroIn(after, pad), 0);
        auto moments = b->storeOptimizerState();
        VERIFY_OK(moments);
        QCOMPARE(nonZeroIn(moments->m, pad), 0);
        QCOMPARE(nonZeroIn(moments->v, pad), 0);
        QVERIFY(after != params);  // the real weights did move
    }

    // The reference backend's gradient against central differences of the double forward (which
    // uses only wte's first V rows), on every parameter at V=300 and on a sample at V=50257:
    // the rows of the batch's tokens, other real rows, padded rows, and each other tensor.
    void gradientAgainstFiniteDifferences_data() {
        QTest::addColumn<QString>("config");
        QTest::newRow("V=300, every parameter") << "L=1,NH=2,C=8,T=5,V=300";
        QTest::newRow("V=50257, sampled") << kGpt2;
    }
    void gradientAgainstFiniteDifferences() {
        QFETCH(QString, config);
        const ModelConfig c = *ModelConfig::parse(config.toStdString());
        const ParameterLayout layout(c);
        const int B = 1, T = std::min(c.maxSeqLen, 4);
        const auto in = tokens(B * T, c.vocabSize, 5), out = tokens(B * T, c.vocabSize, 6);
        Floats params = initial(c, 11);
        for (size_t i = PaddedRange(c).end; i < params.size(); ++i)
            params[i] *= 10.0f;  // gradients well above float rounding
        auto b = make("cpu-reference");
        VERIFY_OK(b->allocate(c, B, T));
        VERIFY_OK(b->loadParameters(params));
        VERIFY_OK(b->forward(in, out, B, T));
        VERIFY_OK(b->backward());
        Floats grads(params.size());
        VERIFY_OK(b->storeGradients(grads));

        std::vector<size_t> which;
        if (c.vocabSize < 1000) {
            for (size_t i = 0; i < params.size(); ++i)
                which.push_back(i);
        } else {
            Rng rng(12);
            const int C = c.channels;
            for (int32_t tok : {in[0], in[1], out[0], out[2], c.vocabSize - 1, c.vocabSize})
                which.push_back(size_t(tok) * C + rng.below(uint64_t(C)));  // last: padded
            for (int i = 0; i < 6; ++i)
                which.push_back(rng.below(uint64_t(c.paddedVocab()) * C));
            for (const TensorInfo& t : layout.tensors())
                which.push_back(size_t(t.offset) + rng.below(uint64_t(t.size)));
        }
        std::vector<double> w(params.begin(), params.end());
        const double h = 1e-5;
        double scale = 0;  // the largest gradient: float rounding is relative to it
        for (float g : grads)
            scale = std::max(scale, double(std::abs(g)));
        for (size_t i : which) {
            const double saved = w[i];
            w[i] = saved + h;
            const double plus = doubleLoss(layout, w, in, out, B, T);
            w[i] = saved - h;
            const double minus = doubleLoss(layout, w, in, out, B, T);
            w[i] = saved;
            const double numeric = (plus - minus) / (2 * h);
            const bool padded = i >= PaddedRange(c).begin && i < PaddedRange(c).end;
            if (padded) {
                QCOMPARE(numeric, 0.0);  // the oracle never reads a padded row
                QCOMPARE(grads[i], 0.0f);
                continue;
            }
            QVERIFY2(std::abs(grads[i] - numeric) <= 1e-5 * scale + 3e-4 * std::abs(numeric),
                     qPrintable(QString("parameter %1: analytic %2, finite difference %3")
                                    .arg(i)
                                    .arg(grads[i], 0, 'g', 9)
                                    .arg(numeric, 0, 'g', 9)));
        }
    }

    // Three steps of every backend follow the reference: losses and final weights.
    void backendsFollowReference_data() { rows(false); }
    void backendsFollowReference() {
        QFETCH(QString, backendName);
        QFETCH(QString, config);
        const ModelConfig c = *ModelConfig::parse(config.toStdString());
        const int B = 2, T = 16;
        auto dev = make(backendName), ref = make("cpu-reference");
        VERIFY_OK(dev->allocate(c, B, T));
        VERIFY_OK(ref->allocate(c, B, T));
        const Floats params = initial(c, 21);
        VERIFY_OK(dev->loadParameters(params));
        VERIFY_OK(ref->loadParameters(params));
        const AdamWConfig adamw;
        for (int step = 0; step < 3; ++step) {
            const auto in = tokens(B * T, c.vocabSize, 30 + step);
            const auto out = tokens(B * T, c.vocabSize, 40 + step);
            auto ld = dev->forward(in, out, B, T), lr = ref->forward(in, out, B, T);
            VERIFY_OK(ld);
            VERIFY_OK(lr);
            QVERIFY2(std::abs(*ld - *lr) <= 1e-5f * *lr,
                     qPrintable(QString("step %1: %2 vs %3").arg(step).arg(*ld).arg(*lr)));
            VERIFY_OK(dev->backward());
            VERIFY_OK(ref->backward());
            VERIFY_OK(dev->adamwStep(adamw, 1e-3f));
            VERIFY_OK(ref->adamwStep(adamw, 1e-3f));
        }
        Floats pd(params.size()), pr(params.size());
        VERIFY_OK(dev->storeParameters(pd));
        VERIFY_OK(ref->storeParameters(pr));
        double diff = 0, norm = 0;
        for (size_t i = 0; i < pd.size(); ++i) {
            diff += (double(pd[i]) - pr[i]) * (double(pd[i]) - pr[i]);
            norm += double(pr[i]) * pr[i];
        }
        QVERIFY2(std::sqrt(diff / norm) < 1e-5,
                 qPrintable(QString("relative difference %1").arg(std::sqrt(diff / norm))));
    }

    // The estimate's backend part is what the emulated device allocates (256-byte granules, a
    // few buffers), and on a real GPU what cudaMemGetInfo sees go: within 10%, plus up to 2 MiB a
    // buffer, since the driver maps device memory in 2 MiB pages (a small buffer can take a
    // page of its own, or none when it fits into one mapped before: seen on an H200).
    void estimateMatchesDeviceAllocation_data() {
        QTest::addColumn<QString>("config");
        QTest::addColumn<int>("B");
        QTest::newRow("V=300") << kOdd << 2;
        QTest::newRow("V=50257") << kGpt2 << 3;
        QTest::newRow("medium") << "medium" << 1;
    }
    void estimateMatchesDeviceAllocation() {
        QFETCH(QString, config);
        QFETCH(int, B);
        const ModelConfig c = *ModelConfig::parse(config.toStdString());
        const UnitMemoryEstimate e = estimateUnitMemory(c, B, c.maxSeqLen);
        const int64_t hostStaging = int64_t{B} * c.maxSeqLen * 4;  // the losses, on the host
        auto emulated = make("cuda-emulated");
        const int64_t before = int64_t(emu::deviceMemoryInUse());
        const int64_t buffersBefore = int64_t(emu::deviceAllocationsLive());
        VERIFY_OK(emulated->allocate(c, B, c.maxSeqLen));
        const int64_t used = int64_t(emu::deviceMemoryInUse()) - before;
        const int64_t buffers = int64_t(emu::deviceAllocationsLive()) - buffersBefore;
        QVERIFY(buffers >= 1);
        QVERIFY2(std::abs(used - (e.backendBytes() - hostStaging)) <= 8 * 256,
                 qPrintable(QString("allocated %1, estimated %2").arg(used).arg(e.backendBytes())));
#if TANDEM_HAVE_CUDA
        auto gpu = makeCudaBackend(0);
        if (!gpu)
            QSKIP(qPrintable("no GPU for the cudaMemGetInfo check: " +
                             QString::fromStdString(gpu.error().message)));
        const int64_t freeBefore = cuda_device::availableDeviceBytes(0);
        VERIFY_OK((*gpu)->allocate(c, B, c.maxSeqLen));
        const int64_t gone = freeBefore - cuda_device::availableDeviceBytes(0);
        qInfo("GPU: %lld bytes gone, %lld estimated, %lld buffers", static_cast<long long>(gone),
              static_cast<long long>(e.backendBytes()), static_cast<long long>(buffers));
        const double pages = double(buffers) * double(2 << 20);
        QVERIFY(std::abs(double(gone - e.backendBytes())) <=
                0.1 * double(e.backendBytes()) + pages);
#else
        QSKIP("built without nvcc: no cudaMemGetInfo check");
#endif
    }

  private:
    inline static const QString kOdd = "L=1,NH=2,C=32,T=16,V=300";
    inline static const QString kGpt2 = "L=1,NH=2,C=32,T=16,V=50257";

    static void rows(bool withReference = true) {
        QTest::addColumn<QString>("backendName");
        QTest::addColumn<QString>("config");
        QStringList backends{"cpu", "cuda-emulated"};
        if (withReference)
            backends.prepend("cpu-reference");
        if (makeBackendByName("cuda:0", 1).ok())
            backends << "cuda:0";
        for (const QString& name : backends) {
            QTest::newRow(qPrintable(name + " V=300")) << name << kOdd;
            QTest::newRow(qPrintable(name + " V=50257")) << name << kGpt2;
        }
    }
};

QTEST_APPLESS_MAIN(TestVocabPadding)
#include "test_vocab_padding.moc"
