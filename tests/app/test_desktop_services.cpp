// The desktop app's standing() (app/desktop_services.hpp) up to the network: which data
// directory's registration.json it reads, what it answers without a registration or with one for
// another coordinator (not registered, nothing asked), a damaged file (an error naming it), and
// a coordinator that cannot be reached (an error, not a crash). The leaderboard's JSON and the
// coordinator's answer are tested in tests/net and tests/coordinator. And measureSpeed(): the
// run's model timed on the CPU with the engine's thread count, the CPU's power stated, not
// measured; a run that does not say its unit size is refused with a reason.
#include "desktop_services.hpp"

#include "cost_estimate.hpp"
#include "registration_file.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using namespace tandem;
namespace fs = std::filesystem;

namespace {
void writeRaw(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}
// Port 1 on the loopback: nothing listens there, the connection is refused at once.
constexpr const char* kUnreachable = "https://127.0.0.1:1";
}  // namespace

class TestDesktopServices : public QObject {
    Q_OBJECT

  private slots:
    void standingFromTheRegistrationFile() {
        QTemporaryDir defaultDir, chosenDir;
        const fs::path defaultPath = defaultDir.path().toStdString();
        const fs::path chosenPath = chosenDir.path().toStdString();
        app::DesktopServices services(defaultPath);
        core::Settings s;
        s.coordinatorUrl = kUnreachable;

        // No registration yet: answered without asking anyone.
        auto none = services.standing(s);
        QVERIFY(none.ok);
        QVERIFY(!none.registered);

        core::Registration r;
        r.coordinatorUrl = "https://elsewhere.example:8443";
        r.clientId = 3;
        r.token = "t0ken";
        writeRaw(defaultPath / "registration.json", core::registrationJson(r));
        // A registration with another coordinator: not registered with this one.
        auto elsewhere = services.standing(s);
        QVERIFY(elsewhere.ok);
        QVERIFY(!elsewhere.registered);

        // With this coordinator: asked, and it cannot be reached.
        r.coordinatorUrl = kUnreachable;
        writeRaw(defaultPath / "registration.json", core::registrationJson(r));
        auto down = services.standing(s);
        QVERIFY(!down.ok);
        QVERIFY(!down.error.isEmpty());

        // The settings' data directory wins over the default one: none there.
        s.dataDirectory = chosenPath.string();
        auto chosen = services.standing(s);
        QVERIFY(chosen.ok);
        QVERIFY(!chosen.registered);
        writeRaw(chosenPath / "registration.json", "{\"token\":");
        auto damaged = services.standing(s);
        QVERIFY(!damaged.ok);
        QVERIFY2(damaged.error.contains(QStringLiteral("registration.json")),
                 qPrintable(damaged.error));
    }

    void measureSpeedOnTheCpu() {
        QTemporaryDir dir;
        app::DesktopServices services(dir.path().toStdString());
        core::Settings s;
        s.device = "cpu";
        ui::RunInfo run;
        run.ok = true;
        run.modelConfig = *ModelConfig::parse("tiny");
        auto none = services.measureSpeed(s, run);  // no B x T: an older coordinator
        QVERIFY(!none.ok);
        QVERIFY2(none.error.contains(QStringLiteral("how large a work unit is")),
                 qPrintable(none.error));
        run.batch = 2;
        run.seqLen = 32;
        auto r = services.measureSpeed(s, run);
        QVERIFY2(r.ok, qPrintable(r.error));
        QCOMPARE(r.device, QStringLiteral("cpu"));
        QVERIFY(r.tokensPerSecond > 0);
        QVERIFY(r.cpuThreads >= 1);
        QVERIFY(!r.wattsMeasured);
        QCOMPARE(r.watts, r.cpuThreads * core::kCpuWattsPerThread);
        run.seqLen = 65;  // longer than tiny's 64 positions: refused, not a crash
        auto tooLong = services.measureSpeed(s, run);
        QVERIFY(!tooLong.ok);
        QVERIFY2(tooLong.error.contains(QStringLiteral("T <= 64")), qPrintable(tooLong.error));
    }
};

QTEST_GUILESS_MAIN(TestDesktopServices)
#include "test_desktop_services.moc"
