// The GPT graph driver (GptBackend) over the cpu-reference op set: whole-model gradients against
// finite differences of an independent double-precision forward, AdamW against hand-worked
// values, the learning-rate schedule, determinism, optimizer state round trip, pseudo-gradient
// encode and refusal of bad input.
//
// Dimensions: L layers, NH heads, C channels, T sequence, B batch, V vocab (256), P parameters.
// Odd vocabularies (padded rows) are covered by tests/cuda/test_vocab_padding.
#include "codec.hpp"
#include "cpu_reference/reference_ops.hpp"
#include "double_forward.hpp"
#include "gpt_backend.hpp"
#include "random.hpp"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numbers>
#include <vector>

using namespace tandem;
using namespace tandem::test;

namespace {

// L=2 NH=2 C=8 T=5: every code path of the graph at a size finite differences can cover fully.
const ModelConfig kTiny{2, 2, 8, 5};
// Three layers: the backward pass reuses one layer's gradient scratch for every layer and adds
// every layer's share into one residual gradient (GptBackend::GradientPlan); more than two layers
// exercise both.
const ModelConfig kThreeLayers{3, 2, 8, 5};

std::unique_ptr<GptBackend> makeBackend(std::function<int64_t()> available = nullptr) {
    return std::make_unique<GptBackend>("cpu-reference", std::make_unique<ReferenceOps>(),
                                        std::move(available));
}

std::vector<int32_t> randomTokens(Rng& rng, size_t n) {
    std::vector<int32_t> v(n);
    for (int32_t& x : v)
        x = static_cast<int32_t>(rng.below(256));
    return v;
}

// Parameters further from the initialisation than N(0, 0.02), so every tensor, LayerNorm
// included, gets gradients well above float rounding.
std::vector<float> testParameters(const ParameterLayout& layout, uint64_t seed) {
    std::vector<float> p(static_cast<size_t>(layout.parameterCount()));
    initParameters(layout, p, seed);
    Rng rng(seed + 1);
    for (const TensorInfo& t : layout.tensors()) {
        for (int64_t i = 0; i < t.size; ++i) {
            float& x = p[static_cast<size_t>(t.offset + i)];
            x = t.shape.size() == 2 ? 10.0f * x : x + 0.2f * rng.normal();
        }
    }
    return p;
}

// A backend allocated for kTiny at B x T with testParameters loaded.
struct Fixture {
    std::unique_ptr<GptBackend> backend = makeBackend();
    ParameterLayout layout;
    std::vector<float> params;
    size_t P = 0;
    Fixture(int B, int T, uint64_t seed, const ModelConfig& config = kTiny) : layout(config) {
        const Status s = backend->allocate(config, B, T);
        if (!s)
            qFatal("allocate: %s", s.error().message.c_str());
        params = testParameters(layout, seed);
        P = params.size();
        if (!backend->loadParameters(params))
            qFatal("loadParameters failed");
    }
    std::vector<float> parameters() const {
        std::vector<float> p(P);
        if (!backend->storeParameters(p))
            qFatal("storeParameters failed");
        return p;
    }
    std::vector<float> gradients() const {
        std::vector<float> g(P);
        if (!backend->storeGradients(g))
            qFatal("storeGradients failed");
        return g;
    }
};

}  // namespace

