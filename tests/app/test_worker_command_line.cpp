// tandem-worker's command line (CLI11): --help names every option with its explanation, --version,
// and each kind of mistake gives its message and exit code (2: bad command line, 3: the device
// cannot be used, 4: no worker runs for a control command) before anything is created.
#include <QtTest>

namespace {

struct Run {
    int exitCode = -1;
    QString out, err;
};

Run runWorker(const QStringList& args) {
    QProcess p;
    p.start(TANDEM_WORKER_BIN, args);
    Run r;
    if (!p.waitForFinished(20000))
        return r;
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

}  // namespace

class TestWorkerCommandLine : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    QString dataDir() const { return m_dir.path() + "/data"; }

  private slots:
    void help() {
        const Run r = runWorker({"--help"});
        QCOMPARE(r.exitCode, 0);
        for (const char* option :
             {"--coordinator URL", "--ca-file FILE", "--pin sha256//BASE64", "--data-dir DIR",
              "--device D", "--threads N", "--max-work-units N", "--checkpoint-seconds S",
              "--checkpoint-steps N", "--name NAME", "--team TEAM", "--device-name NAME", "--help",
              "--version"})
            QVERIFY2(r.out.contains(option), option);
        // Defaults and the exit codes are part of the help.
        QVERIFY(r.out.contains("(default 300)"));
        QVERIFY(r.out.contains("auto (default: a usable NVIDIA GPU, else the CPU"));
        for (const char* command : {"status", "pause", "resume", "finish"})
            QVERIFY2(r.out.contains(QString("\n  ") + command + " "), command);
        QVERIFY(r.out.contains("3  the requested device cannot be used"));
        QVERIFY(r.err.isEmpty());
    }

    void version() {
        const Run r = runWorker({"--version"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.startsWith("tandem-worker "));
    }

    void badCommandLines_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        const QString d = dataDir();
        QTest::newRow("unknown option") << QStringList{"--frobnicate"} << "--frobnicate";
        QTest::newRow("no data dir")
            << QStringList{"--coordinator", "https://127.0.0.1:1"} << "--data-dir is required";
        QTest::newRow("threads not a number")
            << QStringList{"--data-dir", d, "--threads", "many"}
            << "--threads expects a positive integer, found 'many'";
        QTest::newRow("threads zero") << QStringList{"--data-dir", d, "--threads", "0"}
                                      << "--threads expects a positive integer, found '0'";
        QTest::newRow("max units negative")
            << QStringList{"--data-dir", d, "--max-work-units", "-1"}
            << "--max-work-units expects a positive integer, found '-1'";
        QTest::newRow("value missing")
            << QStringList{"--data-dir", d, "--coordinator"} << "--coordinator";
        QTest::newRow("no coordinator") << QStringList{"--data-dir", d}
                                        << "--coordinator is "
                                           "required";
        QTest::newRow("plain http")
            << QStringList{"--data-dir", d, "--coordinator", "http://127.0.0.1:1"}
            << "--coordinator must be an https:// URL, found 'http://127.0.0.1:1'";
        QTest::newRow("both trusts")
            << QStringList{"--data-dir", d,           "--coordinator", "https://h:1",
                           "--pin",      "sha256//x", "--ca-file",     "/ca.pem"}
            << "give --ca-file or --pin, not both";
        QTest::newRow("bad pin") << QStringList{"--data-dir",  d,       "--coordinator",
                                                "https://h:1", "--pin", "abc"}
                                 << "--pin expects sha256//BASE64, found 'abc'";
        QTest::newRow("bad device")
            << QStringList{"--data-dir", d, "--coordinator", "https://h:1", "--device", "gpu"}
            << "--device expects auto, cpu or cuda:N, found 'gpu'";
        QTest::newRow("two commands") << QStringList{"status", "pause", "--data-dir", d} << "pause";
    }
    void badCommandLines() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        const Run r = runWorker(args);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.startsWith("tandem-worker: ") && r.err.contains(message), qPrintable(r.err));
        QVERIFY(r.out.isEmpty());
        QVERIFY2(!QFileInfo::exists(dataDir()), "nothing is created for a bad command line");
    }

    void deviceThatCannotBeUsed() {
        // No machine running the tests has 1000 GPUs (and most have none).
        const Run r = runWorker({"--data-dir", dataDir(), "--coordinator", "https://127.0.0.1:1",
                                 "--device", "cuda:999"});
        QCOMPARE(r.exitCode, 3);
        QVERIFY2(r.err.startsWith("tandem-worker: cannot use cuda:999: "), qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(dataDir()));
    }

    void controlWithoutAWorker() {
        for (const char* command : {"status", "pause", "resume", "finish"}) {
            const Run r = runWorker({command, "--data-dir", dataDir()});
            QCOMPARE(r.exitCode, 4);
            QVERIFY2(r.err.contains("no tandem-worker is running"), qPrintable(r.err));
        }
        // The data directory may come first too.
        QCOMPARE(runWorker({"--data-dir", dataDir(), "status"}).exitCode, 4);
    }
};

QTEST_GUILESS_MAIN(TestWorkerCommandLine)
#include "test_worker_command_line.moc"
