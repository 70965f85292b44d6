// Sampling what the model writes: top-k draws against hand-worked values, the backend's
// next-token probabilities against exp(-loss) of single-token forwards, and a model trained on a
// repeating text that, sampled greedily, continues the pattern.
#include "backend.hpp"
#include "random.hpp"
#include "sampler.hpp"

#include <QtTest>

#include <cmath>
#include <string>
#include <vector>

using namespace tandem;

namespace {

std::unique_ptr<Backend> cpuBackend(const ModelConfig& model, int B) {
    auto b = makeCpuBackend("cpu", 1);
    if (!b || !(*b)->allocate(model, B, model.maxSeqLen))
        return nullptr;
    return std::move(*b);
}

std::vector<int32_t> bytesOf(const std::string& s) {
    return std::vector<int32_t>(s.begin(), s.end());
}

}  // namespace

class TestSampler : public QObject {
    Q_OBJECT

  private slots:
    void topKDrawsHandWorked() {
        const std::vector<float> p = {0.1f, 0.5f, 0.2f, 0.2f};
        // k = 2 keeps indices 1 (0.5) and 2 (0.2, the lower index of the tie); mass 0.7.
        QCOMPARE(drawTopK(p, 2, 0.0f), 1);
        QCOMPARE(drawTopK(p, 2, 0.7f), 1);   // 0.49 < 0.5
        QCOMPARE(drawTopK(p, 2, 0.72f), 2);  // 0.504 >= 0.5
        QCOMPARE(drawTopK(p, 2, 0.999f), 2);
        for (float u : {0.0f, 0.5f, 0.99f})
            QCOMPARE(drawTopK(p, 1, u), 1);
        // k = 4 is plain sampling: 0.05 falls in index 0's [0, 0.1).
        QCOMPARE(drawTopK(p, 4, 0.05f), 1);  // sorted order is 1, 2, 3, 0
        QCOMPARE(drawTopK(p, 4, 0.95f), 0);
        QCOMPARE(drawTopK(p, 99, 0.75f), 3);  // k above V is V
    }

    void probabilitiesAgreeWithTheLoss() {
        // V = 300 pads to 320 rows: every position's row must be found at the padded stride.
        for (const char* shape : {"L=1,NH=2,C=16,T=8", "L=1,NH=2,C=16,T=8,V=300"}) {
            auto model = ModelConfig::parse(shape);
            QVERIFY2(model, shape);
            const int V = model->vocabSize;
            auto backend = cpuBackend(*model, 2);
            QVERIFY(backend);
            ParameterLayout layout(*model);
            std::vector<float> w(static_cast<size_t>(layout.parameterCount()));
            initParameters(layout, w, 5);
            QVERIFY(backend->loadParameters(w));
            Rng rng(3);
            std::vector<int32_t> in(10), targets(10);
            for (size_t i = 0; i < in.size(); ++i) {
                in[i] = static_cast<int32_t>(rng.below(V));
                targets[i] = static_cast<int32_t>(rng.below(V));
            }
            auto loss = backend->forward(in, targets, 2, 5);
            QVERIFY(loss);
            // The loss is the mean of -log p[target] over every (row, position).
            double sum = 0;
            std::vector<float> p(static_cast<size_t>(V));
            for (int row = 0; row < 2; ++row) {
                for (int t = 0; t < 5; ++t) {
                    QVERIFY(backend->storeProbabilities(row, t, p));
                    double mass = 0;
                    for (float x : p)
                        mass += x;
                    QVERIFY(std::abs(mass - 1.0) < 1e-4);
                    sum += -std::log(p[static_cast<size_t>(targets[row * 5 + t])]);
                }
            }
            QVERIFY2(std::abs(sum / 10 - *loss) < 1e-5,
                     qPrintable(QString("%1 against %2").arg(sum / 10).arg(*loss)));
            // Refusals.
            QVERIFY(!backend->storeProbabilities(2, 0, p));
            QVERIFY(!backend->storeProbabilities(0, 5, p));
            std::vector<float> shortOut(10);
            QVERIFY(!backend->storeProbabilities(0, 0, shortOut));
        }
    }

    void trainedModelContinuesItsPattern() {
        auto model = ModelConfig::parse("L=1,NH=2,C=32,T=16");
        QVERIFY(model);
        const int B = 4, T = model->maxSeqLen;
        auto backend = cpuBackend(*model, B);
        QVERIFY(backend);
        ParameterLayout layout(*model);
        std::vector<float> w(static_cast<size_t>(layout.parameterCount()));
        initParameters(layout, w, 1);
        QVERIFY(backend->loadParameters(w));
        const std::string pattern = "abcde";
        std::string text;
        while (text.size() < 400)
            text += pattern;
        Rng rng(9);
        std::vector<int32_t> in(static_cast<size_t>(B) * T), tg(in.size());
        AdamWConfig adamw;
        float loss = 99;
        for (int step = 0; step < 300 && loss > 0.02f; ++step) {
            for (int b = 0; b < B; ++b) {
                const size_t off = rng.below(text.size() - T - 1);
                for (int t = 0; t < T; ++t) {
                    in[b * T + t] = static_cast<unsigned char>(text[off + t]);
                    tg[b * T + t] = static_cast<unsigned char>(text[off + t + 1]);
                }
            }
            auto l = backend->forward(in, tg, B, T);
            QVERIFY(l);
            loss = *l;
            QVERIFY(backend->backward());
            QVERIFY(backend->adamwStep(adamw, 1e-2f));
        }
        QVERIFY2(loss < 0.1f, qPrintable(QString("training loss %1").arg(loss)));
        // Greedy (k = 1): the continuation follows the pattern, past the window length too.
        auto written = sampleContinuation(*backend, *model, bytesOf("cdeab"), {40, 1, 7});
        QVERIFY2(written, written ? "" : written.error().message.c_str());
        QCOMPARE(written->size(), size_t{40});
        std::string s(written->begin(), written->end());
        std::string expected;
        for (size_t i = 0; i < 40; ++i)
            expected += pattern[(2 + i) % pattern.size()];
        QCOMPARE(s, expected);
        // Top-k draws are deterministic in the seed and stay in the vocabulary.
        auto a = sampleContinuation(*backend, *model, bytesOf("x"), {20, 40, 11});
        auto b = sampleContinuation(*backend, *model, bytesOf("x"), {20, 40, 11});
        QVERIFY(a && b);
        QCOMPARE(*a, *b);
        for (int32_t id : *a)
            QVERIFY(id >= 0 && id < 256);
        // Bad prompts.
        QVERIFY(!sampleContinuation(*backend, *model, std::vector<int32_t>{}, {}));
        QVERIFY(!sampleContinuation(*backend, *model, std::vector<int32_t>{256}, {}));
    }
};

QTEST_APPLESS_MAIN(TestSampler)
#include "test_sampler.moc"
