// The text corpus loader and the batch sampler.
#include "corpus.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

void writeText(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

std::string asString(const std::vector<uint8_t>& bytes) {
    return {bytes.begin(), bytes.end()};
}

QString messageOf(const Expected<std::vector<uint8_t>>& r) {
    return r.ok() ? QString("(accepted)") : QString::fromStdString(r.error().message);
}

}  // namespace

class TestCorpus : public QObject {
    Q_OBJECT
  private slots:
    void loadsDirectorySortedSkippingDatAndLinks() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        // Written out of order; read back in path order.
        writeText(root / "b", "BBB\n");
        writeText(root / "sub" / "c", "CCC\n");
        writeText(root / "a", "AAA\n");
        writeText(root / "a.dat", "binary index");
        fs::create_symlink(root / "a", root / "a.u8");
        fs::create_directory_symlink(root / "sub", root / "linked-dir");
        const std::vector<fs::path> paths = {root};
        auto corpus = loadTextCorpus(paths);
        QVERIFY2(corpus.ok(), qPrintable(messageOf(corpus)));
        QCOMPARE(asString(*corpus), std::string("AAA\nBBB\nCCC\n"));
    }

    void explicitFilesInGivenOrder() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        writeText(root / "one", "1");
        writeText(root / "two", "22");
        const std::vector<fs::path> paths = {root / "two", root / "one"};
        auto corpus = loadTextCorpus(paths);
        QVERIFY(corpus.ok());
        QCOMPARE(asString(*corpus), std::string("221"));
    }

    void errors() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const std::vector<fs::path> missing = {root / "nope"};
        auto r = loadTextCorpus(missing);
        QVERIFY(!r.ok());
        QVERIFY2(messageOf(r).contains("'" + QString::fromStdString((root / "nope").string()) +
                                       "' does not exist"),
                 qPrintable(messageOf(r)));

        const std::vector<fs::path> emptyDir = {root};
        r = loadTextCorpus(emptyDir);
        QVERIFY(!r.ok());
        QVERIFY2(messageOf(r).contains("corpus is empty"), qPrintable(messageOf(r)));

        writeText(root / "only.dat", "index");
        writeText(root / "empty", "");
        r = loadTextCorpus(emptyDir);
        QVERIFY(!r.ok());
        QVERIFY2(messageOf(r).contains("expected at least one non-empty text file"),
                 qPrintable(messageOf(r)));

        r = loadTextCorpus({});
        QVERIFY(!r.ok());
        QVERIFY2(messageOf(r).contains("no paths given"), qPrintable(messageOf(r)));
    }

    void loadsFortunes() {
        const fs::path fortunes = "/usr/share/games/fortunes";
        if (!fs::is_directory(fortunes))
            QSKIP("Debian's fortunes package is not installed");
        // Oracle: the sizes of the regular, non-.dat files.
        uintmax_t expected = 0;
        for (const auto& entry : fs::recursive_directory_iterator(fortunes)) {
            if (entry.is_symlink() || !entry.is_regular_file())
                continue;
            if (entry.path().extension() == ".dat")
                continue;
            expected += entry.file_size();
        }
        const std::vector<fs::path> paths = {fortunes};
        auto corpus = loadTextCorpus(paths);
        QVERIFY2(corpus.ok(), qPrintable(messageOf(corpus)));
        QCOMPARE(static_cast<uintmax_t>(corpus->size()), expected);
        QVERIFY(corpus->size() > 1000000);
        QVERIFY(asString(*corpus).find("%\n") != std::string::npos);  // fortune separators
    }

    void samplerTargetsAreInputsShiftedByOne() {
        // Every byte value is distinct within a window, so a window pins its offset.
        std::vector<uint8_t> tokens(1000);
        for (size_t i = 0; i < tokens.size(); ++i)
            tokens[i] = static_cast<uint8_t>(i * 7 % 256);
        BatchSampler sampler(tokens, 5);
        const int B = 4, T = 16;
        std::vector<int32_t> inputs(B * T), targets(B * T);
        for (int round = 0; round < 50; ++round) {
            sampler.next(B, T, inputs, targets);
            for (int b = 0; b < B; ++b) {
                const int32_t* in = inputs.data() + b * T;
                const int32_t* out = targets.data() + b * T;
                // Find the window in the corpus and check both against it.
                auto it = std::search(tokens.begin(), tokens.end(), in, in + T,
                                      [](uint8_t a, int32_t v) { return a == v; });
                QVERIFY(it != tokens.end());
                const size_t offset = static_cast<size_t>(it - tokens.begin());
                QVERIFY(offset + T < tokens.size());
                for (int t = 0; t < T; ++t)
                    QCOMPARE(out[t], int32_t{tokens[offset + t + 1]});
            }
        }
    }

    void samplerCoversEveryWindowStart() {
        // T + 2 tokens: exactly two starts, 0 and 1; both must come up, nothing beyond.
        const std::vector<uint8_t> tokens = {10, 11, 12, 13, 14};
        BatchSampler sampler(tokens, 1);
        const int T = 3;
        std::vector<int32_t> in(T), out(T);
        bool seen[2] = {false, false};
        for (int i = 0; i < 100; ++i) {
            sampler.next(1, T, in, out);
            QVERIFY(in[0] == 10 || in[0] == 11);
            seen[in[0] - 10] = true;
            QCOMPARE(out[T - 1], in[0] + T);
        }
        QVERIFY(seen[0] && seen[1]);
    }

    void samplerIsDeterministicAndResumable() {
        std::vector<uint8_t> tokens(5000);
        for (size_t i = 0; i < tokens.size(); ++i)
            tokens[i] = static_cast<uint8_t>(i * 131 % 251);
        const int B = 3, T = 8;
        auto draw = [&](BatchSampler& s) {
            std::vector<int32_t> in(B * T), out(B * T);
            s.next(B, T, in, out);
            return in;
        };
        BatchSampler a(tokens, 99), b(tokens, 99), c(tokens, 100);
        const auto first = draw(a);
        QCOMPARE(draw(b), first);
        QVERIFY(draw(c) != first);
        // Saving the state and restoring it into a fresh sampler continues the same sequence.
        const uint64_t saved = a.state();
        const auto second = draw(a);
        const auto third = draw(a);
        BatchSampler resumed(tokens, 12345);
        resumed.setState(saved);
        QCOMPARE(draw(resumed), second);
        QCOMPARE(draw(resumed), third);
    }
};

QTEST_APPLESS_MAIN(TestCorpus)
#include "test_corpus.moc"
