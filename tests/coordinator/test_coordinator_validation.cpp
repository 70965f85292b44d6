// The validation loss alone: with all-zero weights every logit is equal, so the loss is exactly
// ln V (V = 256 for byte runs) up to float rounding, whatever the text; then through the
// Coordinator, the loss recorded for a round is the loss of the weights that round published.
//
// Dimensions: P parameters.
#include "checkpoint.hpp"
#include "codec.hpp"
#include "direct.hpp"
#include "validation_loss.hpp"

#include <QtTest>

#include <cmath>

using namespace tandem;
using namespace tandem::testing;

namespace {

std::vector<uint8_t> someText(size_t bytes) {
    std::vector<uint8_t> text(bytes);
    for (size_t i = 0; i < bytes; ++i)
        text[i] = static_cast<uint8_t>((i * 37 + i / 5) % 251);
    return text;
}

}  // namespace

class TestCoordinatorValidation : public QObject {
    Q_OBJECT

  private slots:
    void zeroWeightsGiveLnV() {
        const ModelConfig model = *ModelConfig::parse("L=2,NH=2,C=32,T=16");
        QCOMPARE(model.vocabSize, 256);
        const std::vector<float> zeros(static_cast<size_t>(model.parameterCount()), 0.0f);
        const auto text = someText(5000);
        for (int threads : {1, 3}) {
            auto loss = coord::validationLoss(model, zeros, text, 4, 8, threads);
            QVERIFY2(loss, loss ? "" : loss.error().message.c_str());
            // ln 256 = 5.545177444479562, to float rounding (2 ulp = 9.5e-7 at 5.5).
            QVERIFY2(std::abs(*loss - std::log(256.0)) < 1e-6, std::to_string(*loss).c_str());
        }
        // One window, and windows that overlap: still ln V.
        auto one = coord::validationLoss(model, zeros, std::span(text).first(17), 1, 1, 1);
        QVERIFY(one);
        QVERIFY(std::abs(*one - std::log(256.0)) < 1e-6);
    }

    void tooShortText() {
        const ModelConfig model = *ModelConfig::parse("L=1,NH=2,C=16,T=16");
        const std::vector<float> zeros(static_cast<size_t>(model.parameterCount()), 0.0f);
        auto loss = coord::validationLoss(model, zeros, someText(16), 1, 1, 1);
        QVERIFY(!loss);
        QCOMPARE(loss.error().message,
                 std::string("the validation text is shorter than one window"));
    }

    void recordsTheLossOfThePublishedWeights() {
        auto cfg = directConfig();
        cfg.quorum = 1;
        cfg.validationBatches = 2;
        cfg.validationBatch = 4;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        auto a = f.registerClient("a");
        std::vector<uint16_t> delta(static_cast<size_t>(c.parameterCount()));
        for (size_t i = 0; i < delta.size(); ++i)
            delta[i] = floatToHalf(0.01f * float(int(i % 5) - 2));
        for (int round = 0; round < 2; ++round)
            QVERIFY(f.upload(a, buildResult(f.work(a), delta, a.key)).ok());
        c.waitForValidation();
        const auto status = c.status();
        QCOMPARE(status.history.size(), size_t(2));
        const auto text = f.readStateFile("data/validation.bin");
        for (const auto& h : status.history) {
            auto ck = loadCheckpoint(
                f.t().stateDir() / "weights" / ("v" + std::to_string(h.round + 1) + ".ckpt"),
                c.model());
            QVERIFY(ck);
            auto expected = coord::validationLoss(c.model(), ck->parameters, text, 2, 4, 1);
            QVERIFY(expected && h.valLoss);
            QCOMPARE(*h.valLoss, *expected);
        }
        QVERIFY(*status.history[0].valLoss != *status.history[1].valLoss);
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorValidation)
#include "test_coordinator_validation.moc"