class TestGptBackend : public QObject {
    Q_OBJECT
  private slots:
    // ---- whole-model gradients -----------------------------------------------------------------
    // Every parameter's gradient from GptBackend (float) against central differences of the
    // double forward above. The double forward is first checked to be the same function.
    void wholeModelGradient_data() {
        QTest::addColumn<int>("b");
        QTest::addColumn<int>("t");
        QTest::addColumn<int>("layers");
        QTest::newRow("full B2 T5") << 2 << 5 << 2;
        QTest::newRow("smaller than allocated b1 t3") << 1 << 3 << 2;
        QTest::newRow("T=1") << 2 << 1 << 2;
        QTest::newRow("three layers") << 2 << 5 << 3;
    }
    void wholeModelGradient() {
        QFETCH(int, b);
        QFETCH(int, t);
        QFETCH(int, layers);
        Fixture f(2, 5, 42, layers == 3 ? kThreeLayers : kTiny);
        Rng rng(7);
        const auto inputs = randomTokens(rng, size_t(b) * t);
        const auto targets = randomTokens(rng, size_t(b) * t);
        auto loss = f.backend->forward(inputs, targets, b, t);
        VERIFY_OK(loss);
        VERIFY_OK(f.backend->backward());
        const std::vector<float> grads = f.gradients();

        std::vector<double> w(f.params.begin(), f.params.end());
        const double loss64 = doubleLoss(f.layout, w, inputs, targets, b, t);
        QVERIFY2(std::abs(*loss - loss64) < 1e-5 * loss64,
                 qPrintable(QString("float loss %1, double loss %2").arg(*loss).arg(loss64)));

        const double h = 1e-5;
        double worst = 0.0;
        QString worstWhere;
        for (const TensorInfo& tensor : f.layout.tensors()) {
            std::vector<double> numeric(static_cast<size_t>(tensor.size));
            double scale = 0.0;  // largest gradient of the tensor
            for (int64_t i = 0; i < tensor.size; ++i) {
                double& x = w[static_cast<size_t>(tensor.offset + i)];
                const double saved = x;
                x = saved + h;
                const double plus = doubleLoss(f.layout, w, inputs, targets, b, t);
                x = saved - h;
                const double minus = doubleLoss(f.layout, w, inputs, targets, b, t);
                x = saved;
                numeric[size_t(i)] = (plus - minus) / (2 * h);
                scale = std::max(scale, std::abs(numeric[size_t(i)]));
            }
            // Float rounding in the backward is relative to the tensor's gradient scale.
            for (int64_t i = 0; i < tensor.size; ++i) {
                const double analytic = grads[static_cast<size_t>(tensor.offset + i)];
                const double error = std::abs(analytic - numeric[size_t(i)]);
                const double allowed = 3e-6 * scale + 3e-5 * std::abs(numeric[size_t(i)]) + 1e-10;
                if (error / allowed > worst) {
                    worst = error / allowed;
                    worstWhere = QString("%1[%2]: analytic %3, finite difference %4")
                                     .arg(QString::fromStdString(tensor.name))
                                     .arg(i)
                                     .arg(analytic, 0, 'g', 9)
                                     .arg(numeric[size_t(i)], 0, 'g', 9);
                }
            }
            // Positions the batch does not reach get exactly no gradient.
            if (tensor.name == "wpe") {
                for (int64_t i = int64_t(t) * kTiny.channels; i < tensor.size; ++i) {
                    QCOMPARE(grads[static_cast<size_t>(tensor.offset + i)], 0.0f);
                }
            }
        }
        qInfo("worst gradient error / allowed: %.3g (%s)", worst, qPrintable(worstWhere));
        QVERIFY2(worst <= 1.0, qPrintable(worstWhere));
    }

    // ---- AdamW -----------------------------------------------------------------------------
    // Step 1 from zero moments: mhat / sqrt(vhat) = sign(g), so without weight decay every
    // parameter with a gradient moves by exactly lr (bias correction at work).
    void adamwFirstStepMovesByLr() {
        Fixture f(2, 3, 1);
        Rng rng(2);
        const auto in = randomTokens(rng, 6), tg = randomTokens(rng, 6);
        VERIFY_OK(f.backend->forward(in, tg, 2, 3));
        VERIFY_OK(f.backend->backward());
        const auto g = f.gradients();
        AdamWConfig cfg;
        cfg.weightDecay = 0.0f;
        cfg.clipNorm = 0.0f;
        const float lr = 1e-3f;
        auto stats = f.backend->adamwStep(cfg, lr);
        VERIFY_OK(stats);
        QCOMPARE(stats->lr, lr);
        const auto p = f.parameters();
        int moved = 0;
        for (size_t i = 0; i < f.P; ++i) {
            const double step = double(f.params[i]) - p[i];
            if (std::abs(g[i]) < 1e-4f)
                continue;  // eps (1e-8) matters next to tiny gradients
            ++moved;
            const double expected = lr * (g[i] > 0 ? 1.0 : -1.0);
            if (std::abs(step - expected) > 2e-4 * lr + 4e-7 * std::abs(p[i])) {
                QFAIL(qPrintable(QString("parameter %1 moved by %2, expected %3 (gradient %4)")
                                     .arg(i)
                                     .arg(step)
                                     .arg(expected)
                                     .arg(g[i])));
            }
        }
        QVERIFY(moved > int(f.P) / 2);
    }

