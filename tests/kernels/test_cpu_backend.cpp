// The CPU backends as a whole: training steps of the fast backend ("cpu") against the
// reference, determinism across runs and thread counts, no heap allocation in a step, the
// backend factory and the memory check.
#include "backend.hpp"
#include "cpu_test_support.hpp"
#include "model.hpp"

#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

using namespace tandem;
using namespace tandem::testing;

// Counts C++ heap allocations, to check that a training step makes none.
static std::atomic<int64_t> g_allocations{0};
void* operator new(size_t bytes) {
    ++g_allocations;
    if (void* p = std::malloc(bytes ? bytes : 1))
        return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, size_t) noexcept {
    std::free(p);
}

namespace {

// Runs one training setup on a backend and returns the losses of every step and the final
// parameters.
struct TrainingRun {
    std::vector<float> losses;
    Floats parameters;
};

TrainingRun train(const char* backendName, int threads, const ModelConfig& config, int B, int T,
                  int steps) {
    TrainingRun run;
    auto made = makeCpuBackend(backendName, threads);
    if (!made)
        qFatal("%s", made.error().message.c_str());
    Backend& backend = **made;
    if (auto s = backend.allocate(config, B, T); !s)
        qFatal("%s", s.error().message.c_str());
    const ParameterLayout layout(config);
    Floats parameters(layout.parameterCount());
    initParameters(layout, parameters, 42);
    if (auto s = backend.loadParameters(parameters); !s)
        qFatal("%s", s.error().message.c_str());
    const AdamWConfig adamw;
    for (int step = 0; step < steps; ++step) {
        // A fixed token stream per step: the model can learn it, so losses move. Sixteen token
        // values spread over the vocabulary, its last token included.
        auto inputs = randomTokens(size_t(B) * T, 1000 + step % 4, 16);
        for (int32_t& token : inputs)
            token = token * (config.vocabSize - 1) / 15;
        auto targets = inputs;
        std::rotate(targets.begin(), targets.begin() + 1, targets.end());
        auto loss = backend.forward(inputs, targets, B, T);
        if (!loss)
            qFatal("%s", loss.error().message.c_str());
        run.losses.push_back(*loss);
        if (auto s = backend.backward(); !s)
            qFatal("%s", s.error().message.c_str());
        if (auto s = backend.adamwStep(adamw, 1e-3f); !s)
            qFatal("%s", s.error().message.c_str());
    }
    run.parameters.resize(layout.parameterCount());
    if (auto s = backend.storeParameters(run.parameters); !s)
        qFatal("%s", s.error().message.c_str());
    return run;
}

}  // namespace

class TestCpuBackend : public QObject {
    Q_OBJECT
  private slots:
    void trainingMatchesReference_data() {
        QTest::addColumn<QString>("config");
        QTest::addColumn<int>("B");
        QTest::addColumn<int>("T");
        QTest::addColumn<int>("threads");
        QTest::newRow("L=2 NH=4 C=32 T=16, 2 threads") << "L=2,NH=4,C=32,T=16" << 4 << 16 << 2;
        QTest::newRow("L=1 NH=3 C=36 T=40 (odd C, T over a block), 1 thread")
            << "L=1,NH=3,C=36,T=40" << 2 << 37 << 1;
        QTest::newRow("L=1 NH=3 C=36 T=40, 2 threads") << "L=1,NH=3,C=36,T=40" << 2 << 37 << 2;
        QTest::newRow("L=2 NH=1 C=20 T=1 B=1, 2 threads") << "L=2,NH=1,C=20,T=1" << 1 << 1 << 2;
        QTest::newRow("V=300 (padded to 320), 2 threads")
            << "L=1,NH=4,C=32,T=16,V=300" << 2 << 16 << 2;
        QTest::newRow("V=50257 (GPT-2, padded to 50304), 2 threads")
            << "L=1,NH=4,C=32,T=16,V=50257" << 1 << 16 << 2;
    }
    void trainingMatchesReference() {
        QFETCH(QString, config);
        QFETCH(int, B);
        QFETCH(int, T);
        QFETCH(int, threads);
        const ModelConfig c = *ModelConfig::parse(config.toStdString());
        const int steps = 20;
        const TrainingRun fast = train("cpu", threads, c, B, T, steps);
        const TrainingRun ref = train("cpu-reference", 1, c, B, T, steps);
        for (int i = 0; i < steps; ++i) {
            const double error = std::fabs(fast.losses[i] - ref.losses[i]) / ref.losses[i];
            QVERIFY2(error < 1e-5, qPrintable(QStringLiteral("step %1: loss %2 vs %3")
                                                  .arg(i)
                                                  .arg(fast.losses[i], 0, 'g', 9)
                                                  .arg(ref.losses[i], 0, 'g', 9)));
        }
        QVERIFY2(ref.losses.back() < ref.losses.front() - 0.1f, "the model should learn");
        CHECK_CLOSE(fast.parameters, ref.parameters, 2e-5);
        // The padded wte rows (wte comes first) are still exactly zero after every AdamW step.
        const size_t firstPadded = size_t(c.vocabSize) * c.channels;
        const size_t endPadded = size_t(c.paddedVocab()) * c.channels;
        for (size_t i = firstPadded; i < endPadded; ++i) {
            QCOMPARE(fast.parameters[i], 0.0f);
            QCOMPARE(ref.parameters[i], 0.0f);
        }
    }

