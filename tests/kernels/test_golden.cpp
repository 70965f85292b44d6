// Our GPT + AdamW against an independent implementation: the loss, every parameter gradient and
// the parameters after three AdamW steps that tests/golden/make_golden.py computed with PyTorch
// in float64 (see tests/golden/README.md), for every CPU backend.
//
// Errors are normalized per tensor: max |ours - expected| / max |expected|, the worst tensor
// counts. Parameters after a step are compared as updates (params k - params 0), which is what
// the optimizer computes; comparing the parameters themselves would hide small update errors
// behind the size of the weights.
//
// Dimensions: B batch, T sequence, P parameter count.
#include "backend.hpp"
#include "model.hpp"
#include "optimizer.hpp"

#include <QtTest>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace tandem;

namespace {

// Measured (RelWithDebInfo, x86-64): float32 rounding moves our results from the float64
// reference by at most: loss 6e-8, gradient norm 1e-7, gradients 1e-6, updates 1e-4 (AdamW
// divides by sqrt(v), which magnifies rounding where a gradient is near zero). Deliberate
// mistakes move them far more: GELU in its erf form loss 3e-6, gradient norm 3e-5, gradients
// 7e-4; heads interleaved or q and k swapped loss 4e-3 and more; weight decay on 1-D tensors
// updates 1.4e-1; no clipping 7e-2; no bias correction 5e-1 (see tests/golden/README.md).
constexpr double kLossTolerance = 1e-6;      // relative
constexpr double kGradNormTolerance = 1e-5;  // relative
constexpr double kGradTolerance = 2e-5;      // normalized, per tensor
constexpr double kUpdateTolerance = 2e-3;    // normalized, per tensor

QString dataDir() {
    return QStringLiteral(TANDEM_SOURCE_DIR "/tests/golden/data/");
}

struct Exclusion {
    std::string tensor;
    int64_t begin = 0, end = 0;  // element range inside the tensor
};

struct Golden {
    ModelConfig config;
    int B = 0, T = 0;
    std::vector<int32_t> inputs, targets;  // (B,T)
    AdamWConfig adamw;
    std::vector<float> lrs;
    std::vector<double> losses, gradNorms;  // per step, before the update
    double finalLoss = 0;
    float noclipNorm = 0;
    std::vector<double> noclipGradNorms;
    std::vector<std::pair<std::string, std::vector<int>>> tensors;  // name, shape
    std::vector<Exclusion> updateExclusions;
    std::vector<float> params0, grads0, noclipParams;  // (P)
    std::vector<std::vector<float>> params;            // per step (P)
};

QString readFloats(const QString& name, std::vector<float>& out) {
    QFile file(dataDir() + name);
    if (!file.open(QIODevice::ReadOnly))
        return "cannot open " + file.fileName();
    const QByteArray bytes = file.readAll();
    if (bytes.size() % 4 != 0)
        return file.fileName() + ": size is not a multiple of 4";
    out.resize(static_cast<size_t>(bytes.size() / 4));
    // The files are little-endian float32, as is every machine this builds for.
    static_assert(std::endian::native == std::endian::little);
    std::memcpy(out.data(), bytes.data(), static_cast<size_t>(bytes.size()));
    return {};
}

template <class T>
std::vector<T> toVector(const QJsonValue& value) {
    std::vector<T> out;
    for (const QJsonValue& v : value.toArray())
        out.push_back(static_cast<T>(v.toDouble()));
    return out;
}

// Empty string on success, else what went wrong.
QString loadGolden(Golden& g) {
    QFile file(dataDir() + "meta.json");
    if (!file.open(QIODevice::ReadOnly))
        return "cannot open " + file.fileName();
    QJsonParseError parseError;
    const QJsonObject meta = QJsonDocument::fromJson(file.readAll(), &parseError).object();
    if (parseError.error != QJsonParseError::NoError)
        return "meta.json: " + parseError.errorString();

    const QJsonObject c = meta["config"].toObject();
    g.config.layers = c["layers"].toInt();
    g.config.heads = c["heads"].toInt();
    g.config.channels = c["channels"].toInt();
    g.config.maxSeqLen = c["maxSeqLen"].toInt();
    g.config.vocabSize = c["vocabSize"].toInt();
    g.B = meta["batch"].toInt();
    g.T = meta["seq"].toInt();
    g.inputs = toVector<int32_t>(meta["inputs"]);
    g.targets = toVector<int32_t>(meta["targets"]);
    const QJsonObject a = meta["adamw"].toObject();
    g.adamw.beta1 = static_cast<float>(a["beta1"].toDouble());
    g.adamw.beta2 = static_cast<float>(a["beta2"].toDouble());
    g.adamw.eps = static_cast<float>(a["eps"].toDouble());
    g.adamw.weightDecay = static_cast<float>(a["weightDecay"].toDouble());
    g.adamw.clipNorm = static_cast<float>(a["clipNorm"].toDouble());
    g.lrs = toVector<float>(meta["lrs"]);
    g.losses = toVector<double>(meta["losses"]);
    g.gradNorms = toVector<double>(meta["gradNorms"]);
    g.finalLoss = meta["finalLoss"].toDouble();
    g.noclipNorm = static_cast<float>(meta["noclipNorm"].toDouble());
    g.noclipGradNorms = toVector<double>(meta["noclipGradNorms"]);
    for (const QJsonValue& t : meta["tensors"].toArray()) {
        g.tensors.emplace_back(t["name"].toString().toStdString(), toVector<int>(t["shape"]));
    }
    for (const QJsonValue& e : meta["updateExclusions"].toArray()) {
        g.updateExclusions.push_back(
            {e["tensor"].toString().toStdString(), e["begin"].toInteger(), e["end"].toInteger()});
    }

    const QJsonObject files = meta["files"].toObject();
    QString error = readFloats(files["params0"].toString(), g.params0);
    if (error.isEmpty())
        error = readFloats(files["grads0"].toString(), g.grads0);
    if (error.isEmpty())
        error = readFloats(files["noclipParams"].toString(), g.noclipParams);
    for (const QJsonValue& name : files["params"].toArray()) {
        if (!error.isEmpty())
            break;
        g.params.emplace_back();
        error = readFloats(name.toString(), g.params.back());
    }
    if (!error.isEmpty())
        return error;

    const size_t n = static_cast<size_t>(g.B) * static_cast<size_t>(g.T);
    const size_t P = static_cast<size_t>(g.config.parameterCount());
    const size_t steps = g.lrs.size();
    if (g.inputs.size() != n || g.targets.size() != n)
        return "meta.json: token count is not B*T";
    if (g.losses.size() != steps || g.gradNorms.size() != steps || g.params.size() != steps ||
        g.noclipGradNorms.size() != steps) {
        return "meta.json: per-step lists differ in length";
    }
    for (const auto* v : {&g.params0, &g.grads0, &g.noclipParams}) {
        if (v->size() != P)
            return QString("a data file holds %1 floats, expected %2").arg(v->size()).arg(P);
    }
    for (const auto& v : g.params) {
        if (v.size() != P)
            return QString("a data file holds %1 floats, expected %2").arg(v.size()).arg(P);
    }
    return {};
}

const Golden& golden() {
    static Golden g;
    static QString error = loadGolden(g);
    if (!error.isEmpty())
        qFatal("golden data: %s", qPrintable(error));
    return g;
}

// The worst per-tensor normalized error of ours against expected, both (P); with base (P), the
// updates (x - base) are compared. Elements in exclusions are skipped.
struct Worst {
    double error = 0;
    std::string tensor;
};

Worst compareTensors(const ParameterLayout& layout, const std::vector<float>& ours,
                     const std::vector<float>& expected, const std::vector<float>* base = nullptr,
                     const std::vector<Exclusion>& exclusions = {}) {
    Worst worst;
    for (const TensorInfo& t : layout.tensors()) {
        double maxDiff = 0, maxRef = 0;
        for (int64_t i = 0; i < t.size; ++i) {
            const bool excluded = std::any_of(
                exclusions.begin(), exclusions.end(),
                [&](const auto& e) { return e.tensor == t.name && i >= e.begin && i < e.end; });
            if (excluded)
                continue;
            const size_t k = static_cast<size_t>(t.offset + i);
            const double b = base ? (*base)[k] : 0.0;
            const double x = ours[k] - b, r = expected[k] - b;
            maxDiff = std::max(maxDiff, std::abs(x - r));
            maxRef = std::max(maxRef, std::abs(r));
        }
        // A tensor whose expected values are all zero must come out zero.
        const double error = maxRef > 0 ? maxDiff / maxRef : maxDiff;
        if (!(error <= worst.error))
            worst = {std::isfinite(error) ? error : INFINITY, t.name};
    }
    return worst;
}

double relative(double ours, double expected) {
    return std::abs(ours - expected) / std::abs(expected);
}

std::unique_ptr<Backend> makeAllocated(const QString& name, int threads, const Golden& g) {
    auto backend = makeCpuBackend(name.toStdString(), threads);
    if (!backend)
        qFatal("%s", backend.error().message.c_str());
    std::unique_ptr<Backend> b = std::move(*backend);
    if (auto s = b->allocate(g.config, g.B, g.T); !s)
        qFatal("%s", s.error().message.c_str());
    if (auto s = b->loadParameters(g.params0); !s)
        qFatal("%s", s.error().message.c_str());
    return b;
}

}  // namespace