    // Two steps against the AdamW formulas worked out here in double, with clipping and weight
    // decay on matrices only.
    void adamwTwoStepsByHand() {
        Fixture f(2, 4, 3);
        Rng rng(4);
        AdamWConfig cfg;  // beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1, clip 1.0
        cfg.weightDecay = 0.3f;
        const float lrs[2] = {2e-3f, 1e-3f};
        std::vector<double> m(f.P, 0.0), v(f.P, 0.0), p(f.params.begin(), f.params.end());
        // The sum of |terms| behind m: float rounding is relative to it when terms cancel.
        std::vector<double> mScale(f.P, 0.0);
        for (int step = 1; step <= 2; ++step) {
            const auto in = randomTokens(rng, 8), tg = randomTokens(rng, 8);
            VERIFY_OK(f.backend->forward(in, tg, 2, 4));
            VERIFY_OK(f.backend->backward());
            const auto g = f.gradients();
            double squares = 0.0;
            for (float x : g)
                squares += double(x) * x;
            const double norm = std::sqrt(squares);
            QVERIFY2(norm > cfg.clipNorm, "the test wants a gradient that gets clipped");
            const double scale = cfg.clipNorm / norm;
            auto stats = f.backend->adamwStep(cfg, lrs[step - 1]);
            VERIFY_OK(stats);
            QVERIFY(std::abs(stats->gradNorm - norm) < 1e-6 * norm);

            const double c1 = 1 - std::pow(0.9, step), c2 = 1 - std::pow(0.95, step);
            for (const TensorInfo& t : f.layout.tensors()) {
                const double decay = t.decays ? 0.3 : 0.0;
                for (int64_t k = 0; k < t.size; ++k) {
                    const size_t i = size_t(t.offset + k);
                    const double gi = g[i] * scale;
                    m[i] = 0.9 * m[i] + 0.1 * gi;
                    mScale[i] = 0.9 * mScale[i] + 0.1 * std::abs(gi);
                    v[i] = 0.95 * v[i] + 0.05 * gi * gi;
                    p[i] -=
                        lrs[step - 1] * (m[i] / c1 / (std::sqrt(v[i] / c2) + 1e-8) + decay * p[i]);
                }
            }
            const auto got = f.parameters();
            auto state = f.backend->storeOptimizerState();
            VERIFY_OK(state);
            QCOMPARE(state->step, int64_t{step});
            for (size_t i = 0; i < f.P; ++i) {
                const double mError = 1e-6 * mScale[i];
                const double adamError = mError / c1 / (std::sqrt(v[i] / c2) + 1e-8);
                if (std::abs(got[i] - p[i]) >
                        1e-6 * std::abs(p[i]) + lrs[step - 1] * (adamError + 1e-6) ||
                    std::abs(state->m[i] - m[i]) > mError + 1e-15 ||
                    std::abs(state->v[i] - v[i]) > 1e-5 * std::abs(v[i]) + 1e-15) {
                    QFAIL(qPrintable(QString("step %1, parameter %2: got p %3 m %4 v %5, "
                                             "expected p %6 m %7 v %8")
                                         .arg(step)
                                         .arg(i)
                                         .arg(got[i], 0, 'g', 9)
                                         .arg(state->m[i], 0, 'g', 9)
                                         .arg(state->v[i], 0, 'g', 9)
                                         .arg(p[i], 0, 'g', 9)
                                         .arg(m[i], 0, 'g', 9)
                                         .arg(v[i], 0, 'g', 9)));
                }
            }
        }
    }

