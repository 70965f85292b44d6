// The settings dialog: every field written to settings.json and read back (round trip), time
// windows per weekday (any number per day: added, removed, kept through open and OK, overlaps and
// empty days refused) merged into core windows, invalid values refused with core/settings'
// messages and nothing saved, start at login writing and removing the XDG autostart entry.
#include "settings_dialog.hpp"

#include "autostart.hpp"
#include "idle_dbus.hpp"
#include "ui_fixture.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QTimeEdit>
#include <QToolButton>

using namespace tandem;
using namespace tandem::uitest;

class TestUiSettings : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    core::ManualClock m_clock{kNowMs};
    core::FixedOffsetTimeZone m_zone{0};

    ui::UiContext context(ui::EngineBridge& bridge, FakeServices& services) {
        ui::UiContext ctx;
        ctx.bridge = &bridge;
        ctx.services = &services;
        ctx.settingsFile = (m_dir.path() + QStringLiteral("/settings.json")).toStdString();
        return ctx;
    }

  private slots:
    void initTestCase() {
        // The autostart entry goes below this test's own config directory.
        qputenv("XDG_CONFIG_HOME", (m_dir.path() + QStringLiteral("/config")).toUtf8());
        // No session bus: the idle time is unknown (before anything in the test asks D-Bus).
        qputenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/tandem-test-bus");
    }

    // The weekday rows can be changed only while "Only at these times" is on.
    void weekdaysFollowTheScheduleRule() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        core::Settings s;
        s.rules.useTimeWindows = false;
        s.rules.timeWindows = {{0b0000001, 18 * 60, 8 * 60}};  // Monday
        ui::SettingsDialog dialog(context(bridge, services), s, nullptr);
        for (int d = 0; d < 7; ++d) {
            QVERIFY(!dialog.dayEnabled(d)->isEnabled());
            QVERIFY(!dialog.addWindowButton(d)->isEnabled());
        }
        QVERIFY(!dialog.windowFrom(0, 0)->isEnabled());
        dialog.useTimeWindows()->setChecked(true);
        for (int d = 0; d < 7; ++d)
            QVERIFY(dialog.dayEnabled(d)->isEnabled() && dialog.addWindowButton(d)->isEnabled());
        QVERIFY(dialog.windowFrom(0, 0)->isEnabled());   // Monday is chosen
        QVERIFY(!dialog.windowFrom(1, 0)->isEnabled());  // Tuesday is not
        dialog.useTimeWindows()->setChecked(false);
        QVERIFY(!dialog.windowFrom(0, 0)->isEnabled());
        QVERIFY(!dialog.dayEnabled(0)->isEnabled());
    }

    // The dialog keeps its size: more windows, the device note, the list of problems and
    // another page scroll or take room inside it.
    void stableSize() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        ui::SettingsDialog dialog(context(bridge, services), core::Settings{}, nullptr);
        dialog.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dialog));
        const QSize before = dialog.size();
        dialog.showTab(1);
        dialog.useTimeWindows()->setChecked(true);
        for (int i = 0; i < 6; ++i)
            QTest::mouseClick(dialog.addWindowButton(0), Qt::LeftButton);
        QCOMPARE(dialog.windowCount(0), 7);
        dialog.setDevices(services.detectDevices());
        dialog.proxyMode()->setCurrentIndex(2);  // "This proxy:" with no URL: refused
        dialog.accept();
        QVERIFY(!dialog.issues().isEmpty());
        dialog.showTab(3);
        QCoreApplication::processEvents();
        QCOMPARE(dialog.size(), before);
    }

    // A label shows "&" only as a shortcut's underline: every label with one has a buddy.
    void noLiteralAmpersands() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        ui::SettingsDialog dialog(context(bridge, services), core::Settings{}, nullptr);
        int checked = 0;
        for (QLabel* label : dialog.findChildren<QLabel*>()) {
            const QString text = QString(label->text()).remove(QStringLiteral("&&"));
            if (!text.contains(QLatin1Char('&')) || Qt::mightBeRichText(label->text()))
                continue;
            ++checked;
            QVERIFY2(label->buddy(), qPrintable(label->text()));
        }
        QVERIFY(checked >= 5);
    }

    // The data directory field shows the directory in use; left as it is, it stays "the one
    // the app runs from" (no setting of its own).
    void dataDirectoryInUse() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        auto ctx = context(bridge, services);
        ctx.dataDirectory = "/srv/tandem-profile";
        {
            ui::SettingsDialog dialog(ctx, core::Settings{}, nullptr);
            QCOMPARE(dialog.dataDirEdit()->text(), QStringLiteral("/srv/tandem-profile"));
            QCOMPARE(dialog.settings().dataDirectory, std::string());
            dialog.dataDirEdit()->setText(QStringLiteral("/srv/elsewhere"));
            QCOMPARE(dialog.settings().dataDirectory, std::string("/srv/elsewhere"));
        }
        core::Settings own;
        own.dataDirectory = "/mnt/big";
        ui::SettingsDialog dialog(ctx, own, nullptr);
        QCOMPARE(dialog.dataDirEdit()->text(), QStringLiteral("/mnt/big"));
        QCOMPARE(dialog.settings().dataDirectory, std::string("/mnt/big"));
    }

    // GetSessionIdleTime: KDE answers milliseconds, gnome-screensaver and its forks seconds.
    void screenSaverIdleUnits() {
        QCOMPARE(ui::screenSaverIdleSeconds(90'500, true), int64_t(90));
        QCOMPARE(ui::screenSaverIdleSeconds(90, false), int64_t(90));
        QCOMPARE(ui::screenSaverIdleSeconds(4'000'000'000u, true), int64_t(4'000'000));
    }

    // Without a session bus the idle time is unknown, and a user who asked for "only when idle"
    // is told so next to the setting.
    void unknownIdleIsExplained() {
        ui::DBusIdleSource idle;
        QVERIFY(idle.unknownReason().isEmpty());  // not asked yet
        QCOMPARE(idle.idleSeconds(), std::optional<int64_t>());
        QCOMPARE(idle.unknownReason(),
                 QStringLiteral("there is no D-Bus session bus to ask the desktop"));
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        auto ctx = context(bridge, services);
        ctx.idleUnknownReason = [&idle] { return idle.unknownReason(); };
        core::Settings s;
        s.rules.onlyWhenIdle = true;
        ui::SettingsDialog dialog(ctx, s, nullptr);
        QLabel* note = dialog.idleUnknownNote();
        QVERIFY(!note->isHidden());
        QVERIFY2(note->text().contains(QStringLiteral("cannot tell how long this computer has been "
                                                      "idle (there is no D-Bus session bus")),
                 qPrintable(note->text()));
        dialog.onlyWhenIdle()->setChecked(false);
        QVERIFY(note->isHidden());
        dialog.onlyWhenIdle()->setChecked(true);
        QVERIFY(!note->isHidden());
        // Known idle time: nothing to say.
        ctx.idleUnknownReason = [] { return QString(); };
        ui::SettingsDialog known(ctx, s, nullptr);
        QVERIFY(known.idleUnknownNote()->isHidden());
    }

    void windowsFromDays() {
        std::array<std::vector<ui::DayWindow>, 7> days;
        for (int d = 0; d < 5; ++d)
            days[d] = {{1080, 480}};
        days[6] = {{600, 720}, {1080, 480}};
        const auto w = ui::windowsFromDays(days);
        QCOMPARE(w.size(), size_t(2));
        QCOMPARE(w[0], (core::TimeWindow{0x5f, 1080, 480}));  // Mon-Fri and Sunday
        QCOMPARE(w[1], (core::TimeWindow{0x40, 600, 720}));
        QCOMPARE(ui::daysFromWindows(w)[6], (std::vector<ui::DayWindow>{{1080, 480}, {600, 720}}));
        QVERIFY(ui::daysFromWindows(w)[5].empty());
    }

    void windowOverlaps() {
        std::array<std::vector<ui::DayWindow>, 7> days;
        days[0] = {{480, 720}, {720, 1080}};  // touching is fine
        days[6] = {{0, 0}};                   // Sunday, the whole day
        QVERIFY(ui::windowOverlaps(days).isEmpty());
        days[1] = {{1080, 480}, {420, 600}};  // Tuesday evening to Wednesday 08:00; 07:00-10:00
        QVERIFY(ui::windowOverlaps(days).isEmpty());
        days[2] = {{420, 600}};  // Wednesday 07:00 lies in Tuesday's night window
        QCOMPARE(ui::windowOverlaps(days),
                 QStringList({"the time window Tuesday 18:00 to 08:00 overlaps Wednesday 07:00 "
                              "to 10:00; expected windows that do not overlap (join them into "
                              "one, or change the times)"}));
        days[2].clear();
        days[5] = {{1380, 60}};  // Saturday 23:00 to Sunday 01:00, into the whole Sunday
        QCOMPARE(ui::windowOverlaps(days).size(), 1);
        days[5].clear();
        days[0].push_back({600, 660});  // inside Monday 08:00-12:00
        QCOMPARE(ui::windowOverlaps(days).size(), 1);
        days[0] = {{0, 0}};  // the whole Monday against Sunday's whole day: touching only
        QVERIFY(ui::windowOverlaps(days).isEmpty());
    }

    void roundTrip() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        auto ctx = context(bridge, services);
        core::Settings original;
        original.coordinatorUrl = "https://old.example:8443";
        original.unknownKeys["future.key"] = "42";
        ui::SettingsDialog dialog(ctx, original, nullptr);
        // Devices arrive from the thread pool: the unusable GPU is listed with its reason.
        QTRY_COMPARE(services.deviceCalls.load(), 1);
        QTRY_VERIFY(dialog.deviceBox()->findData(QStringLiteral("cuda:0")) >= 0);
        const int gpu = dialog.deviceBox()->findData(QStringLiteral("cuda:0"));
        QVERIFY(gpu >= 0);
        QVERIFY(dialog.deviceBox()->itemText(gpu).contains(QStringLiteral("not usable")));
        dialog.deviceBox()->setCurrentIndex(dialog.deviceBox()->findData(QStringLiteral("cpu")));

        dialog.onlyWhenIdle()->setChecked(true);
        dialog.findChild<QSpinBox*>()->setValue(10);  // idle minutes, the first spin box
        dialog.temperatureLimit()->setChecked(true);
        dialog.temperatureC()->setValue(80);
        dialog.useTimeWindows()->setChecked(true);
        for (int d = 0; d < 5; ++d) {
            dialog.dayEnabled(d)->setChecked(true);
            QCOMPARE(dialog.windowCount(d), 1);
            dialog.windowFrom(d, 0)->setTime(QTime(18, 0));
            dialog.windowTo(d, 0)->setTime(QTime(8, 0));
        }
        dialog.uploadCapGb()->setValue(1.5);
        dialog.downloadCapGb()->setValue(0);
        dialog.findChild<QDoubleSpinBox*>(QStringLiteral("uploadRate"))->setValue(8);  // Mbit/s
        dialog.proxyMode()->setCurrentIndex(2);
        dialog.proxyEdit()->setText(QStringLiteral("socks5h://proxy.lan:1080"));
        dialog.coordinatorEdit()->setText(QStringLiteral("https://new.example:9443"));
        const QString pin =
            QStringLiteral("sha256//") + QString(43, QLatin1Char('B')) + QLatin1Char('=');
        dialog.pinEdit()->setText(pin);
        dialog.dataDirEdit()->setText(m_dir.path() + QStringLiteral("/data"));
        dialog.accept();
        QVERIFY2(dialog.issues().isEmpty(), qPrintable(dialog.issues().join('\n')));
        QCOMPARE(dialog.result(), int(QDialog::Accepted));

        auto loaded = core::loadSettings(ctx.settingsFile);
        QVERIFY(loaded.ok());
        const core::Settings& s = loaded->settings;
        QCOMPARE(s.device, std::string("cpu"));
        QVERIFY(s.rules.onlyWhenIdle);
        QCOMPARE(s.rules.idleThresholdSeconds, int64_t(600));
        QCOMPARE(s.rules.maxTemperatureC, std::optional<double>(80));
        QVERIFY(s.rules.useTimeWindows);
        QCOMPARE(s.rules.timeWindows.size(), size_t(1));
        QCOMPARE(s.rules.timeWindows[0],
                 (core::TimeWindow{core::TimeWindow::kWeekdays, 1080, 480}));
        QCOMPARE(s.rules.dailyUploadCapBytes, int64_t(1'500'000'000));
        QCOMPARE(s.rules.dailyDownloadCapBytes, int64_t(0));
        QCOMPARE(s.uploadLimitBytesPerSecond, int64_t(1'000'000));
        QCOMPARE(s.proxy, std::string("socks5h://proxy.lan:1080"));
        QCOMPARE(s.coordinatorUrl, std::string("https://new.example:9443"));
        QCOMPARE(s.pinnedPublicKey, pin.toStdString());
        QCOMPARE(s.dataDirectory, (m_dir.path() + QStringLiteral("/data")).toStdString());
        QCOMPARE(s.unknownKeys.at("future.key"), std::string("42"));  // kept
        QCOMPARE(s, dialog.settings());

        // Opened again on what was saved, the dialog shows the same values.
        ui::SettingsDialog again(ctx, s, nullptr);
        QCOMPARE(again.settings(), s);
        QCOMPARE(again.windowFrom(2, 0)->time(), QTime(18, 0));
        QVERIFY(!again.dayEnabled(5)->isChecked());
        QCOMPARE(again.proxyMode()->currentIndex(), 2);
    }

    // settings.json may hold several windows on one day; opening the dialog and pressing OK
    // keeps every one of them (the dialog once kept only the last window of each day).
    void severalWindowsPerDaySurvive() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        auto ctx = context(bridge, services);
        ctx.settingsFile = (m_dir.path() + QStringLiteral("/windows.json")).toStdString();
        core::Settings original;
        original.rules.useTimeWindows = true;
        original.rules.timeWindows = {{0x01, 8 * 60, 12 * 60},                         // Monday
                                      {0x01, 14 * 60, 18 * 60},                        // Monday
                                      {core::TimeWindow::kWeekdays, 20 * 60, 6 * 60},  // Mon-Fri
                                      {0x40, 0, 0}};                                   // Sunday
        QVERIFY(core::validate(original).empty());
        ui::SettingsDialog dialog(ctx, original, nullptr);
        QCOMPARE(dialog.settings(), original);
        dialog.accept();
        QVERIFY2(dialog.issues().isEmpty(), qPrintable(dialog.issues().join('\n')));
        auto loaded = core::loadSettings(ctx.settingsFile);
        QVERIFY(loaded.ok());
        QCOMPARE(loaded->settings.rules.timeWindows, original.rules.timeWindows);
        QCOMPARE(dialog.windowCount(0), 3);  // Monday: 08-12, 14-18, 20-06
        QCOMPARE(dialog.windowFrom(0, 1)->time(), QTime(14, 0));
        QCOMPARE(dialog.windowTo(0, 1)->time(), QTime(18, 0));
        QCOMPARE(dialog.windowCount(1), 1);
        QVERIFY(!dialog.dayEnabled(5)->isChecked());
    }

    void addAndRemoveWindows() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        auto ctx = context(bridge, services);
        ctx.settingsFile = (m_dir.path() + QStringLiteral("/addremove.json")).toStdString();
        core::Settings original;
        original.rules.useTimeWindows = true;
        original.rules.timeWindows = {{0x02, 8 * 60, 12 * 60}};  // Tuesday morning
        ui::SettingsDialog dialog(ctx, original, nullptr);
        QCOMPARE(dialog.windowCount(1), 1);
        // Add a second Tuesday window: it starts where the first ends.
        QTest::mouseClick(dialog.addWindowButton(1), Qt::LeftButton);
        QCOMPARE(dialog.windowCount(1), 2);
        QCOMPARE(dialog.windowFrom(1, 1)->time(), QTime(12, 0));
        dialog.windowFrom(1, 1)->setTime(QTime(13, 0));
        dialog.windowTo(1, 1)->setTime(QTime(17, 30));
        // Adding on an unchecked day checks it.
        QVERIFY(!dialog.dayEnabled(3)->isChecked());
        QTest::mouseClick(dialog.addWindowButton(3), Qt::LeftButton);
        QVERIFY(dialog.dayEnabled(3)->isChecked());
        QCOMPARE(dialog.windowCount(3), 2);  // the offered evening window and the new one
        QTest::mouseClick(dialog.removeWindowButton(3, 1), Qt::LeftButton);
        QCOMPARE(dialog.windowCount(3), 1);
        dialog.accept();
        QVERIFY2(dialog.issues().isEmpty(), qPrintable(dialog.issues().join('\n')));
        auto loaded = core::loadSettings(ctx.settingsFile);
        QVERIFY(loaded.ok());
        QCOMPARE(loaded->settings.rules.timeWindows,
                 (std::vector<core::TimeWindow>{
                     {0x02, 8 * 60, 12 * 60}, {0x02, 13 * 60, 17 * 60 + 30}, {0x08, 1080, 480}}));

        // Removing the first Tuesday window keeps the second.
        ui::SettingsDialog again(ctx, loaded->settings, nullptr);
        QCOMPARE(again.windowCount(1), 2);
        QTest::mouseClick(again.removeWindowButton(1, 0), Qt::LeftButton);
        QCOMPARE(again.windowCount(1), 1);
        QCOMPARE(again.windowFrom(1, 0)->time(), QTime(13, 0));
        QCOMPARE(again.settings().rules.timeWindows,
                 (std::vector<core::TimeWindow>{{0x02, 13 * 60, 17 * 60 + 30}, {0x08, 1080, 480}}));
    }

    void invalidWindowsAreRefused() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        auto ctx = context(bridge, services);
        ctx.settingsFile = (m_dir.path() + QStringLiteral("/badwindows.json")).toStdString();
        core::Settings original;
        original.rules.useTimeWindows = true;
        original.rules.timeWindows = {{0x01, 8 * 60, 12 * 60}};
        ui::SettingsDialog dialog(ctx, original, nullptr);
        // Monday: a second window inside the first.
        QTest::mouseClick(dialog.addWindowButton(0), Qt::LeftButton);
        dialog.windowFrom(0, 1)->setTime(QTime(11, 0));
        dialog.windowTo(0, 1)->setTime(QTime(13, 0));
        // Friday chosen, but its only window removed.
        dialog.dayEnabled(4)->setChecked(true);
        QTest::mouseClick(dialog.removeWindowButton(4, 0), Qt::LeftButton);
        QCOMPARE(dialog.windowCount(4), 0);
        dialog.accept();
        QCOMPARE(dialog.result(), int(QDialog::Rejected));
        QCOMPARE(dialog.issues(),
                 QStringList({"Friday is chosen but has no time window; expected at least one "
                              "(press Add), or leave the day unchecked",
                              "the time window Monday 08:00 to 12:00 overlaps Monday 11:00 to "
                              "13:00; expected windows that do not overlap (join them into one, "
                              "or change the times)"}));
        auto* errors = dialog.findChild<QLabel*>(QStringLiteral("errors"));
        QVERIFY(errors->isVisibleTo(&dialog));
        QVERIFY(errors->text().contains(QStringLiteral("overlaps Monday 11:00 to 13:00")));
        QVERIFY(!QFile::exists(QString::fromStdString(ctx.settingsFile.string())));
        // Switching the windows off is always allowed: nothing is checked then.
        dialog.useTimeWindows()->setChecked(false);
        dialog.accept();
        QVERIFY2(dialog.issues().isEmpty(), qPrintable(dialog.issues().join('\n')));
        // Fixed: the second window after the first, Friday unchecked.
        ui::SettingsDialog fixed(ctx, original, nullptr);
        QTest::mouseClick(fixed.addWindowButton(0), Qt::LeftButton);
        fixed.windowTo(0, 1)->setTime(QTime(13, 0));
        fixed.accept();
        QVERIFY2(fixed.issues().isEmpty(), qPrintable(fixed.issues().join('\n')));
        QCOMPARE(
            fixed.settings().rules.timeWindows,
            (std::vector<core::TimeWindow>{{0x01, 8 * 60, 12 * 60}, {0x01, 12 * 60, 13 * 60}}));
    }

    void invalidValuesAreRefused() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        auto ctx = context(bridge, services);
        ctx.settingsFile = (m_dir.path() + QStringLiteral("/refused.json")).toStdString();
        ui::SettingsDialog dialog(ctx, core::Settings{}, nullptr);
        dialog.coordinatorEdit()->setText(QStringLiteral("http://plain.example"));
        dialog.proxyMode()->setCurrentIndex(2);
        dialog.proxyEdit()->setText(QStringLiteral("ftp://proxy.lan:21"));
        dialog.pinEdit()->setText(QStringLiteral("sha256//short"));
        dialog.dataDirEdit()->setText(QStringLiteral("relative/dir"));
        dialog.useTimeWindows()->setChecked(true);  // but no day chosen
        dialog.accept();
        QCOMPARE(dialog.result(), int(QDialog::Rejected));
        const QString all = dialog.issues().join('\n');
        QCOMPARE(dialog.issues().size(), 5);
        QVERIFY2(all.contains(QStringLiteral("uses plain http")), qPrintable(all));
        QVERIFY2(all.contains(QStringLiteral("proxy is 'ftp://proxy.lan:21'")), qPrintable(all));
        QVERIFY2(all.contains(QStringLiteral("is not of the form sha256//")), qPrintable(all));
        QVERIFY2(all.contains(QStringLiteral("is relative; expected an absolute path")),
                 qPrintable(all));
        QVERIFY2(all.contains(QStringLiteral("time windows are switched on but none is set")),
                 qPrintable(all));
        auto* errors = dialog.findChild<QLabel*>(QStringLiteral("errors"));
        QVERIFY(errors->text().startsWith(QStringLiteral("Please correct:")));
        QVERIFY(
            !QFile::exists(QString::fromStdString(ctx.settingsFile.string())));  // nothing saved
        // A custom proxy without a URL is caught by the dialog itself.
        dialog.coordinatorEdit()->clear();
        dialog.proxyEdit()->clear();
        dialog.pinEdit()->clear();
        dialog.dataDirEdit()->clear();
        dialog.useTimeWindows()->setChecked(false);
        dialog.accept();
        QCOMPARE(dialog.issues(), QStringList({"no proxy URL given; expected one, or choose \"From "
                                               "the system\" or \"No proxy\""}));
        dialog.proxyMode()->setCurrentIndex(1);
        dialog.accept();
        QVERIFY(dialog.issues().isEmpty());
        QCOMPARE(dialog.result(), int(QDialog::Accepted));
    }

    void publicNameAndTeam() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        auto ctx = context(bridge, services);
        ctx.settingsFile = (m_dir.path() + QStringLiteral("/profile.json")).toStdString();
        ui::SettingsDialog dialog(ctx, core::Settings{}, nullptr);
        QVERIFY(dialog.displayNameEdit()->text().isEmpty());            // anonymous by default
        dialog.displayNameEdit()->setText(QString(33, QChar(0x00E9)));  // 33 characters, 66 bytes
        dialog.teamEdit()->setText(QStringLiteral("a\u202Eb"));         // right-to-left override
        dialog.accept();
        QCOMPARE(dialog.result(), int(QDialog::Rejected));
        const QString all = dialog.issues().join('\n');
        QCOMPARE(dialog.issues().size(), 2);
        QVERIFY2(all.contains(QStringLiteral("at most 32 characters after trimming white space, "
                                             "found 33")),
                 qPrintable(all));
        QVERIFY2(all.contains(QStringLiteral("U+202E")), qPrintable(all));
        QVERIFY(!QFile::exists(QString::fromStdString(ctx.settingsFile.string())));
        dialog.displayNameEdit()->setText(QStringLiteral("  <b>Ada</b>  "));
        dialog.teamEdit()->setText(QStringLiteral("Engines"));
        dialog.accept();
        QVERIFY2(dialog.issues().isEmpty(), qPrintable(dialog.issues().join('\n')));
        auto saved = core::loadSettings(ctx.settingsFile);
        QVERIFY(saved.ok());
        QCOMPARE(saved->settings.displayName, std::string("<b>Ada</b>"));  // trimmed, as text
        QCOMPARE(saved->settings.team, std::string("Engines"));
        ui::SettingsDialog again(ctx, saved->settings, nullptr);
        QCOMPARE(again.displayNameEdit()->text(), QStringLiteral("<b>Ada</b>"));
    }

    void startAtLogin() {
        QVERIFY(ui::autostart::supported());
        const QString entry = ui::autostart::entryPath();
        QVERIFY(entry.startsWith(m_dir.path()));
        QVERIFY(!QFile::exists(entry));
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        auto ctx = context(bridge, services);
        {
            ui::SettingsDialog dialog(ctx, core::Settings{}, nullptr);
            dialog.startAtLogin()->setChecked(true);
            dialog.accept();
            QVERIFY2(dialog.issues().isEmpty(), qPrintable(dialog.issues().join('\n')));
        }
        QVERIFY(ui::autostart::enabled());
        QFile f(entry);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray text = f.readAll();
        QVERIFY(text.contains("[Desktop Entry]"));
        QVERIFY(text.contains("Exec=" + QCoreApplication::applicationFilePath().toUtf8() +
                              " --background"));
        f.close();
        // Started with --data-dir (here a path with a space, a quote and a percent sign): the
        // entry starts it with the same options.
        {
            auto started = ctx;
            started.launchArguments = {QStringLiteral("--data-dir"),
                                       QStringLiteral("/home/a b/\"x\" 100%"),
                                       QStringLiteral("--ca-file"), QStringLiteral("/etc/ca.pem")};
            core::Settings on;
            on.startAtLogin = true;
            ui::SettingsDialog dialog(started, on, nullptr);
            dialog.accept();
            QVERIFY2(dialog.issues().isEmpty(), qPrintable(dialog.issues().join('\n')));
        }
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray again = f.readAll();
        QVERIFY2(again.contains("Exec=" + QCoreApplication::applicationFilePath().toUtf8() +
                                " --data-dir \"/home/a b/\\\\\"x\\\\\" 100%%\" --ca-file "
                                "/etc/ca.pem --background\n"),
                 again.constData());
        f.close();
        {
            core::Settings on;
            on.startAtLogin = true;
            ui::SettingsDialog dialog(ctx, on, nullptr);
            QVERIFY(dialog.startAtLogin()->isChecked());
            dialog.startAtLogin()->setChecked(false);
            dialog.accept();
        }
        QVERIFY(!QFile::exists(entry));
        QVERIFY(!ui::autostart::enabled());
    }
};

QTEST_MAIN(TestUiSettings)
#include "test_ui_settings.moc"
