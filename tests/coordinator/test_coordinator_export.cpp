// Export and import at the coordinator: a run started with --init from an export (both
// formats) has bit-identical weights, its own export is byte-identical, a file of another model
// stops the run's creation before anything is written, and the latest export appears in the
// status (and survives its JSON round trip).
#include "coordinator.hpp"
#include "harness.hpp"
#include "run_export.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace tandem;
using namespace tandem::coord;
namespace fs = std::filesystem;

namespace {

CoordinatorConfig baseConfig(const fs::path& root, const std::string& name) {
    CoordinatorConfig cfg;
    cfg.stateDir = root / name;
    cfg.corpus = {root / "corpus.txt"};
    cfg.model = "L=2,NH=2,C=16,T=16";
    cfg.backgroundThreads = false;
    cfg.seed = 7;
    return cfg;
}

std::vector<uint8_t> bytesOf(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

bool contains(const std::string& text, const std::string& part) {
    if (text.find(part) != std::string::npos)
        return true;
    qWarning("'%s' lacks '%s'", text.c_str(), part.c_str());
    return false;
}

}  // namespace

class TestCoordinatorExport : public QObject {
    Q_OBJECT

  private slots:
    void init() {
        m_dir = std::make_unique<QTemporaryDir>();
        m_root = m_dir->path().toStdString();
        testing::writeCorpus(m_root / "corpus.txt", 50000);
    }

    void exportThenInitIsBitExact_data() {
        QTest::addColumn<QString>("format");
        QTest::newRow("safetensors") << "safetensors";
        QTest::newRow("llmc") << "llmc";
    }

    void exportThenInitIsBitExact() {
        QFETCH(QString, format);
        const ModelFormat f = *parseModelFormat(format.toStdString());
        const char* file = f == ModelFormat::Safetensors ? kSafetensorsFileName : kLlmcFileName;
        auto a = Coordinator::open(baseConfig(m_root, "a"), nullptr);
        QVERIFY2(a, a ? "" : a.error().message.c_str());
        const auto weights = (*a)->weights();
        QVERIFY(!(*a)->status().latestExport);
        // While the coordinator holds the state directory.
        ExportRequest r{m_root / "a", (*a)->runId(), std::nullopt, f, m_root / "exported", {}};
        auto record = exportRun(r);
        QVERIFY2(record, record ? "" : record.error().message.c_str());
        QCOMPARE(record->version, int64_t{0});
        QCOMPARE(fs::path(record->path), fs::absolute(m_root / "exported"));
        const auto status = (*a)->status();
        QVERIFY(status.latestExport);
        QCOMPARE(status.latestExport->path, record->path);
        QCOMPARE(status.latestExport->format, format.toStdString());
        auto parsed = net::RunStatus::fromJson(status.toJson());
        QVERIFY(parsed && parsed->latestExport == status.latestExport);

        CoordinatorConfig cfgB = baseConfig(m_root, "b");
        cfgB.seed = 8;  // a random start would differ
        cfgB.initWeights = m_root / "exported";
        auto b = Coordinator::open(cfgB, nullptr);
        QVERIFY2(b, b ? "" : b.error().message.c_str());
        QVERIFY((*b)->weights() == weights);
        r.stateDir = m_root / "b";
        r.out = m_root / "again";
        QVERIFY(exportRun(r));
        QCOMPARE(bytesOf(m_root / "again" / file), bytesOf(m_root / "exported" / file));
    }

    void initOfAnotherModelMakesNoRun() {
        auto a = Coordinator::open(baseConfig(m_root, "a"), nullptr);
        QVERIFY(a);
        QVERIFY(exportRun(
            {m_root / "a", 1, std::nullopt, ModelFormat::Safetensors, m_root / "exported", {}}));
        CoordinatorConfig cfg = baseConfig(m_root, "b");
        cfg.model = "L=2,NH=2,C=32,T=16";
        cfg.initWeights = m_root / "exported";
        auto b = Coordinator::open(cfg, nullptr);
        QVERIFY(!b);
        QVERIFY(
            contains(b.error().message,
                     "tensor wte.weight has shape (256, 16), the run's model expects (256, 32)"));
        QVERIFY(fs::is_empty(m_root / "b" / "weights"));
        QVERIFY(fs::is_empty(m_root / "b" / "data"));
        auto run = readStoredRun(m_root / "b");
        QVERIFY(!run);
        QVERIFY(contains(run.error().message, "holds no run"));
    }

    void exportErrors() {
        auto a = Coordinator::open(baseConfig(m_root, "a"), nullptr);
        QVERIFY(a);
        auto version = exportRun({m_root / "a", 1, 3, ModelFormat::Llmc, m_root / "x", {}});
        QVERIFY(!version);
        QVERIFY(contains(version.error().message,
                         "version 3 of run 1 is not kept (versions on disk: 0)"));
        auto run = exportRun({m_root / "a", 2, std::nullopt, ModelFormat::Llmc, m_root / "x", {}});
        QVERIFY(contains(run.error().message, "run 2 does not exist"));
        auto none =
            exportRun({m_root / "nothing", 1, std::nullopt, ModelFormat::Llmc, m_root / "x", {}});
        QVERIFY(contains(none.error().message, "holds no coordinator database"));
        QVERIFY(!fs::exists(m_root / "x"));
        QVERIFY(!readLatestExport(m_root / "a"));
    }

  private:
    std::unique_ptr<QTemporaryDir> m_dir;
    fs::path m_root;
};

QTEST_GUILESS_MAIN(TestCoordinatorExport)
#include "test_coordinator_export.moc"