    // Weight decay touches exactly the tensors marked decays, and those are the matrices.
    void weightDecayOnMatricesOnly() {
        Fixture plain(2, 3, 5), decayed(2, 3, 5);
        Rng rng(6);
        const auto in = randomTokens(rng, 6), tg = randomTokens(rng, 6);
        AdamWConfig cfg;
        cfg.weightDecay = 0.0f;
        AdamWConfig cfgDecay = cfg;
        cfgDecay.weightDecay = 0.5f;
        const float lr = 0.01f;
        for (Fixture* f : {&plain, &decayed}) {
            VERIFY_OK(f->backend->forward(in, tg, 2, 3));
            VERIFY_OK(f->backend->backward());
            VERIFY_OK(f->backend->adamwStep(f == &plain ? cfg : cfgDecay, lr));
        }
        const auto a = plain.parameters(), b = decayed.parameters();
        int matrices = 0;
        for (const TensorInfo& t : plain.layout.tensors()) {
            QCOMPARE(t.decays, t.shape.size() == 2);
            matrices += t.decays;
            for (int64_t k = 0; k < t.size; ++k) {
                const size_t i = size_t(t.offset + k);
                // p_decay = p_plain - lr * 0.5 * p_before
                const double expected = t.decays ? -lr * 0.5 * plain.params[i] : 0.0;
                const double diff = double(b[i]) - a[i];
                if (std::abs(diff - expected) > 1e-6 * std::abs(plain.params[i]) + 1e-9) {
                    QFAIL(qPrintable(QString("%1[%2]: decay moved it by %3, expected %4")
                                         .arg(QString::fromStdString(t.name))
                                         .arg(k)
                                         .arg(diff)
                                         .arg(expected)));
                }
            }
        }
        QCOMPARE(matrices, 2 + 4 * kTiny.layers);  // wte, wpe, qkv, attn.proj, fc, mlp.proj
    }

    // The moments after one step show the gradient AdamW saw: m = 0.1 * g * scale.
    void clippingScalesOnlyAboveClipNorm() {
        for (bool clip : {true, false}) {
            Fixture f(2, 3, 8);
            Rng rng(9);
            const auto in = randomTokens(rng, 6), tg = randomTokens(rng, 6);
            VERIFY_OK(f.backend->forward(in, tg, 2, 3));
            VERIFY_OK(f.backend->backward());
            const auto g = f.gradients();
            double squares = 0.0;
            for (float x : g)
                squares += double(x) * x;
            const double norm = std::sqrt(squares);
            AdamWConfig cfg;
            cfg.clipNorm = static_cast<float>(clip ? norm / 4 : norm * 1.01);
            auto stats = f.backend->adamwStep(cfg, 1e-3f);
            VERIFY_OK(stats);
            QVERIFY(std::abs(stats->gradNorm - norm) < 1e-6 * norm);  // before clipping
            const double scale = clip ? 0.25 : 1.0;
            auto state = f.backend->storeOptimizerState();
            VERIFY_OK(state);
            for (size_t i = 0; i < f.P; ++i) {
                const double expected = 0.1 * g[i] * scale;
                if (std::abs(state->m[i] - expected) > 1e-6 * std::abs(expected) + 1e-12) {
                    QFAIL(qPrintable(QString("clip %1: m[%2] = %3, expected %4")
                                         .arg(clip)
                                         .arg(i)
                                         .arg(state->m[i])
                                         .arg(expected)));
                }
            }
        }
    }

    void nonFiniteGradientIsRefused() {
        Fixture f(1, 2, 10);
        std::vector<float> bad = f.params;
        bad[f.layout.lnfBias()] = std::numeric_limits<float>::quiet_NaN();
        VERIFY_OK(f.backend->loadParameters(bad));
        const std::vector<int32_t> in{1, 2}, tg{3, 4};
        VERIFY_OK(f.backend->forward(in, tg, 1, 2));
        VERIFY_OK(f.backend->backward());
        VERIFY_ERROR(f.backend->adamwStep(AdamWConfig{}, 1e-3f), "not finite");
        auto state = f.backend->storeOptimizerState();
        VERIFY_OK(state);
        QCOMPARE(state->step, int64_t{0});
        const auto after = f.parameters();
        QVERIFY(std::memcmp(after.data(), bad.data(), f.P * sizeof(float)) == 0);
    }

