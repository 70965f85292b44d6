// Checkpoint files and durable writes: round trips, every kind of corruption refused with a
// message that says what was found and what was expected, and atomic replacement.
#include "checkpoint.hpp"
#include "file_io.hpp"
#include "random.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>
#include <unistd.h>
#include <cstring>
#include <filesystem>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

ModelConfig smallConfig() {
    return *ModelConfig::parse("L=1,NH=2,C=6,T=5");
}

Checkpoint makeCheckpoint(bool moments, int vocabSize = 256) {
    Checkpoint c;
    c.config = smallConfig();
    c.config.vocabSize = vocabSize;
    const int64_t P = c.config.parameterCount();
    Rng rng(42);
    c.parameters.resize(P);
    for (float& x : c.parameters)
        x = rng.normal();
    if (moments) {
        OptimizerState s;
        s.m.resize(P);
        s.v.resize(P);
        for (float& x : s.m)
            x = 0.01f * rng.normal();
        for (float& x : s.v)
            x = rng.uniform();
        s.step = 1234;
        c.optimizer = s;
    }
    return c;
}

// Writes value at offset and refreshes the CRC, so only the intended check can fire.
template <class T>
void patch(std::vector<uint8_t>& bytes, size_t offset, T value) {
    std::memcpy(bytes.data() + offset, &value, sizeof(T));
    const uint32_t crc = crc32(std::span<const uint8_t>(bytes).first(bytes.size() - 4));
    std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
}

QString messageOf(const Expected<Checkpoint>& c) {
    return c.ok() ? QString("(accepted)") : QString::fromStdString(c.error().message);
}

#define EXPECT_REFUSED(result, text)                                                           \
    do {                                                                                       \
        const auto& r_ = (result);                                                             \
        QVERIFY2(!r_.ok(), "accepted a bad checkpoint");                                       \
        QVERIFY2(messageOf(r_).contains(text), qPrintable(messageOf(r_) + " lacks: " + text)); \
    } while (0)

}  // namespace

class TestCheckpoint : public QObject {
    Q_OBJECT
  private slots:
    void crcKnownValues() {
        // Standard check values of the zlib CRC-32.
        const char* digits = "123456789";
        QCOMPARE(crc32({reinterpret_cast<const uint8_t*>(digits), 9}), 0xCBF43926u);
        QCOMPARE(crc32({}), 0u);
        const char* fox = "The quick brown fox jumps over the lazy dog";
        QCOMPARE(crc32({reinterpret_cast<const uint8_t*>(fox), std::strlen(fox)}), 0x414FA339u);
        // Continuing over pieces gives the CRC of the whole (exercises the sliced path).
        const auto* p = reinterpret_cast<const uint8_t*>(fox);
        QCOMPARE(crc32({p + 13, std::strlen(fox) - 13}, crc32({p, 13})), 0x414FA339u);
    }

    void roundTrip_data() {
        QTest::addColumn<bool>("moments");
        QTest::addColumn<int>("V");
        QTest::addColumn<int>("P");  // by hand: Vp*6 + 5*6 + (12*36 + 13*6) + 2*6 = Vp*6 + 552
        QTest::newRow("parameters only") << false << 256 << 256 * 6 + 552;
        QTest::newRow("with moments") << true << 256 << 256 * 6 + 552;
        QTest::newRow("V=300, padded to 320") << true << 300 << 320 * 6 + 552;
    }
    void roundTrip() {
        QFETCH(bool, moments);
        QFETCH(int, V);
        QFETCH(int, P);
        const Checkpoint original = makeCheckpoint(moments, V);
        const std::vector<uint8_t> bytes = serializeCheckpoint(original);
        QCOMPARE(original.parameters.size(), size_t(P));
        QCOMPARE(bytes.size(), 52 + size_t(P) * 4 * (moments ? 3 : 1) + 4);
        int32_t storedV = 0;
        std::memcpy(&storedV, bytes.data() + 32, 4);
        QCOMPARE(storedV, V);
        QCOMPARE(std::memcmp(bytes.data(), "TNDMCKPT", 8), 0);
        auto parsed = parseCheckpoint(bytes);
        QVERIFY2(parsed.ok(), qPrintable(messageOf(parsed)));
        QVERIFY(parsed->config == original.config);
        QVERIFY(parsed->parameters == original.parameters);
        QCOMPARE(parsed->optimizer.has_value(), moments);
        if (moments) {
            QVERIFY(parsed->optimizer->m == original.optimizer->m);
            QVERIFY(parsed->optimizer->v == original.optimizer->v);
            QCOMPARE(parsed->optimizer->step, int64_t{1234});
        }

        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "model.ckpt";
        QVERIFY(saveCheckpoint(path, original).ok());
        QVERIFY(!fs::exists(path.string() + ".tmp"));
        auto loaded = loadCheckpoint(path, original.config);
        QVERIFY2(loaded.ok(), qPrintable(messageOf(loaded)));
        QVERIFY(loaded->parameters == original.parameters);
        QCOMPARE(loaded->optimizer.has_value(), moments);
    }