    // Same seed, config and thread count: the same bits. The fast ops also split their work
    // independently of the thread count, so 1 and 2 threads agree bit for bit as well.
    void deterministic() {
        const ModelConfig c = *ModelConfig::parse("L=2,NH=4,C=64,T=48");
        const TrainingRun a = train("cpu", 2, c, 4, 48, 5);
        const TrainingRun b = train("cpu", 2, c, 4, 48, 5);
        const TrainingRun single = train("cpu", 1, c, 4, 48, 5);
        for (const TrainingRun* other : {&b, &single}) {
            QVERIFY(std::memcmp(a.losses.data(), other->losses.data(),
                                a.losses.size() * sizeof(float)) == 0);
            QVERIFY(std::memcmp(a.parameters.data(), other->parameters.data(),
                                a.parameters.size() * sizeof(float)) == 0);
        }
    }

    // After the first steps (OpenBLAS sets up its buffers on first use), a step of the cpu
    // backend allocates nothing.
    void stepDoesNotAllocate() {
        auto made = makeCpuBackend("cpu", 2);
        QVERIFY(made.ok());
        Backend& backend = **made;
        const ModelConfig c = *ModelConfig::parse("L=2,NH=4,C=64,T=32");
        QVERIFY(backend.allocate(c, 4, 32).ok());
        const ParameterLayout layout(c);
        Floats parameters(layout.parameterCount());
        initParameters(layout, parameters, 7);
        QVERIFY(backend.loadParameters(parameters).ok());
        const auto inputs = randomTokens(4 * 32, 1, kV), targets = randomTokens(4 * 32, 2, kV);
        const AdamWConfig adamw;
        int64_t allocations = 0;
        for (int step = 0; step < 5; ++step) {
            if (step == 2)
                allocations = g_allocations.load();
            const bool ok = backend.forward(inputs, targets, 4, 32).ok() &&
                            backend.backward().ok() && backend.adamwStep(adamw, 1e-3f).ok();
            QVERIFY(ok);
        }
        QCOMPARE(g_allocations.load() - allocations, int64_t{0});

        // The counter does see allocations.
        const int64_t before = g_allocations.load();
        void* probe = ::operator new(64);
        ::operator delete(probe);
        QCOMPARE(g_allocations.load() - before, int64_t{1});
    }

    // ---- the factory ---------------------------------------------------------------------

    void factory() {
        auto fast = makeCpuBackend("cpu", 2);
        QVERIFY(fast.ok());
        QCOMPARE((*fast)->name(), std::string("cpu"));
        auto openblas = makeCpuBackend("cpu-openblas", 2);
        QVERIFY(openblas.ok());
        QCOMPARE((*openblas)->name(), std::string("cpu-openblas"));
        auto ref = makeCpuBackend("cpu-reference", 1);
        QVERIFY(ref.ok());
        QCOMPARE((*ref)->name(), std::string("cpu-reference"));

        auto unknown = makeCpuBackend("gpu", 1);
        QVERIFY(!unknown.ok());
        const QString message = QString::fromStdString(unknown.error().message);
        QVERIFY2(message.contains("'gpu'") && message.contains("cpu, cpu-openblas, cpu-reference"),
                 qPrintable(message));

        auto noThreads = makeCpuBackend("cpu", 0);
        QVERIFY(!noThreads.ok());
        QVERIFY2(QString::fromStdString(noThreads.error().message).contains("at least 1 thread"),
                 noThreads.error().message.c_str());
    }

    void refusesWhatDoesNotFitInMemory() {
        auto backend = makeCpuBackend("cpu", 1);
        QVERIFY(backend.ok());
        const ModelConfig c = *ModelConfig::parse("medium");
        const Status s = (*backend)->canRun(c, 1'000'000, 256);  // petabytes of activations
        QVERIFY(!s.ok());
        QVERIFY2(QString::fromStdString(s.error().message).contains("is available"),
                 s.error().message.c_str());
        QVERIFY((*backend)->canRun(*ModelConfig::parse("tiny"), 8, 64).ok());
    }
};

QTEST_APPLESS_MAIN(TestCpuBackend)
#include "test_cpu_backend.moc"