    // ---- learning-rate schedule ------------------------------------------------------------
    void lrSchedule() {
        LrSchedule s;
        s.peakLr = 1e-3f;
        s.minLr = 1e-4f;
        s.warmupSteps = 10;
        s.totalSteps = 110;
        auto near = [](float got, double expected) {
            return std::abs(got - expected) <= 1e-6 * expected;
        };
        QVERIFY(near(s.at(0), 1e-4));   // warmup: peak * 1/10
        QVERIFY(near(s.at(4), 5e-4));   // peak * 5/10
        QVERIFY(near(s.at(9), 1e-3));   // peak * 10/10
        QVERIFY(near(s.at(10), 1e-3));  // cosine starts at the peak
        QVERIFY(near(s.at(35), 1e-4 + 9e-4 * 0.5 * (1 + std::sqrt(0.5))));  // a quarter: cos(pi/4)
        QVERIFY(near(s.at(60), 5.5e-4));  // half way: midpoint of peak and floor
        QVERIFY(near(s.at(85), 1e-4 + 9e-4 * 0.5 * (1 - std::sqrt(0.5))));
        QVERIFY(near(s.at(109), 1e-4 + 9e-4 * 0.5 * (1 + std::cos(std::numbers::pi * 99 / 100))));
        QVERIFY(near(s.at(110), 1e-4));  // the floor
        QVERIFY(near(s.at(100000), 1e-4));
        for (int64_t i = 10; i < 110; ++i)
            QVERIFY(s.at(i + 1) <= s.at(i));

        LrSchedule noWarmup;
        noWarmup.peakLr = 2e-3f;
        noWarmup.minLr = 0.0f;
        noWarmup.warmupSteps = 0;
        noWarmup.totalSteps = 4;
        QVERIFY(near(noWarmup.at(0), 2e-3));
        QVERIFY(near(noWarmup.at(2), 1e-3));
        QCOMPARE(noWarmup.at(4), 0.0f);
    }

    // ---- determinism and state -------------------------------------------------------------
    void sameSeedSameLosses() {
        auto run = [](std::vector<float>& losses) {
            Fixture f(2, 5, 11);
            Rng rng(12);
            LrSchedule schedule;
            schedule.peakLr = 1e-2f;
            schedule.warmupSteps = 2;
            schedule.totalSteps = 5;
            for (int step = 0; step < 5; ++step) {
                const auto in = randomTokens(rng, 10), tg = randomTokens(rng, 10);
                auto loss = f.backend->forward(in, tg, 2, 5);
                if (!loss || !f.backend->backward() ||
                    !f.backend->adamwStep(AdamWConfig{}, schedule.at(step))) {
                    return false;
                }
                losses.push_back(*loss);
            }
            return true;
        };
        std::vector<float> first, second;
        QVERIFY(run(first));
        QVERIFY(run(second));
        QCOMPARE(first.size(), size_t(5));
        QVERIFY(std::memcmp(first.data(), second.data(), 5 * sizeof(float)) == 0);
        QVERIFY(first[0] != first[4]);  // training did something
    }

    void optimizerStateRoundTrip() {
        Rng rng(13);
        std::vector<std::vector<int32_t>> batches;
        for (int i = 0; i < 10; ++i)
            batches.push_back(randomTokens(rng, 10));
        AdamWConfig cfg;
        auto step = [&](GptBackend& backend, int i, float& loss) {
            auto l = backend.forward(batches[size_t(i)], batches[size_t(i) + 5], 2, 5);
            if (!l || !backend.backward() || !backend.adamwStep(cfg, 1e-2f))
                return false;
            loss = *l;
            return true;
        };
        Fixture a(2, 5, 14);
        float loss = 0;
        for (int i = 0; i < 3; ++i)
            QVERIFY(step(*a.backend, i, loss));
        const auto params = a.parameters();
        auto state = a.backend->storeOptimizerState();
        VERIFY_OK(state);
        QCOMPARE(state->step, int64_t{3});

        float lossesA[2], lossesB[2];
        for (int i = 3; i < 5; ++i)
            QVERIFY(step(*a.backend, i, lossesA[i - 3]));

        auto b = makeBackend();
        VERIFY_OK(b->allocate(kTiny, 2, 5));
        VERIFY_OK(b->loadParameters(params));
        VERIFY_OK(b->loadOptimizerState(*state));
        for (int i = 3; i < 5; ++i)
            QVERIFY(step(*b, i, lossesB[i - 3]));
        QVERIFY(std::memcmp(lossesA, lossesB, sizeof lossesA) == 0);
        std::vector<float> pa(a.P), pb(a.P);
        VERIFY_OK(a.backend->storeParameters(pa));
        VERIFY_OK(b->storeParameters(pb));
        QVERIFY(pa == pb);

        // Without the moments (fresh AdamW) the continuation differs: the state mattered.
        auto c = makeBackend();
        VERIFY_OK(c->allocate(kTiny, 2, 5));
        VERIFY_OK(c->loadParameters(params));
        float lossesC[2];
        for (int i = 3; i < 5; ++i)
            QVERIFY(step(*c, i, lossesC[i - 3]));
        QVERIFY(lossesC[1] != lossesA[1]);
    }