    void refusesTruncation() {
        const std::vector<uint8_t> bytes = serializeCheckpoint(makeCheckpoint(true));
        const std::string total = std::to_string(bytes.size());
        EXPECT_REFUSED(parseCheckpoint({}), "empty");
        for (size_t size : {size_t{4}, size_t{10}, size_t{30}, size_t{51}}) {
            EXPECT_REFUSED(parseCheckpoint(std::span(bytes).first(size)),
                           QString("truncated at byte %1 of 52 (header)").arg(size));
        }
        for (size_t size :
             {size_t{52}, size_t{53}, bytes.size() / 2, bytes.size() - 5, bytes.size() - 1}) {
            EXPECT_REFUSED(parseCheckpoint(std::span(bytes).first(size)),
                           QString("truncated at byte %1 of %2").arg(size).arg(bytes.size()));
        }
        std::vector<uint8_t> longer = bytes;
        longer.push_back(0);
        EXPECT_REFUSED(parseCheckpoint(longer), "1 unexpected bytes after its end");
    }

    void refusesWrongMagic() {
        std::vector<uint8_t> bytes = serializeCheckpoint(makeCheckpoint(false));
        bytes[0] = 'X';
        EXPECT_REFUSED(parseCheckpoint(bytes), "magic is 'XNDMCKPT', expected 'TNDMCKPT'");
        const std::vector<uint8_t> binary = {0x89, 'P', 'N', 'G', 0, 0, 0, 0, 1, 2, 3};
        EXPECT_REFUSED(parseCheckpoint(binary), "magic is '\\x89PNG\\x00");
    }

    void refusesWrongVersion() {
        std::vector<uint8_t> bytes = serializeCheckpoint(makeCheckpoint(false));
        patch<uint32_t>(bytes, 8, 2);
        EXPECT_REFUSED(parseCheckpoint(bytes), "format version is 2, expected 1");
        patch<uint32_t>(bytes, 8, 0);
        EXPECT_REFUSED(parseCheckpoint(bytes), "format version is 0, expected 1");
    }

    void refusesUnknownFlags() {
        std::vector<uint8_t> bytes = serializeCheckpoint(makeCheckpoint(false));
        patch<uint32_t>(bytes, 12, 6);
        EXPECT_REFUSED(parseCheckpoint(bytes), "flags are 0x00000006");
    }

    // Any single flipped byte in the data or the step, or a flipped bit in the CRC itself.
    void refusesFlippedBytes() {
        const std::vector<uint8_t> good = serializeCheckpoint(makeCheckpoint(true));
        for (size_t offset : {size_t{44}, size_t{52}, size_t{53}, good.size() / 2, good.size() - 5,
                              good.size() - 1}) {
            std::vector<uint8_t> bytes = good;
            bytes[offset] ^= 0x10;
            EXPECT_REFUSED(parseCheckpoint(bytes), "checksum mismatch");
        }
    }