class TestGolden : public QObject {
    Q_OBJECT
  private slots:
    // The files describe our parameter table exactly, so offsets mean the same on both sides.
    void tableMatchesLayout() {
        const Golden& g = golden();
        QVERIFY2(g.config.validate().ok(), g.config.describe().c_str());
        const ParameterLayout layout(g.config);
        QCOMPARE(layout.tensors().size(), g.tensors.size());
        for (size_t i = 0; i < g.tensors.size(); ++i) {
            QCOMPARE(layout.tensors()[i].name, g.tensors[i].first);
            QCOMPARE(layout.tensors()[i].shape, g.tensors[i].second);
        }
        for (const Exclusion& e : g.updateExclusions) {
            const TensorInfo* t = layout.find(e.tensor);
            QVERIFY2(t && e.begin >= 0 && e.begin < e.end && e.end <= t->size, e.tensor.c_str());
        }
    }

    // The golden values were made with our default AdamW settings; if the defaults change, the
    // values must be regenerated.
    void madeWithOurDefaults() {
        const Golden& g = golden();
        const AdamWConfig defaults;
        QCOMPARE(g.adamw.beta1, defaults.beta1);
        QCOMPARE(g.adamw.beta2, defaults.beta2);
        QCOMPARE(g.adamw.eps, defaults.eps);
        QCOMPARE(g.adamw.weightDecay, defaults.weightDecay);
        QCOMPARE(g.adamw.clipNorm, defaults.clipNorm);
    }

