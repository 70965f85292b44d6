// The settings dialog: every field written to settings.json and read back (round trip), time
// windows per weekday merged into core windows, invalid values refused with core/settings'
// messages and nothing saved, start at login writing and removing the XDG autostart entry.
#include "settings_dialog.hpp"

#include "autostart.hpp"
#include "ui_fixture.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QTimeEdit>

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
    }

    void windowsFromDays() {
        std::array<bool, 7> on{true, true, true, true, true, false, true};
        std::array<int, 7> from{1080, 1080, 1080, 1080, 1080, 0, 600};
        std::array<int, 7> to{480, 480, 480, 480, 480, 0, 720};
        const auto w = ui::windowsFromDays(on, from, to);
        QCOMPARE(w.size(), size_t(2));
        QCOMPARE(w[0], (core::TimeWindow{core::TimeWindow::kWeekdays, 1080, 480}));
        QCOMPARE(w[1], (core::TimeWindow{0x40, 600, 720}));
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
        QTRY_VERIFY(dialog.deviceBox()->findData(QStringLiteral("cpu")) >= 0);
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
            dialog.dayFrom(d)->setTime(QTime(18, 0));
            dialog.dayTo(d)->setTime(QTime(8, 0));
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
        QCOMPARE(again.dayFrom(2)->time(), QTime(18, 0));
        QVERIFY(!again.dayEnabled(5)->isChecked());
        QCOMPARE(again.proxyMode()->currentIndex(), 2);
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