    // ---- pseudo-gradient -------------------------------------------------------------------
    void encodePseudoGradient() {
        Fixture f(2, 3, 15);
        Rng rng(16);
        const auto in = randomTokens(rng, 6), tg = randomTokens(rng, 6);
        VERIFY_OK(f.backend->forward(in, tg, 2, 3));
        VERIFY_OK(f.backend->backward());
        VERIFY_OK(f.backend->adamwStep(AdamWConfig{}, 1e-2f));
        const auto end = f.parameters();
        std::vector<uint16_t> out(f.P);
        auto stats = f.backend->encodePseudoGradient(f.params, out);
        VERIFY_OK(stats);
        QCOMPARE(stats->saturated, int64_t{0});
        for (size_t i = 0; i < f.P; ++i) {
            if (out[i] != floatToHalf(f.params[i] - end[i])) {
                QFAIL(qPrintable(QString("delta %1 encoded as %2").arg(i).arg(out[i], 0, 16)));
            }
        }
        // The weights themselves are untouched by encoding.
        QVERIFY(f.parameters() == end);

        std::vector<float> bad = f.params;
        bad[5] = std::numeric_limits<float>::quiet_NaN();
        bad[7] = std::numeric_limits<float>::infinity();
        VERIFY_ERROR(f.backend->encodePseudoGradient(bad, out), "2 values that are NaN or Inf");
        VERIFY_ERROR(f.backend->encodePseudoGradient(std::span(bad).first(f.P - 1), out),
                     "start parameters: expected");
        VERIFY_ERROR(f.backend->encodePseudoGradient(f.params, std::span(out).first(3)),
                     "pseudo-gradient: expected");
    }

    // ---- bad input -------------------------------------------------------------------------
    void callsBeforeAllocateAreRefused() {
        auto backend = makeBackend();
        const std::vector<int32_t> tokens(2, 1);
        std::vector<float> p(size_t(kTiny.parameterCount()));
        std::vector<uint16_t> out(p.size());
        VERIFY_ERROR(backend->forward(tokens, tokens, 1, 2), "forward before allocate()");
        VERIFY_ERROR(backend->backward(), "backward before allocate()");
        VERIFY_ERROR(backend->adamwStep(AdamWConfig{}, 1e-3f), "adamwStep before allocate()");
        VERIFY_ERROR(backend->loadParameters(p), "loadParameters before allocate()");
        VERIFY_ERROR(backend->storeParameters(p), "storeParameters before allocate()");
        VERIFY_ERROR(backend->storeGradients(p), "storeGradients before allocate()");
        VERIFY_ERROR(backend->loadOptimizerState(OptimizerState{}),
                     "loadOptimizerState before allocate()");
        VERIFY_ERROR(backend->storeOptimizerState(), "storeOptimizerState before allocate()");
        VERIFY_ERROR(backend->encodePseudoGradient(p, out),
                     "encodePseudoGradient before allocate()");
    }

