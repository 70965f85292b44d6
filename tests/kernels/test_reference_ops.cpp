// The CPU reference ops: every backward against central finite differences (in double, through
// the templates, so tolerances are tight), forwards against hand-worked values, the += convention
// of backward ops, and the optimizer and encode ops.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, V vocab, N elements.
#include "codec.hpp"
#include "cpu_reference/reference_ops.hpp"
#include "random.hpp"

#include <QtTest>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

using namespace tandem;
namespace ref = tandem::reference;

namespace {

using Vec = std::vector<double>;

Vec randomVec(Rng& rng, size_t n, double scale = 1.0) {
    Vec v(n);
    for (double& x : v)
        x = scale * rng.normal();
    return v;
}

std::vector<int32_t> randomTokens(Rng& rng, size_t n, int vocab) {
    std::vector<int32_t> v(n);
    for (int32_t& x : v)
        x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
    return v;
}

// One differentiable input of an op: its values and the gradient the backward adds into.
struct Input {
    const char* name;
    Vec* value;
    Vec* grad;
};

// Checks an op's backward by central differences of the scalar objective sum(out * weights).
// forward() recomputes the output from the inputs (and refreshes whatever the backward reads);
// backward(dout) adds d(objective)/d(input) into every Input::grad. Returns "" or a description
// of the first mismatch.
struct GradientCheck {
    std::vector<Input> inputs;
    std::function<const Vec&()> forward;
    std::function<void(const Vec& dout)> backward;
    double step = 1e-5;
    double absTolerance = 1e-8;
    double relTolerance = 1e-6;

    QString run(Rng& rng) const {
        const Vec& out0 = forward();
        const Vec weights = randomVec(rng, out0.size());
        for (const Input& in : inputs)
            std::fill(in.grad->begin(), in.grad->end(), 0.0);
        backward(weights);
        auto objective = [&] {
            const Vec& out = forward();
            double sum = 0.0;
            for (size_t i = 0; i < out.size(); ++i)
                sum += out[i] * weights[i];
            return sum;
        };
        double worst = 0.0;
        for (const Input& in : inputs) {
            for (size_t i = 0; i < in.value->size(); ++i) {
                const double saved = (*in.value)[i];
                (*in.value)[i] = saved + step;
                const double plus = objective();
                (*in.value)[i] = saved - step;
                const double minus = objective();
                (*in.value)[i] = saved;
                const double numeric = (plus - minus) / (2 * step);
                const double analytic = (*in.grad)[i];
                const double error = std::abs(numeric - analytic);
                worst = std::max(worst, error / (absTolerance + relTolerance * std::abs(numeric)));
                if (error > absTolerance + relTolerance * std::abs(numeric)) {
                    return QString("d%1[%2]: analytic %3, finite difference %4")
                        .arg(in.name)
                        .arg(i)
                        .arg(analytic, 0, 'g', 12)
                        .arg(numeric, 0, 'g', 12);
                }
            }
        }
        forward();  // leave the aux buffers at the base point
        return {};
    }
};

struct Shape {
    int B, T, C, NH;
};

void addShapes() {
    QTest::addColumn<int>("B");
    QTest::addColumn<int>("T");
    QTest::addColumn<int>("C");
    QTest::addColumn<int>("NH");
    QTest::newRow("B2 T3 C8 NH2") << 2 << 3 << 8 << 2;
    QTest::newRow("B1 T1 C5 NH1") << 1 << 1 << 5 << 1;
    QTest::newRow("B1 T4 C6 NH3") << 1 << 4 << 6 << 3;
    QTest::newRow("B3 T2 C7 NH1") << 3 << 2 << 7 << 1;
    QTest::newRow("B2 T5 C12 NH4") << 2 << 5 << 12 << 4;
}

#define FETCH_SHAPE  \
    QFETCH(int, B);  \
    QFETCH(int, T);  \
    QFETCH(int, C);  \
    QFETCH(int, NH); \
    (void)NH;        \
    Rng rng(1000 + B * 100 + T * 10 + C)

bool closeTo(double a, double b, double tolerance) {
    return std::abs(a - b) <= tolerance;
}

}  // namespace

