// The atomic file writers: content and modes, and every failure path leaves the old file as it
// was and no temporary behind.
#include "file_io.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> bytesOf(const std::string& text) {
    return {text.begin(), text.end()};
}

unsigned modeOf(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return 0;
    return st.st_mode & 0777;
}

std::vector<std::string> namesIn(const fs::path& directory) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(directory))
        names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

bool contains(const Status& s, const std::string& part) {
    return !s.ok() && s.error().message.find(part) != std::string::npos;
}

// Running as root ignores directory permissions; those checks are skipped then.
bool permissionsApply(const fs::path& directory) {
    return ::access(directory.c_str(), W_OK) != 0 || ::access(directory.c_str(), R_OK) != 0;
}

}  // namespace

class TestFileIo : public QObject {
    Q_OBJECT
  private slots:
    void writesReplacesAndReadsBack() {
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "a.bin";
        QVERIFY(writeFileAtomically(path, bytesOf("first")).ok());
        QVERIFY(writeFileAtomically(path, bytesOf("second")).ok());
        QCOMPARE(*readFile(path), bytesOf("second"));
        QCOMPARE(namesIn(dir.path().toStdString()), std::vector<std::string>{"a.bin"});
    }

    void privateFileIsOwnerOnlyEvenOverAWiderOne() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const fs::path key = root / "key.pem";
        std::ofstream(key) << "old";
        ::chmod(key.c_str(), 0644);
        // A stale temporary with a wide mode is not reused as it is.
        std::ofstream(key.string() + ".tmp") << "stale";
        ::chmod((key.string() + ".tmp").c_str(), 0666);
        const mode_t oldMask = ::umask(0);
        const Status s = writePrivateFileAtomically(key, bytesOf("secret"));
        ::umask(oldMask);
        QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
        QCOMPARE(modeOf(key), 0600u);
        QCOMPARE(*readFile(key), bytesOf("secret"));
        QCOMPARE(namesIn(root), std::vector<std::string>{"key.pem"});
    }

    void missingDirectoryFailsWithoutLeavingAnything() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const fs::path path = root / "no-such-dir" / "file.bin";
        for (bool secret : {false, true}) {
            const Status s = secret ? writePrivateFileAtomically(path, bytesOf("x"))
                                    : writeFileAtomically(path, bytesOf("x"));
            QVERIFY2(contains(s, "cannot create '" + path.string() + ".tmp'"),
                     s.ok() ? "ok" : s.error().message.c_str());
            QVERIFY(contains(s, "No such file or directory"));
            QVERIFY(namesIn(root).empty());
        }
    }

    void parentThatIsAFileFailsWithoutLeavingAnything() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        std::ofstream(root / "plain") << "not a directory";
        const fs::path path = root / "plain" / "file.bin";
        for (bool secret : {false, true}) {
            const Status s = secret ? writePrivateFileAtomically(path, bytesOf("x"))
                                    : writeFileAtomically(path, bytesOf("x"));
            QVERIFY2(contains(s, "Not a directory"), s.ok() ? "ok" : s.error().message.c_str());
            QCOMPARE(namesIn(root), std::vector<std::string>{"plain"});
        }
    }

    // The target is a non-empty directory: the rename fails after the temporary was written.
    void failedRenameRemovesTheTemporary() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const fs::path target = root / "occupied";
        fs::create_directories(target / "inside");
        for (bool secret : {false, true}) {
            const Status s = secret ? writePrivateFileAtomically(target, bytesOf("x"))
                                    : writeFileAtomically(target, bytesOf("x"));
            QVERIFY2(contains(s, "cannot rename"), s.ok() ? "ok" : s.error().message.c_str());
            QCOMPARE(namesIn(root), std::vector<std::string>{"occupied"});
            QVERIFY(fs::is_directory(target / "inside"));
        }
    }

    // A write that fails half way (the file size limit, which binds root too): the old content
    // stays and the partial temporary is removed.
    void failedWriteRemovesTheTemporary() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const fs::path path = root / "data.bin";
        QVERIFY(writeFileAtomically(path, bytesOf("old")).ok());
        rlimit saved{};
        QCOMPARE(::getrlimit(RLIMIT_FSIZE, &saved), 0);
        rlimit small = saved;
        small.rlim_cur = 4096;
        const auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
        QCOMPARE(::setrlimit(RLIMIT_FSIZE, &small), 0);
        const std::vector<uint8_t> big(100000, 7);
        const Status plain = writeFileAtomically(path, big);
        const Status secret = writePrivateFileAtomically(path, big);
        ::setrlimit(RLIMIT_FSIZE, &saved);
        std::signal(SIGXFSZ, oldHandler);
        for (const Status& s : {plain, secret}) {
            QVERIFY2(contains(s, "File too large"), s.ok() ? "ok" : s.error().message.c_str());
            QVERIFY(contains(s, path.string() + ".tmp"));
        }
        QCOMPARE(*readFile(path), bytesOf("old"));
        QCOMPARE(namesIn(root), std::vector<std::string>{"data.bin"});
    }

    // A directory that cannot be opened for its sync (write and search allowed, read not): the
    // rename has happened, and the failed sync is reported instead of ignored.
    void failedDirectorySyncIsReported() {
        QTemporaryDir dir;
        const fs::path locked = fs::path(dir.path().toStdString()) / "locked";
        fs::create_directory(locked);
        ::chmod(locked.c_str(), 0300);
        if (!permissionsApply(locked)) {
            ::chmod(locked.c_str(), 0755);
            QSKIP("running with privileges that ignore directory permissions (root)");
        }
        const Status s = writePrivateFileAtomically(locked / "key", bytesOf("secret"));
        ::chmod(locked.c_str(), 0755);
        QVERIFY2(contains(s, "cannot open directory '" + locked.string() + "'"),
                 s.ok() ? "ok" : s.error().message.c_str());
        QCOMPARE(namesIn(locked), std::vector<std::string>{"key"});
    }

    void readErrorsNameThePath() {
        QTemporaryDir dir;
        const fs::path missing = fs::path(dir.path().toStdString()) / "missing";
        auto none = readFile(missing);
        QVERIFY(!none.ok());
        QCOMPARE(none.error().message,
                 "cannot open '" + missing.string() + "': No such file or directory");
        auto folder = readFile(dir.path().toStdString());
        QVERIFY(!folder.ok());
        QVERIFY(folder.error().message.find("Is a directory") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestFileIo)
#include "test_file_io.moc"