    void refusesNonsenseConfig_data() {
        QTest::addColumn<int>("field");  // 0 L, 1 NH, 2 C, 3 T, 4 V
        QTest::addColumn<int>("value");
        QTest::addColumn<QString>("expected");
        QTest::newRow("zero layers") << 0 << 0 << "layers (L) is 0";
        QTest::newRow("C not divisible by NH") << 1 << 4 << "divisible by heads";
        QTest::newRow("negative C") << 2 << -6 << "channels (C) is -6";
        QTest::newRow("absurd T") << 3 << (1 << 30) << "sequence length (T) is 1073741824";
        QTest::newRow("vocabulary of one") << 4 << 1 << "vocabulary size (V) is 1";
    }
    void refusesNonsenseConfig() {
        QFETCH(int, field);
        QFETCH(int, value);
        QFETCH(QString, expected);
        std::vector<uint8_t> bytes = serializeCheckpoint(makeCheckpoint(false));
        patch<int32_t>(bytes, 16 + 4 * field, value);
        const auto parsed = parseCheckpoint(bytes);
        EXPECT_REFUSED(parsed, "invalid model config");
        EXPECT_REFUSED(parsed, expected);
    }

    void refusesParameterCountAgainstConfig() {
        std::vector<uint8_t> bytes = serializeCheckpoint(makeCheckpoint(false));
        const int64_t P = smallConfig().parameterCount();
        patch<int64_t>(bytes, 36, P - 1);
        EXPECT_REFUSED(parseCheckpoint(bytes),
                       QString("holds %1 parameters, expected %2 for its config L=1 NH=2 C=6 T=5")
                           .arg(P - 1)
                           .arg(P));
        // A valid config that does not match the stored floats: the sizes disagree.
        bytes = serializeCheckpoint(makeCheckpoint(false));
        patch<int32_t>(bytes, 16, 2);  // L=2: more parameters than stored
        EXPECT_REFUSED(parseCheckpoint(bytes), "parameters, expected");
    }

    void refusesConfigMismatchWithExpected() {
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "a.ckpt";
        QVERIFY(saveCheckpoint(path, makeCheckpoint(false)).ok());
        const ModelConfig tiny = *ModelConfig::parse("tiny");
        EXPECT_REFUSED(loadCheckpoint(path, tiny),
                       "is for model L=1 NH=2 C=6 T=5 V=256, expected L=2 NH=4 C=128 T=64 V=256");
        QVERIFY(loadCheckpoint(path, smallConfig()).ok());
    }

    void loadErrorsNameThePath() {
        QTemporaryDir dir;
        const fs::path missing = fs::path(dir.path().toStdString()) / "missing.ckpt";
        EXPECT_REFUSED(loadCheckpoint(missing), QString::fromStdString(missing.string()));
        EXPECT_REFUSED(loadCheckpoint(missing), "No such file or directory");
        const fs::path bad = fs::path(dir.path().toStdString()) / "bad.ckpt";
        const std::vector<uint8_t> junk = {'h', 'e', 'l', 'l', 'o', '!', '!', '!', 0};
        QVERIFY(writeFileAtomically(bad, junk).ok());
        EXPECT_REFUSED(loadCheckpoint(bad), QString("checkpoint '%1': not a Tandem checkpoint")
                                                .arg(QString::fromStdString(bad.string())));
        EXPECT_REFUSED(loadCheckpoint(fs::path(dir.path().toStdString())), "Is a directory");
    }

    void saveRefusesWrongParameterCount() {
        QTemporaryDir dir;
        Checkpoint c = makeCheckpoint(false);
        c.parameters.pop_back();
        const Status s = saveCheckpoint(fs::path(dir.path().toStdString()) / "x.ckpt", c);
        QVERIFY(!s.ok());
        QVERIFY2(QString::fromStdString(s.error().message).contains("parameters, expected"),
                 s.error().message.c_str());
        Checkpoint withMoments = makeCheckpoint(true);
        withMoments.optimizer->v.pop_back();
        const Status m = saveCheckpoint(fs::path(dir.path().toStdString()) / "y.ckpt", withMoments);
        QVERIFY(!m.ok());
        QVERIFY2(QString::fromStdString(m.error().message).contains("AdamW moments hold"),
                 m.error().message.c_str());
    }