class TestReferenceOps : public QObject {
    Q_OBJECT
  private slots:
    // ---- the checker itself must be able to fail ---------------------------------------------
    void checkerCatchesWrongGradient() {
        Rng rng(1);
        Vec x = randomVec(rng, 6), dx(6), out(6);
        GradientCheck check;
        check.inputs = {{"x", &x, &dx}};
        check.forward = [&]() -> const Vec& {
            ref::geluForward(out.data(), x.data(), 6);
            return out;
        };
        // Off by 0.01 %: still caught.
        check.backward = [&](const Vec& dout) {
            ref::geluBackward(dx.data(), x.data(), dout.data(), 6);
            for (double& g : dx)
                g *= 1.0001;
        };
        QVERIFY(!check.run(rng).isEmpty());
    }

    // ---- finite-difference checks --------------------------------------------------------------
    void encoderGradient_data() { addShapes(); }
    void encoderGradient() {
        FETCH_SHAPE;
        const int V = 7, maxT = T + 2;  // rows of wpe past T must get no gradient
        const auto tokens = randomTokens(rng, size_t(B) * T, V);
        Vec wte = randomVec(rng, size_t(V) * C), wpe = randomVec(rng, size_t(maxT) * C);
        Vec dwte(wte.size()), dwpe(wpe.size()), out(size_t(B) * T * C);
        GradientCheck check;
        check.inputs = {{"wte", &wte, &dwte}, {"wpe", &wpe, &dwpe}};
        check.forward = [&]() -> const Vec& {
            ref::encoderForward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
            return out;
        };
        check.backward = [&](const Vec& dout) {
            ref::encoderBackward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
        };
        const QString error = check.run(rng);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        for (size_t i = size_t(T) * C; i < dwpe.size(); ++i)
            QCOMPARE(dwpe[i], 0.0);
    }

