// The whole training loop learns: the tiny model on real text (Debian's fortunes, byte-level),
// trained by the fast CPU backend with AdamW and warmup + cosine, goes from about ln(256) to a
// clearly lower loss on held-out text within a few hundred steps.
//
// Dimensions: B batch, T sequence, P parameters.
#include "backend.hpp"
#include "corpus.hpp"
#include "model.hpp"
#include "optimizer.hpp"

#include <QtTest>

#include <cmath>
#include <filesystem>
#include <vector>

using namespace tandem;

namespace {

// Mean loss over fixed windows of held-out text (same windows before and after training).
float heldOutLoss(Backend& backend, std::span<const uint8_t> text, int B, int T, int batches) {
    BatchSampler sampler(text, 777);
    std::vector<int32_t> inputs(B * T), targets(B * T);
    double sum = 0;
    for (int i = 0; i < batches; ++i) {
        sampler.next(B, T, inputs, targets);
        auto loss = backend.forward(inputs, targets, B, T);
        if (!loss)
            qFatal("forward failed: %s", loss.error().message.c_str());
        sum += *loss;
    }
    return static_cast<float>(sum / batches);
}

}  // namespace

class TestLearning : public QObject {
    Q_OBJECT
  private slots:
    void tinyModelLearnsFortunes() {
        const std::filesystem::path fortunes = "/usr/share/games/fortunes";
        if (!std::filesystem::is_directory(fortunes)) {
            QSKIP("Debian's fortunes package is not installed (scripts/setup installs it)");
        }
        const std::vector<std::filesystem::path> paths = {fortunes};
        auto corpus = loadTextCorpus(paths);
        QVERIFY2(corpus.ok(), corpus.ok() ? "" : corpus.error().message.c_str());
        // The last 10% is held out: the model never trains on it.
        const size_t split = corpus->size() * 9 / 10;
        const std::span<const uint8_t> train(corpus->data(), split);
        const std::span<const uint8_t> heldOut(corpus->data() + split, corpus->size() - split);

        const ModelConfig config = *ModelConfig::parse("tiny");
        const int B = 8, T = config.maxSeqLen;
        const int steps = 400;
        auto made = makeCpuBackend("cpu", 2);
        QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());
        Backend& backend = **made;
        QVERIFY(backend.allocate(config, B, T).ok());
        const ParameterLayout layout(config);
        std::vector<float> parameters(layout.parameterCount());
        initParameters(layout, parameters, 1);
        QVERIFY(backend.loadParameters(parameters).ok());

        const float before = heldOutLoss(backend, heldOut, B, T, 8);
        // Freshly initialised: close to uniform over 256 bytes.
        QVERIFY2(std::fabs(before - std::log(256.0f)) < 0.1f, qPrintable(QString::number(before)));

        const AdamWConfig adamw;  // beta2 0.95, weight decay 0.1, clipping at 1
        const LrSchedule schedule{3e-3f, 3e-4f, 40, steps};
        BatchSampler sampler(train, 1);
        std::vector<int32_t> inputs(B * T), targets(B * T);
        float firstTrain = 0, lastTrain = 0;
        for (int step = 0; step < steps; ++step) {
            sampler.next(B, T, inputs, targets);
            auto loss = backend.forward(inputs, targets, B, T);
            QVERIFY2(loss.ok(), loss.ok() ? "" : loss.error().message.c_str());
            QVERIFY2(std::isfinite(*loss), qPrintable(QString("step %1").arg(step)));
            if (step == 0)
                firstTrain = *loss;
            lastTrain = *loss;
            QVERIFY(backend.backward().ok());
            QVERIFY(backend.adamwStep(adamw, schedule.at(step)).ok());
        }
        const float after = heldOutLoss(backend, heldOut, B, T, 8);
        qInfo("held-out loss %.3f -> %.3f after %d steps (train %.3f -> %.3f)", before, after,
              steps, firstTrain, lastTrain);
        QVERIFY2(after < 3.0f,
                 qPrintable(QString("held-out loss %1, expected below 3").arg(after)));
        QVERIFY(lastTrain < firstTrain - 2.0f);
    }
};

QTEST_APPLESS_MAIN(TestLearning)
#include "test_learning.moc"
