// The model configuration and the parameter table.
#include "model.hpp"

#include <QtTest>

#include <numeric>
#include <set>

using namespace tandem;

class TestModel : public QObject {
    Q_OBJECT
  private slots:
    void namedConfigs() {
        auto tiny = ModelConfig::parse("tiny");
        QVERIFY(tiny.ok());
        QCOMPARE(tiny->layers, 2);
        QCOMPARE(tiny->heads, 4);
        QCOMPARE(tiny->channels, 128);
        QCOMPARE(tiny->maxSeqLen, 64);
        auto medium = ModelConfig::parse("medium");
        QVERIFY(medium.ok());
        QCOMPARE(medium->describe(), std::string("L=6 NH=6 C=384 T=256 V=256"));
    }

    void explicitNumbers() {
        auto c = ModelConfig::parse("L=3,NH=2,C=10,T=7");
        QVERIFY2(c.ok(), c.ok() ? "" : c.error().message.c_str());
        QCOMPARE(c->layers, 3);
        QCOMPARE(c->channels, 10);
        QCOMPARE(c->maxSeqLen, 7);
    }

    void refusesNonsense_data() {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("C not divisible") << "L=2,NH=3,C=128,T=64"
                                         << "divisible by heads";
        QTest::newRow("zero layers") << "L=0,NH=4,C=128,T=64"
                                     << "layers (L) is 0";
        QTest::newRow("zero T") << "L=2,NH=4,C=128,T=0"
                                << "sequence length (T) is 0";
        QTest::newRow("absurd C") << "L=2,NH=4,C=1000000,T=64"
                                  << "channels (C) is 1000000";
        QTest::newRow("too many parameters") << "L=96,NH=8,C=8192,T=64"
                                             << "more than the limit";
        QTest::newRow("missing key") << "L=2,NH=4,C=128"
                                     << "must give all of";
        QTest::newRow("unknown key") << "L=2,NH=4,C=128,T=64,X=1"
                                     << "unknown key 'X'";
        QTest::newRow("not a number") << "L=two,NH=4,C=128,T=64"
                                      << "whole number";
        QTest::newRow("unknown name") << "huge"
                                      << "expected tiny, small, medium";
        QTest::newRow("vocab of one") << "L=2,NH=4,C=128,T=64,V=1"
                                      << "vocabulary size (V) is 1, expected 2 to 1048576";
    }
    void refusesNonsense() {
        QFETCH(QString, text);
        QFETCH(QString, expected);
        auto c = ModelConfig::parse(text.toStdString());
        QVERIFY(!c.ok());
        QVERIFY2(QString::fromStdString(c.error().message).contains(expected),
                 c.error().message.c_str());
    }

    void layoutCoversBufferExactly() {
        for (const char* name : {"tiny", "small", "medium", "L=1,NH=1,C=3,T=1"}) {
            const ModelConfig c = *ModelConfig::parse(name);
            const ParameterLayout layout(c);
            QCOMPARE(layout.parameterCount(), c.parameterCount());
            int64_t next = 0;
            std::set<std::string> names;
            for (const auto& t : layout.tensors()) {
                QCOMPARE(t.offset, next);  // contiguous, in order, no gaps or overlaps
                const int64_t size = std::accumulate(t.shape.begin(), t.shape.end(), int64_t{1},
                                                     std::multiplies<>());
                QCOMPARE(t.size, size);
                QCOMPARE(t.decays, t.shape.size() == 2);
                QVERIFY(names.insert(t.name).second);
                next += t.size;
            }
            QCOMPARE(next, layout.parameterCount());
            QCOMPARE(static_cast<int>(layout.tensors().size()), 2 + 12 * c.layers + 2);
        }
    }

    void tinyParameterCountByHand() {
        // V*C + T*C + L*(12 C^2 + 13 C) + 2C with V=256, T=64, C=128, L=2
        const int64_t C = 128;
        const int64_t expected = 256 * C + 64 * C + 2 * (12 * C * C + 13 * C) + 2 * C;
        QCOMPARE(ModelConfig::parse("tiny")->parameterCount(), expected);
    }

    void blockOffsetsMatchTable() {
        const ModelConfig c = *ModelConfig::parse("small");
        const ParameterLayout layout(c);
        const int64_t start = layout.blockStart(3);
        QCOMPARE(layout.find("blocks.3.attn.qkv.weight")->offset, start + layout.block().qkvWeight);
        QCOMPARE(layout.find("blocks.3.mlp.proj.bias")->offset, start + layout.block().fcProjBias);
        QCOMPARE(layout.find("lnf.weight")->offset, layout.lnfWeight());
        QCOMPARE(layout.find("wpe")->offset, layout.wpe());
        QVERIFY(layout.find("nothing") == nullptr);
    }

    void initialisation() {
        const ModelConfig c = *ModelConfig::parse("L=4,NH=4,C=64,T=32");
        const ParameterLayout layout(c);
        std::vector<float> a(layout.parameterCount()), b(a.size());
        initParameters(layout, a, 42);
        initParameters(layout, b, 42);
        QVERIFY(a == b);  // deterministic in the seed
        initParameters(layout, b, 43);
        QVERIFY(a != b);
        auto stddev = [&](const std::string& name) {
            const TensorInfo* t = layout.find(name);
            double sum = 0, sq = 0;
            for (int64_t i = 0; i < t->size; ++i) {
                sum += a[t->offset + i];
                sq += double(a[t->offset + i]) * a[t->offset + i];
            }
            const double mean = sum / t->size;
            return std::sqrt(sq / t->size - mean * mean);
        };
        QVERIFY(std::abs(stddev("wte") - 0.02) < 0.002);
        QVERIFY(std::abs(stddev("blocks.0.mlp.fc.weight") - 0.02) < 0.002);
        // residual projections are scaled by 1/sqrt(2L)
        QVERIFY(std::abs(stddev("blocks.1.mlp.proj.weight") - 0.02 / std::sqrt(8.0)) < 0.001);
        QCOMPARE(a[layout.find("blocks.2.ln1.weight")->offset], 1.0f);
        QCOMPARE(a[layout.find("blocks.2.ln1.bias")->offset], 0.0f);
        QCOMPARE(a[layout.find("blocks.2.attn.qkv.bias")->offset + 5], 0.0f);
    }
};

QTEST_APPLESS_MAIN(TestModel)
#include "test_model.moc"