    void layernormGradient_data() { addShapes(); }
    void layernormGradient() {
        FETCH_SHAPE;
        const size_t n = size_t(B) * T * C;
        Vec inp = randomVec(rng, n), weight = randomVec(rng, C), bias = randomVec(rng, C);
        Vec dinp(n), dweight(C), dbias(C), out(n), mean(size_t(B) * T), rstd(size_t(B) * T);
        GradientCheck check;
        check.inputs = {
            {"inp", &inp, &dinp}, {"weight", &weight, &dweight}, {"bias", &bias, &dbias}};
        check.forward = [&]() -> const Vec& {
            ref::layernormForward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                                  bias.data(), B, T, C);
            return out;
        };
        check.backward = [&](const Vec& dout) {
            ref::layernormBackward(dinp.data(), dweight.data(), dbias.data(), dout.data(),
                                   inp.data(), weight.data(), mean.data(), rstd.data(), B, T, C);
        };
        const QString error = check.run(rng);
        QVERIFY2(error.isEmpty(), qPrintable(error));
    }

    void matmulGradient_data() { addShapes(); }
    void matmulGradient() {
        FETCH_SHAPE;
        for (int OC : {3 * C, 5}) {
            for (bool withBias : {true, false}) {
                Vec inp = randomVec(rng, size_t(B) * T * C),
                    weight = randomVec(rng, size_t(OC) * C);
                Vec bias = randomVec(rng, OC);
                Vec dinp(inp.size()), dweight(weight.size()), dbias(OC), out(size_t(B) * T * OC);
                GradientCheck check;
                check.inputs = {{"inp", &inp, &dinp}, {"weight", &weight, &dweight}};
                if (withBias)
                    check.inputs.push_back({"bias", &bias, &dbias});
                check.forward = [&]() -> const Vec& {
                    ref::matmulForward(out.data(), inp.data(), weight.data(),
                                       withBias ? bias.data() : nullptr, B, T, C, OC);
                    return out;
                };
                check.backward = [&](const Vec& dout) {
                    ref::matmulBackward(dinp.data(), dweight.data(),
                                        withBias ? dbias.data() : nullptr, dout.data(), inp.data(),
                                        weight.data(), B, T, C, OC);
                };
                const QString error = check.run(rng);
                QVERIFY2(error.isEmpty(),
                         qPrintable(QString("OC %1 bias %2: %3").arg(OC).arg(withBias).arg(error)));
            }
        }
    }

    void attentionGradient_data() { addShapes(); }
    void attentionGradient() {
        FETCH_SHAPE;
        const size_t square = size_t(B) * NH * T * T;
        Vec inp = randomVec(rng, size_t(B) * T * 3 * C), dinp(inp.size());
        Vec out(size_t(B) * T * C), preatt(square), att(square), dpreatt(square), datt(square);
        GradientCheck check;
        check.inputs = {{"inp", &inp, &dinp}};
        check.forward = [&]() -> const Vec& {
            ref::attentionForward(out.data(), preatt.data(), att.data(), inp.data(), B, T, C, NH);
            return out;
        };
        check.backward = [&](const Vec& dout) {
            ref::attentionBackward(dinp.data(), dpreatt.data(), datt.data(), dout.data(),
                                   inp.data(), att.data(), B, T, C, NH);
        };
        const QString error = check.run(rng);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        // Each attention row sums to 1 over the causal prefix and is 0 past the diagonal.
        for (size_t row = 0; row < size_t(B) * NH * T; ++row) {
            const int t = static_cast<int>(row % T);
            double sum = 0.0;
            for (int t2 = 0; t2 < T; ++t2) {
                const double a = att[row * T + t2];
                if (t2 > t) {
                    QCOMPARE(a, 0.0);
                    QCOMPARE(preatt[row * T + t2], 0.0);
                    QCOMPARE(datt[row * T + t2], 0.0);
                    QCOMPARE(dpreatt[row * T + t2], 0.0);
                }
                sum += a;
            }
            QVERIFY(closeTo(sum, 1.0, 1e-12));
        }
    }

    void geluGradient() {
        Rng rng(5);
        Vec x = randomVec(rng, 41, 2.0), dx(41), out(41);
        x.push_back(0.0);
        x.push_back(-5.0);
        x.push_back(6.0);
        dx.resize(x.size());
        out.resize(x.size());
        const int64_t N = static_cast<int64_t>(x.size());
        GradientCheck check;
        check.inputs = {{"x", &x, &dx}};
        check.forward = [&]() -> const Vec& {
            ref::geluForward(out.data(), x.data(), N);
            return out;
        };
        check.backward = [&](const Vec& dout) {
            ref::geluBackward(dx.data(), x.data(), dout.data(), N);
        };
        const QString error = check.run(rng);
        QVERIFY2(error.isEmpty(), qPrintable(error));
    }

    void residualGradient() {
        Rng rng(6);
        const int64_t N = 13;
        Vec a = randomVec(rng, N), b = randomVec(rng, N), da(N), db(N), out(N);
        GradientCheck check;
        check.inputs = {{"inp1", &a, &da}, {"inp2", &b, &db}};
        check.forward = [&]() -> const Vec& {
            ref::residualForward(out.data(), a.data(), b.data(), N);
            return out;
        };
        check.backward = [&](const Vec& dout) {
            ref::residualBackward(da.data(), db.data(), dout.data(), N);
        };
        const QString error = check.run(rng);
        QVERIFY2(error.isEmpty(), qPrintable(error));
    }

    void softmaxCrossEntropyGradient_data() { addShapes(); }
    void softmaxCrossEntropyGradient() {  // padded logits (Vp > V) must not count at all
        FETCH_SHAPE;
        for (const auto& [V, Vp] : {std::pair{2, 2}, {11, 11}, {256, 256}, {11, 64}, {300, 320}}) {
            const size_t n = size_t(B) * T;
            const auto targets = randomTokens(rng, n, V);
            Vec logits = randomVec(rng, n * Vp, 2.0), dlogits(logits.size());
            Vec losses(n), probs(n * Vp);
            GradientCheck check;
            check.inputs = {{"logits", &logits, &dlogits}};
            check.forward = [&]() -> const Vec& {
                ref::softmaxCrossEntropyForward(losses.data(), probs.data(), logits.data(),
                                                targets.data(), B, T, V, Vp);
                return losses;
            };
            check.backward = [&](const Vec& dlosses) {
                ref::crossEntropySoftmaxBackward(dlogits.data(), dlosses.data(), probs.data(),
                                                 targets.data(), B, T, V, Vp);
            };
            const QString error = check.run(rng);
            QVERIFY2(error.isEmpty(), qPrintable(QString("V %1: %2").arg(V).arg(error)));
        }
    }

    // ---- backward ops add into gradients; forward ops overwrite -------------------------------
    void backwardAccumulates() {
        Rng rng(7);
        const int B = 2, T = 3, C = 6, NH = 2, OC = 5, V = 9;
        const size_t btc = size_t(B) * T * C;
        // Runs backward twice: once into zeros, once into `prior`; the second must be prior +
        // first.
        auto expectAdds = [&](const char* what, std::vector<Vec*> grads,
                              const std::function<void()>& backward) {
            for (Vec* g : grads)
                std::fill(g->begin(), g->end(), 0.0);
            backward();
            std::vector<Vec> first;
            for (Vec* g : grads)
                first.push_back(*g);
            std::vector<Vec> prior;
            for (Vec* g : grads) {
                prior.push_back(randomVec(rng, g->size()));
                *g = prior.back();
            }
            backward();
            for (size_t k = 0; k < grads.size(); ++k) {
                for (size_t i = 0; i < grads[k]->size(); ++i) {
                    const double expected = prior[k][i] + first[k][i];
                    if (!closeTo((*grads[k])[i], expected, 1e-12 * (1 + std::abs(expected)))) {
                        QFAIL(qPrintable(QString("%1: gradient %2[%3] is %4, expected prior + "
                                                 "gradient = %5 (overwritten?)")
                                             .arg(what)
                                             .arg(k)
                                             .arg(i)
                                             .arg((*grads[k])[i])
                                             .arg(expected)));
                    }
                }
            }
        };

        const auto tokens = randomTokens(rng, size_t(B) * T, V);
        Vec dout = randomVec(rng, btc), dwte(size_t(V) * C), dwpe(size_t(T) * C);
        expectAdds("encoder", {&dwte, &dwpe}, [&] {
            ref::encoderBackward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
        });

        Vec inp = randomVec(rng, btc), weight = randomVec(rng, C), bias = randomVec(rng, C);
        Vec out(btc), mean(size_t(B) * T), rstd(size_t(B) * T), dinp(btc), dweight(C), dbias(C);
        ref::layernormForward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                              bias.data(), B, T, C);
        expectAdds("layernorm", {&dinp, &dweight, &dbias}, [&] {
            ref::layernormBackward(dinp.data(), dweight.data(), dbias.data(), dout.data(),
                                   inp.data(), weight.data(), mean.data(), rstd.data(), B, T, C);
        });

        Vec mw = randomVec(rng, size_t(OC) * C), mdout = randomVec(rng, size_t(B) * T * OC);
        Vec dmw(mw.size()), dmb(OC);
        expectAdds("matmul", {&dinp, &dmw, &dmb}, [&] {
            ref::matmulBackward(dinp.data(), dmw.data(), dmb.data(), mdout.data(), inp.data(),
                                mw.data(), B, T, C, OC);
        });

        const size_t square = size_t(B) * NH * T * T;
        Vec qkv = randomVec(rng, 3 * btc), dqkv(3 * btc), preatt(square), att(square);
        Vec dpreatt(square), datt(square);
        ref::attentionForward(out.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
        // Garbage in the scratch must not leak into the result.
        expectAdds("attention", {&dqkv}, [&] {
            for (double& x : dpreatt)
                x = rng.normal();
            for (double& x : datt)
                x = rng.normal();
            ref::attentionBackward(dqkv.data(), dpreatt.data(), datt.data(), dout.data(),
                                   qkv.data(), att.data(), B, T, C, NH);
        });

        expectAdds("gelu", {&dinp},
                   [&] { ref::geluBackward(dinp.data(), inp.data(), dout.data(), int64_t(btc)); });
        Vec dinp2(btc);
        expectAdds("residual", {&dinp, &dinp2}, [&] {
            ref::residualBackward(dinp.data(), dinp2.data(), dout.data(), int64_t(btc));
        });

        const auto targets = randomTokens(rng, size_t(B) * T, V);
        Vec logits = randomVec(rng, size_t(B) * T * V), probs(logits.size()), losses(size_t(B) * T);
        Vec dlogits(logits.size()), dlosses = randomVec(rng, size_t(B) * T);
        ref::softmaxCrossEntropyForward(losses.data(), probs.data(), logits.data(), targets.data(),
                                        B, T, V, V);
        expectAdds("cross-entropy", {&dlogits}, [&] {
            ref::crossEntropySoftmaxBackward(dlogits.data(), dlosses.data(), probs.data(),
                                             targets.data(), B, T, V, V);
        });
    }

    void forwardOverwrites() {
        // The float op set through the Ops interface: outputs full of NaN before the forward
        // must not change the result.
        ReferenceOps ops;
        Rng rng(8);
        const int B = 2, T = 3, C = 4, NH = 2;
        const size_t btc = size_t(B) * T * C, square = size_t(B) * NH * T * T;
        std::vector<float> qkv(3 * btc);
        for (float& x : qkv)
            x = rng.normal();
        std::vector<float> out1(btc), pre1(square), att1(square);
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::vector<float> out2(btc, nan), pre2(square, nan), att2(square, nan);
        ops.attentionForward(out1.data(), pre1.data(), att1.data(), qkv.data(), B, T, C, NH);
        ops.attentionForward(out2.data(), pre2.data(), att2.data(), qkv.data(), B, T, C, NH);
        QVERIFY(out1 == out2);
        QVERIFY(pre1 == pre2);
        QVERIFY(att1 == att2);
        std::vector<float> mm1(size_t(B) * T * 3, nan), w(3 * C, 0.5f);
        ops.matmulForward(mm1.data(), qkv.data(), w.data(), nullptr, B, T, C, 3);
        for (float x : mm1)
            QVERIFY(std::isfinite(x));
    }

    // ---- hand-worked forward values ------------------------------------------------------------
    void geluValues() {
        // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), worked out by hand for a few x.
        const double x[] = {0.0, 1.0, -1.0, 2.0, -3.0};
        const double expected[] = {0.0, 0.8411919906082768, -0.15880800939172324, 1.954597694087775,
                                   -0.0036373920817729943};
        double out[5];
        ref::geluForward(out, x, 5);
        for (int i = 0; i < 5; ++i) {
            QVERIFY2(closeTo(out[i], expected[i], 1e-12),
                     qPrintable(QString("gelu(%1) = %2").arg(x[i]).arg(out[i], 0, 'g', 17)));
        }
        // The float op set agrees to float precision.
        ReferenceOps ops;
        const float xf[] = {1.0f, -1.0f};
        float outf[2];
        ops.geluForward(outf, xf, 2);
        QVERIFY(closeTo(outf[0], expected[1], 1e-7));
        QVERIFY(closeTo(outf[1], expected[2], 1e-7));
    }

    void layernormValues() {
        // Row (1, 2, 3, 4): mean 2.5, biased variance 1.25, rstd = 1/sqrt(1.25 + 1e-5);
        // out = (x - 2.5) * rstd * weight + bias with weight (1, 2, 1, 1), bias (0, 0, 1, 0).
        const double inp[] = {1, 2, 3, 4}, weight[] = {1, 2, 1, 1}, bias[] = {0, 0, 1, 0};
        double out[4], mean, rstd;
        ref::layernormForward(out, &mean, &rstd, inp, weight, bias, 1, 1, 4);
        const double r = 1.0 / std::sqrt(1.25 + 1e-5);  // 0.8944236133...
        QVERIFY(closeTo(mean, 2.5, 1e-15));
        QVERIFY(closeTo(rstd, 0.8944236133, 1e-9));
        QVERIFY(closeTo(rstd, r, 1e-15));
        const double expected[] = {-1.5 * r, -0.5 * r * 2, 0.5 * r + 1, 1.5 * r};
        for (int i = 0; i < 4; ++i)
            QVERIFY(closeTo(out[i], expected[i], 1e-12));
        QVERIFY(closeTo(out[0], -1.3416354200, 1e-9));
    }

    void softmaxCrossEntropyValues() {
        // B=1, T=3, V=3.
        //   (0, 0, 0), target 1: probs 1/3 each, loss ln 3
        //   (1, 2, 3), target 2: probs e^(1,2,3) / (e + e^2 + e^3), loss ln(1 + e^-1 + e^-2)
        //   (1000, 0, 0), target 1: loss 1000 (no overflow), probs (1, 0, 0)
        const double logits[] = {0, 0, 0, 1, 2, 3, 1000, 0, 0};
        const int32_t targets[] = {1, 2, 1};
        double losses[3], probs[9];
        ref::softmaxCrossEntropyForward(losses, probs, logits, targets, 1, 3, 3, 3);
        QVERIFY(closeTo(losses[0], 1.0986122886681098, 1e-14));
        for (int j = 0; j < 3; ++j)
            QVERIFY(closeTo(probs[j], 1.0 / 3.0, 1e-15));
        QVERIFY(closeTo(losses[1], 0.4076059644443803, 1e-14));
        QVERIFY(closeTo(probs[3], 0.09003057317038046, 1e-14));
        QVERIFY(closeTo(probs[4], 0.24472847105479767, 1e-14));
        QVERIFY(closeTo(probs[5], 0.6652409557748219, 1e-14));
        QVERIFY(closeTo(losses[2], 1000.0, 1e-9));
        QVERIFY(closeTo(probs[6], 1.0, 1e-15));
        QCOMPARE(probs[7], 0.0);

        // Backward with dloss = 1/3 each (the mean): dlogits = (probs - onehot) / 3.
        double dlogits[9] = {}, dlosses[] = {1.0 / 3, 1.0 / 3, 1.0 / 3};
        ref::crossEntropySoftmaxBackward(dlogits, dlosses, probs, targets, 1, 3, 3, 3);
        QVERIFY(closeTo(dlogits[0], 1.0 / 9, 1e-15));
        QVERIFY(closeTo(dlogits[1], -2.0 / 9, 1e-15));
        QVERIFY(closeTo(dlogits[5], (0.6652409557748219 - 1) / 3, 1e-14));
    }

    void attentionValues() {
        // B=1, T=2, C=NH=1 (scale 1). q1 = 1, k0 = 0, k1 = ln 3: position 1 attends (1/4, 3/4)
        // to v = (4, 8), so out = (4, 7). inp per position: (q, k, v).
        const double inp[] = {0.5, 0.0, 4.0, 1.0, std::log(3.0), 8.0};
        double out[2], preatt[4], att[4];
        ref::attentionForward(out, preatt, att, inp, 1, 2, 1, 1);
        QVERIFY(closeTo(out[0], 4.0, 1e-15));
        QVERIFY(closeTo(out[1], 7.0, 1e-14));
        QVERIFY(closeTo(att[0], 1.0, 1e-15));
        QCOMPARE(att[1], 0.0);
        QVERIFY(closeTo(att[2], 0.25, 1e-15));
        QVERIFY(closeTo(att[3], 0.75, 1e-15));
        QVERIFY(closeTo(preatt[0], 0.0, 1e-15));
        QVERIFY(closeTo(preatt[3], std::log(3.0), 1e-15));

        // Scale 1/sqrt(hs): C=4, NH=1, T=1; q.k = 8, preatt = 8 / 2 = 4.
        const double one[] = {1, 1, 1, 1, 2, 2, 2, 2, 5, 6, 7, 8};
        double out1[4], pre1[1], att1[1];
        ref::attentionForward(out1, pre1, att1, one, 1, 1, 4, 1);
        QVERIFY(closeTo(pre1[0], 4.0, 1e-15));
        QVERIFY(closeTo(out1[3], 8.0, 1e-15));
    }

    void matmulValues() {
        // (1,2) . ((1,2),(3,4),(5,6))^T + (0.5, 0, -1) = (5.5, 11, 16)
        const double inp[] = {1, 2}, weight[] = {1, 2, 3, 4, 5, 6}, bias[] = {0.5, 0, -1};
        double out[3];
        ref::matmulForward(out, inp, weight, bias, 1, 1, 2, 3);
        QCOMPARE(out[0], 5.5);
        QCOMPARE(out[1], 11.0);
        QCOMPARE(out[2], 16.0);
    }

    // ---- optimizer ops -------------------------------------------------------------------------
    void sumSquaresAccumulatesInDouble() {
        ReferenceOps ops;
        const float small[] = {1, 2, -3};
        QCOMPARE(ops.sumSquares(small, 3), 14.0);
        // 2^24 + 2^22 ones: a float accumulator stops at 2^24.
        const int64_t n = (int64_t{1} << 24) + (int64_t{1} << 22);
        std::vector<float> ones(static_cast<size_t>(n), 1.0f);
        QCOMPARE(ops.sumSquares(ones.data(), n), static_cast<double>(n));
    }

    void adamwValues() {
        ReferenceOps ops;
        // Step 1 from zero moments: g = 0.5 * gradScale 2 = 1; m = 0.1, v = 0.05;
        // mhat = 0.1 / (1 - 0.9) = 1, vhat = 0.05 / (1 - 0.95) = 1;
        // p = 2 - 0.01 * (1 / (1 + 1e-8) + 0.1 * 2) = 1.988 (to 1e-10).
        float p[2] = {2.0f, 2.0f}, g[2] = {0.5f, 0.5f}, m[2] = {}, v[2] = {};
        ops.adamwUpdate(p, g, m, v, 1, 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, 2.0f, 1);
        QVERIFY(closeTo(m[0], 0.1, 1e-7));
        QVERIFY(closeTo(v[0], 0.05, 1e-7));
        QVERIFY(closeTo(p[0], 1.988, 1e-6));
        QCOMPARE(p[1], 2.0f);  // N = 1: the second element is untouched
        // Step 2 with g = -1 (grad -0.5, scale 2): m = 0.09 - 0.1 = -0.01, v = 0.0475 + 0.05
        // = 0.0975; mhat = -0.01 / 0.19, vhat = 0.0975 / 0.0975 = 1;
        // p = 1.988 - 0.01 * (-0.0526315789 + 0.1988) = 1.98653684...
        g[0] = -0.5f;
        ops.adamwUpdate(p, g, m, v, 1, 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, 2.0f, 2);
        QVERIFY(closeTo(m[0], -0.01, 1e-7));
        QVERIFY(closeTo(v[0], 0.0975, 1e-7));
        const double expected = 1.988 - 0.01 * (-0.01 / 0.19 / (1.0 + 1e-8) + 0.1 * 1.988);
        QVERIFY2(closeTo(p[0], expected, 2e-6),
                 qPrintable(QString("p = %1, expected %2").arg(p[0], 0, 'g', 10).arg(expected)));
        // No weight decay: the parameter moves by the Adam term only.
        float q = 3.0f, gq = 1.0f, mq = 0, vq = 0;
        ops.adamwUpdate(&q, &gq, &mq, &vq, 1, 0.1f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1);
        QVERIFY(closeTo(q, 2.9, 1e-6));
    }

    // ---- fp16 encode ---------------------------------------------------------------------------
    void encodeDelta() {
        ReferenceOps ops;
        // delta = start - current
        const float start[] = {
            1.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 70000.0f, 0.0f, -2.0f, 3e38f, 0.0f};
        const float current[] = {0.0f, 0.0f, 0.0f, 0.0f, 70000.0f, -2.5f, -3e38f, 0.0f};
        uint16_t out[8];
        EncodeStats stats = ops.encodeDeltaFp16(out, start, current, 7);
        QCOMPARE(out[0], uint16_t(0x3C00));  // 1.0
        QCOMPARE(out[1], uint16_t(0x3C00));  // tie between 1 and 1 + 2^-10: to even
        QCOMPARE(out[2], uint16_t(0x3C02));  // tie between 1 + 2^-10 and 1 + 2^-9: to even
        QCOMPARE(out[3], uint16_t(0x7BFF));  // saturated to 65504
        QCOMPARE(out[4], uint16_t(0xFBFF));  // saturated to -65504
        QCOMPARE(out[5], uint16_t(0x3800));  // 0.5
        QCOMPARE(stats.saturated, int64_t{2});
        QCOMPARE(stats.nonFinite, int64_t{1});  // 3e38 - (-3e38) overflows to Inf
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const float s2[] = {nan, 1.0f}, c2[] = {0.0f, 0.0f};
        stats = ops.encodeDeltaFp16(out, s2, c2, 2);
        QCOMPARE(stats.nonFinite, int64_t{1});
        QCOMPARE(stats.saturated, int64_t{0});
    }
};

QTEST_APPLESS_MAIN(TestReferenceOps)
#include "test_reference_ops.moc"