    void badShapesAreRefused() {
        auto backend = makeBackend();
        VERIFY_ERROR(backend->canRun(kTiny, 2, 6), "sequence length 1 to 5");
        VERIFY_ERROR(backend->canRun(kTiny, 0, 5), "batch 0 x sequence 5");
        VERIFY_ERROR(backend->allocate(kTiny, 2, 6), "sequence length 1 to 5");
        ModelConfig nonsense = kTiny;
        nonsense.channels = 9;  // not divisible by 2 heads
        VERIFY_ERROR(backend->canRun(nonsense, 1, 1), "divisible");
        VERIFY_OK(backend->canRun(kTiny, 2, 5));

        auto small = makeBackend([] { return int64_t{1000}; });
        VERIFY_ERROR(small->canRun(kTiny, 2, 5), "but only 0.0 MiB is available");
        VERIFY_ERROR(small->allocate(kTiny, 2, 5), "needs");
    }

    void badInputKeepsState() {
        Fixture f(2, 3, 17);
        const std::vector<int32_t> in{1, 2, 3, 4, 5, 6}, tg{7, 8, 9, 10, 11, 255};
        auto loss = f.backend->forward(in, tg, 2, 3);
        VERIFY_OK(loss);

        std::vector<int32_t> badToken = in;
        badToken[4] = 256;
        VERIFY_ERROR(f.backend->forward(badToken, tg, 2, 3),
                     "token at position 4 is outside the vocabulary of 256");
        std::vector<int32_t> negative = tg;
        negative[0] = -1;
        VERIFY_ERROR(f.backend->forward(in, negative, 2, 3), "position 0 is outside");
        VERIFY_ERROR(f.backend->forward(std::span(in).first(5), tg, 2, 3),
                     "inputs: expected 6 values, found 5");
        VERIFY_ERROR(f.backend->forward(in, std::span(tg).first(4), 2, 3),
                     "targets: expected 6 values, found 4");
        const std::vector<int32_t> nine(9, 1);
        VERIFY_ERROR(f.backend->forward(nine, nine, 3, 3),
                     "batch 3 x 3 exceeds the allocated 2 x 3");
        const std::vector<int32_t> eight(8, 1);
        VERIFY_ERROR(f.backend->forward(eight, eight, 2, 4), "exceeds the allocated 2 x 3");
        VERIFY_ERROR(f.backend->forward({}, {}, 0, 3), "exceeds");

        std::vector<float> shortParams(f.P - 1);
        VERIFY_ERROR(f.backend->loadParameters(shortParams),
                     "parameters: expected " + std::to_string(f.P) + " values, found " +
                         std::to_string(f.P - 1));
        OptimizerState state;
        state.m.resize(f.P);
        state.v.resize(f.P - 2);
        VERIFY_ERROR(f.backend->loadOptimizerState(state), "AdamW second moments: expected");
        state.v.resize(f.P);
        state.step = -1;
        VERIFY_ERROR(f.backend->loadOptimizerState(state), "negative");

        // Nothing was lost: the weights are as loaded, and the last good forward can still be
        // differentiated and gives the same loss again.
        QVERIFY(f.parameters() == f.params);
        VERIFY_OK(f.backend->backward());
        auto again = f.backend->forward(in, tg, 2, 3);
        VERIFY_OK(again);
        QCOMPARE(*again, *loss);
        auto opt = f.backend->storeOptimizerState();
        VERIFY_OK(opt);
        QCOMPARE(opt->step, int64_t{0});
    }

    void backwardBeforeForwardIsRefused() {
        Fixture f(1, 2, 18);
        VERIFY_ERROR(f.backend->backward(), "no forward pass");
        // Encoding reuses the gradient memory, so a forward is needed again afterwards.
        const std::vector<int32_t> in{1, 2};
        VERIFY_OK(f.backend->forward(in, in, 1, 2));
        std::vector<uint16_t> out(f.P);
        VERIFY_OK(f.backend->backward());
        VERIFY_OK(f.backend->encodePseudoGradient(f.params, out));
        VERIFY_ERROR(f.backend->backward(), "no forward pass");
        // ... and leaves no start weights behind where the gradients were.
        for (float g : f.gradients())
            QCOMPARE(g, 0.0f);
        // New weights make the last forward's activations stale.
        VERIFY_OK(f.backend->forward(in, in, 1, 2));
        VERIFY_OK(f.backend->loadParameters(f.params));
        VERIFY_ERROR(f.backend->backward(), "no forward pass");
    }
};

QTEST_APPLESS_MAIN(TestGptBackend)
#include "test_gpt_backend.moc"
