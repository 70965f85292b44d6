// The X11 idle source (ui/idle_x11.hpp) against a real X server: an Xvfb of the test's own
// (SKIPPED where Xvfb is not installed). The idle time it reads is the server's: at least the
// time the test waited without input, at most the time since the server started. A server
// without the MIT-SCREEN-SAVER extension, a display that cannot be opened, no DISPLAY and a
// Wayland session each give "unknown" with a reason; DesktopIdleSource falls back from D-Bus to
// X11 and says why when neither can tell.
#include "idle_desktop.hpp"
#include "idle_x11.hpp"

#include <QElapsedTimer>
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>

#include <memory>

using namespace tandem;

namespace {

// An Xvfb on a free display number (-displayfd); stopped with the object.
class Xvfb {
  public:
    explicit Xvfb(const QStringList& extraArgs = {}) {
        const QString exe = QStandardPaths::findExecutable(QStringLiteral("Xvfb"));
        if (exe.isEmpty())
            return;
        m_process.setProgram(exe);
        m_process.setArguments(QStringList{QStringLiteral("-displayfd"), QStringLiteral("1"),
                                           QStringLiteral("-nolisten"), QStringLiteral("tcp"),
                                           QStringLiteral("-screen"), QStringLiteral("0"),
                                           QStringLiteral("320x240x24")} +
                               extraArgs);
        m_process.setProcessChannelMode(QProcess::SeparateChannels);
        m_process.start();
        started.start();
        if (!m_process.waitForStarted(10000))
            return;
        // Xvfb writes its display number once it accepts connections.
        QElapsedTimer wait;
        wait.start();
        while (!m_process.canReadLine() && wait.elapsed() < 30000)
            m_process.waitForReadyRead(1000);
        const QByteArray line = m_process.readLine().trimmed();
        if (!line.isEmpty())
            display = QByteArrayLiteral(":") + line;
    }
    ~Xvfb() {
        if (m_process.state() != QProcess::NotRunning) {
            m_process.terminate();
            if (!m_process.waitForFinished(5000))
                m_process.kill();
            m_process.waitForFinished(5000);
        }
    }
    static bool installed() {
        return !QStandardPaths::findExecutable(QStringLiteral("Xvfb")).isEmpty();
    }

    QByteArray display;  // ":N"; empty when it did not start
    QElapsedTimer started;

  private:
    QProcess m_process;
};

}  // namespace

class TestUiIdleX11 : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        // No session bus: DesktopIdleSource must fall back to X11.
        qputenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/tandem-test-bus");
    }

    void readsTheServersIdleTime() {
        if (!Xvfb::installed())
            QSKIP("Xvfb is not installed (Debian: xvfb)");
        Xvfb x;
        QVERIFY2(!x.display.isEmpty(), "Xvfb did not start");
        ui::X11IdleSource idle(x.display, false);
        QTest::qWait(2200);  // no input reaches this server
        const auto seconds = idle.idleSeconds();
        const int64_t sinceStart = x.started.elapsed() / 1000 + 1;
        QVERIFY2(seconds.has_value(), qPrintable(idle.unknownReason()));
        QVERIFY2(
            *seconds >= 2 && *seconds <= sinceStart,
            qPrintable(QStringLiteral("%1 s idle, server up %2 s").arg(*seconds).arg(sinceStart)));
        QVERIFY(idle.unknownReason().isEmpty());

        // The desktop app's source: no D-Bus here, so the X server answers.
        ui::DesktopIdleSource desktop(x.display, false);
        const auto both = desktop.idleSeconds();
        QVERIFY2(both.has_value(), qPrintable(desktop.unknownReason()));
        QVERIFY(*both >= 2);
        QVERIFY(desktop.unknownReason().isEmpty());
    }

    void serverWithoutTheExtension() {
        if (!Xvfb::installed())
            QSKIP("Xvfb is not installed (Debian: xvfb)");
        Xvfb x({QStringLiteral("-extension"), QStringLiteral("MIT-SCREEN-SAVER")});
        QVERIFY2(!x.display.isEmpty(), "Xvfb did not start");
        ui::X11IdleSource idle(x.display, false);
        QVERIFY(!idle.idleSeconds().has_value());
        QCOMPARE(idle.unknownReason(),
                 QStringLiteral("the X server has no MIT-SCREEN-SAVER extension"));
    }

    void noDisplayOrWayland() {
        ui::X11IdleSource none(QByteArray(), false);
        QVERIFY(!none.idleSeconds().has_value());
        QCOMPARE(none.unknownReason(),
                 QStringLiteral("there is no X display (DISPLAY is not set)"));
        ui::X11IdleSource closed(QByteArrayLiteral(":4242"), false);  // no such server
        QVERIFY(!closed.idleSeconds().has_value());
        QCOMPARE(closed.unknownReason(), QStringLiteral("the X display :4242 cannot be opened"));
        // XWayland sees only X programs' input: not asked at all.
        ui::X11IdleSource wayland(QByteArrayLiteral(":4242"), true);
        QVERIFY(!wayland.idleSeconds().has_value());
        QCOMPARE(wayland.unknownReason(),
                 QStringLiteral("on Wayland the X server does not see all input"));
        // Neither D-Bus nor X11: unknown, with both reasons.
        ui::DesktopIdleSource desktop(QByteArray(), false);
        QVERIFY(!desktop.idleSeconds().has_value());
        QCOMPARE(desktop.unknownReason(),
                 QStringLiteral("there is no D-Bus session bus to ask the desktop; there is no X "
                                "display (DISPLAY is not set)"));
    }
};

QTEST_GUILESS_MAIN(TestUiIdleX11)
#include "test_ui_idle_x11.moc"