    void lossAndGradients_data() { backendRows(); }
    void lossAndGradients() {
        QFETCH(QString, backend);
        QFETCH(int, threads);
        const Golden& g = golden();
        const ParameterLayout layout(g.config);
        auto b = makeAllocated(backend, threads, g);

        auto loss = b->forward(g.inputs, g.targets, g.B, g.T);
        QVERIFY2(loss.ok(), loss.ok() ? "" : loss.error().message.c_str());
        QVERIFY(b->backward().ok());
        std::vector<float> grads(static_cast<size_t>(layout.parameterCount()));
        QVERIFY(b->storeGradients(grads).ok());

        const double lossError = relative(*loss, g.losses[0]);
        const Worst grad = compareTensors(layout, grads, g.grads0);
        qDebug(
            "%s: loss %.9f (expected %.9f, relative error %.1e); gradients: worst normalized "
            "error %.1e in %s",
            qPrintable(backend), static_cast<double>(*loss), g.losses[0], lossError, grad.error,
            grad.tensor.c_str());
        QVERIFY2(lossError < kLossTolerance, "loss differs from PyTorch");
        QVERIFY2(grad.error < kGradTolerance, ("gradient of " + grad.tensor + " differs").c_str());
    }

    // Three AdamW steps on the same batch, clipping in each (gradient norms 1.7 to 3.9).
    void threeSteps_data() { backendRows(); }
    void threeSteps() {
        QFETCH(QString, backend);
        QFETCH(int, threads);
        const Golden& g = golden();
        const ParameterLayout layout(g.config);
        auto b = makeAllocated(backend, threads, g);
        std::vector<float> params(static_cast<size_t>(layout.parameterCount()));

        for (size_t k = 0; k < g.lrs.size(); ++k) {
            auto loss = b->forward(g.inputs, g.targets, g.B, g.T);
            QVERIFY(loss.ok());
            QVERIFY(b->backward().ok());
            auto stats = b->adamwStep(g.adamw, g.lrs[k]);
            QVERIFY2(stats.ok(), stats.ok() ? "" : stats.error().message.c_str());
            QVERIFY(b->storeParameters(params).ok());

            const double lossError = relative(*loss, g.losses[k]);
            const double normError = relative(stats->gradNorm, g.gradNorms[k]);
            const Worst update =
                compareTensors(layout, params, g.params[k], &g.params0, g.updateExclusions);
            qDebug(
                "%s step %zu (lr %g): loss error %.1e, gradient norm %.6f (error %.1e), "
                "update: worst normalized error %.1e in %s",
                qPrintable(backend), k + 1, static_cast<double>(g.lrs[k]), lossError,
                static_cast<double>(stats->gradNorm), normError, update.error,
                update.tensor.c_str());
            QVERIFY2(lossError < kLossTolerance, "loss differs from PyTorch");
            QVERIFY2(normError < kGradNormTolerance, "gradient norm differs from PyTorch");
            QVERIFY2(update.error < kUpdateTolerance,
                     ("update of " + update.tensor + " differs").c_str());
        }
        auto finalLoss = b->forward(g.inputs, g.targets, g.B, g.T);
        QVERIFY(finalLoss.ok());
        const double finalError = relative(*finalLoss, g.finalLoss);
        qDebug("%s: loss after the steps %.9f (expected %.9f, relative error %.1e)",
               qPrintable(backend), static_cast<double>(*finalLoss), g.finalLoss, finalError);
        QVERIFY2(finalError < kLossTolerance, "loss after the steps differs from PyTorch");
    }