    void atomicWriteReplacesAndLeavesNoTemporary() {
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "file.bin";
        const std::vector<uint8_t> first = {1, 2, 3}, second = {4, 5, 6, 7};
        QVERIFY(writeFileAtomically(path, first).ok());
        QVERIFY(writeFileAtomically(path, second).ok());
        QCOMPARE(*readFile(path), second);
        QCOMPARE(std::distance(fs::directory_iterator(path.parent_path()), {}), 1);
        // A file name without a directory part is written in the working directory.
        const fs::path cwd = fs::current_path();
        fs::current_path(path.parent_path());
        QVERIFY(writeFileAtomically("relative.bin", first).ok());
        fs::current_path(cwd);
        QCOMPARE(*readFile(path.parent_path() / "relative.bin"), first);
    }

    void failedWriteKeepsOldFile() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        // The parent directory does not exist: a clear error naming the temporary file.
        const fs::path nowhere = root / "no-such-dir" / "file.bin";
        Status s = writeFileAtomically(nowhere, std::vector<uint8_t>{1});
        QVERIFY(!s.ok());
        QVERIFY2(QString::fromStdString(s.error().message)
                     .contains(QString::fromStdString(nowhere.string() + ".tmp")),
                 s.error().message.c_str());
        QVERIFY2(QString::fromStdString(s.error().message).contains("No such file or directory"),
                 s.error().message.c_str());

        // The temporary file cannot be created (a directory is in its place; this fails even
        // for root): the old file stays as it was.
        const fs::path locked = root / "locked";
        fs::create_directory(locked);
        const fs::path path = locked / "model.ckpt";
        const std::vector<uint8_t> old = serializeCheckpoint(makeCheckpoint(false));
        QVERIFY(writeFileAtomically(path, old).ok());
        fs::create_directory(path.string() + ".tmp");
        s = saveCheckpoint(path, makeCheckpoint(true));
        QVERIFY(!s.ok());
        QVERIFY2(QString::fromStdString(s.error().message).contains("Is a directory"),
                 s.error().message.c_str());
        QCOMPARE(*readFile(path), old);
        fs::remove(path.string() + ".tmp");
        QCOMPARE(*readFile(path), old);
    }

    void unwritableDirectoryKeepsOldFile() {
        QTemporaryDir dir;
        const fs::path locked = fs::path(dir.path().toStdString()) / "locked";
        fs::create_directory(locked);
        const fs::path path = locked / "model.ckpt";
        const std::vector<uint8_t> old = serializeCheckpoint(makeCheckpoint(false));
        QVERIFY(writeFileAtomically(path, old).ok());
        ::chmod(locked.c_str(), 0555);
        if (::access(locked.c_str(), W_OK) == 0) {
            ::chmod(locked.c_str(), 0755);
            QSKIP("running with privileges that ignore directory permissions (root)");
        }
        const Status s = saveCheckpoint(path, makeCheckpoint(true));
        ::chmod(locked.c_str(), 0755);
        QVERIFY(!s.ok());
        QVERIFY2(QString::fromStdString(s.error().message).contains("Permission denied"),
                 s.error().message.c_str());
        QCOMPARE(*readFile(path), old);
        QVERIFY(!fs::exists(path.string() + ".tmp"));
    }

    // A rename that cannot happen (the target is a non-empty directory): old content stays,
    // the temporary file is removed.
    void failedRenameRemovesTemporary() {
        QTemporaryDir dir;
        const fs::path target = fs::path(dir.path().toStdString()) / "occupied";
        fs::create_directories(target / "inside");
        const Status s = writeFileAtomically(target, std::vector<uint8_t>{1, 2});
        QVERIFY(!s.ok());
        QVERIFY2(QString::fromStdString(s.error().message).contains("cannot rename"),
                 s.error().message.c_str());
        QVERIFY(fs::is_directory(target / "inside"));
        QVERIFY(!fs::exists(target.string() + ".tmp"));
    }
};

QTEST_APPLESS_MAIN(TestCheckpoint)
#include "test_checkpoint.moc"