    // The same three steps with a clipping threshold no gradient reaches.
    void unclipped_data() { backendRows(); }
    void unclipped() {
        QFETCH(QString, backend);
        QFETCH(int, threads);
        const Golden& g = golden();
        const ParameterLayout layout(g.config);
        auto b = makeAllocated(backend, threads, g);
        AdamWConfig config = g.adamw;
        config.clipNorm = g.noclipNorm;
        double normError = 0;
        for (size_t k = 0; k < g.lrs.size(); ++k) {
            QVERIFY(b->forward(g.inputs, g.targets, g.B, g.T).ok());
            QVERIFY(b->backward().ok());
            auto stats = b->adamwStep(config, g.lrs[k]);
            QVERIFY(stats.ok());
            normError = std::max(normError, relative(stats->gradNorm, g.noclipGradNorms[k]));
        }
        std::vector<float> params(static_cast<size_t>(layout.parameterCount()));
        QVERIFY(b->storeParameters(params).ok());
        const Worst update =
            compareTensors(layout, params, g.noclipParams, &g.params0, g.updateExclusions);
        qDebug(
            "%s unclipped, %zu steps: worst gradient norm error %.1e, worst normalized update "
            "error %.1e in %s",
            qPrintable(backend), g.lrs.size(), normError, update.error, update.tensor.c_str());
        QVERIFY2(normError < kGradNormTolerance, "gradient norm differs from PyTorch");
        QVERIFY2(update.error < kUpdateTolerance,
                 ("update of " + update.tensor + " differs").c_str());
    }

  private:
    void backendRows() {
        QTest::addColumn<QString>("backend");
        QTest::addColumn<int>("threads");
        QTest::newRow("cpu-reference") << QStringLiteral("cpu-reference") << 1;
        QTest::newRow("cpu") << QStringLiteral("cpu") << 2;
    }
};

QTEST_APPLESS_MAIN(TestGolden)
#include "test_golden.moc"
