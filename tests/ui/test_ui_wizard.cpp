// The first-run wizard, page by page, with fake Services: devices with the reason a GPU cannot
// be used, the coordinator pre-filled and checked, the public name and team checked and kept, the
// bandwidth measured, the costs worked out from the measured figures (hand-computed here), the
// limits set; and estimateCosts alone.
#include "wizard.hpp"

#include "ui_fixture.hpp"
#include "ui_prefs.hpp"

#include <QAbstractButton>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>

using namespace tandem;
using namespace tandem::uitest;

class TestUiWizard : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() { QLocale::setDefault(QLocale::c()); }

    void estimateCostsByHand() {
        // 1 M parameters: 4 MB of fp32 weights + 256 KiB data down, 2 MB fp16 + 128 B up.
        const auto c = ui::estimateCosts(1'000'000, 262'144, 80, 20, 300, 8);
        QCOMPARE(c.downloadBytesPerUnit, int64_t(4'262'144));
        QCOMPARE(c.uploadBytesPerUnit, int64_t(2'000'128));
        QCOMPARE(c.downloadSecondsPerUnit, 4'262'144 * 8 / 80e6);
        QCOMPARE(c.uploadSecondsPerUnit, 2'000'128 * 8 / 20e6);
        // Uploads overlap training: a unit paces at download + max(train, upload).
        const double perUnit = 4'262'144 * 8 / 80e6 + 300;
        QCOMPARE(c.unitsPerDay, 8 * 3600 / perUnit);
        QCOMPARE(c.uploadBytesPerDay, c.unitsPerDay * 2'000'128);
        // A slow uplink (0.05 Mbit/s: 320 s per result) sets the pace instead.
        const auto slow = ui::estimateCosts(1'000'000, 262'144, 80, 0.05, 300, 24);
        QCOMPARE(slow.unitsPerDay, 24 * 3600 / (4'262'144 * 8 / 80e6 + 2'000'128 * 8 / 0.05e6));
        // Unmeasured: no time, no per-day figures.
        QCOMPARE(ui::estimateCosts(1'000'000, 0, 0, 0, 300, 8).downloadSecondsPerUnit, 0.0);
    }

    void flow() {
        QTemporaryDir dir;
        core::ManualClock clock(kNowMs);
        core::FixedOffsetTimeZone zone(0);
        ui::EngineBridge bridge(clock, zone);
        FakeServices services;
        services.workUnitSeconds = 600;  // the coordinator's status: units of about 10 min
        ui::UiPrefs prefs(dir.path() + QStringLiteral("/ui.ini"));
        ui::UiContext ctx;
        ctx.bridge = &bridge;
        ctx.services = &services;
        ctx.prefs = &prefs;
        core::Settings initial;
        initial.coordinatorUrl = "https://127.0.0.1:8443";  // as the demo pre-fills it
        const std::string pin = "sha256//" + std::string(43, 'A') + "=";
        initial.pinnedPublicKey = pin;

        ui::FirstRunWizard wizard(ctx, initial);
        wizard.show();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::DevicesPage));
        QTRY_VERIFY(!wizard.detecting());
        QCOMPARE(services.deviceCalls.load(), 1);
        // The GPU is listed with why it cannot be used; only the CPU can be chosen.
        QVERIFY2(wizard.deviceList()->text().contains(
                     QStringLiteral("compute capability 6.1; Tandem needs 7.5 or newer")),
                 qPrintable(wizard.deviceList()->text()));
        QVERIFY(wizard.deviceList()->text().contains(QStringLiteral("No GPU can be used")));
        QCOMPARE(wizard.deviceBox()->count(), 1);
        QCOMPARE(wizard.deviceBox()->currentData().toString(), QStringLiteral("cpu"));

        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::CoordinatorPage));
        QCOMPARE(wizard.coordinatorEdit()->text(), QStringLiteral("https://127.0.0.1:8443"));
        QCOMPARE(wizard.pinEdit()->text(), QString::fromStdString(pin));
        // A plain-http address is refused with core/settings' message.
        wizard.coordinatorEdit()->setText(QStringLiteral("http://127.0.0.1:8443"));
        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::CoordinatorPage));
        auto* error = wizard.findChild<QLabel*>(QStringLiteral("urlError"));
        QVERIFY2(error->text().contains(QStringLiteral("uses plain http")),
                 qPrintable(error->text()));
        wizard.coordinatorEdit()->setText(QStringLiteral("https://127.0.0.1:8443"));
        // The public name is optional (empty: anonymous) but checked as the coordinator checks
        // it: 40 characters are 8 too many, a right-to-left override is refused.
        QVERIFY(wizard.displayNameEdit()->text().isEmpty());
        QVERIFY(wizard.teamEdit()->text().isEmpty());
        wizard.displayNameEdit()->setText(QString(40, QLatin1Char('a')));
        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::CoordinatorPage));
        QVERIFY2(error->text().contains(QStringLiteral("at most 32 characters")) &&
                     error->text().contains(QStringLiteral("found 40")),
                 qPrintable(error->text()));
        wizard.displayNameEdit()->setText(QStringLiteral("  Ada  "));
        wizard.teamEdit()->setText(QStringLiteral("Engines") + QChar(0x202E));
        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::CoordinatorPage));
        QVERIFY2(error->text().startsWith(QStringLiteral("team ")), qPrintable(error->text()));
        QVERIFY2(error->text().contains(QStringLiteral("U+202E")), qPrintable(error->text()));
        wizard.teamEdit()->setText(QStringLiteral("Analytical Engines"));
        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::BandwidthPage));

        // Measuring keeps Next disabled until it is done.
        QTRY_VERIFY(!wizard.measuring());
        QCOMPARE(services.bandwidthCalls.load(), 1);
        QCOMPARE(services.lastUrl, std::string("https://127.0.0.1:8443"));
        QVERIFY(wizard.button(QWizard::NextButton)->isEnabled());
        QCOMPARE(wizard.bandwidthLabel()->text(),
                 QStringLiteral("Download: 80.0 Mbit/s\nUpload: 20.0 Mbit/s\nLatency: 12 ms"));
        QCOMPARE(prefs.number(QStringLiteral("bandwidth/downMbit")), 80.0);

        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::CostsPage));
        // Units of the status's 600 s, plus 0.43 s to download (4,262,144 bytes at 80 Mbit/s;
        // the 0.80 s upload overlaps training): 8 h a day is 47.97 units, 204.4 MB down and
        // 95.9 MB up a day.
        const QString costs = wizard.costText();
        QVERIFY2(costs.contains(QStringLiteral("downloads 4.3 MB and uploads 2.0 MB")),
                 qPrintable(costs));
        QVERIFY2(costs.contains(QStringLiteral(
                     "about 48 units a day: <b>204 MB down</b> and <b>96 MB up</b>")),
                 qPrintable(costs));
        // The status's memory estimate (worked out by the app, given here).
        QVERIFY2(costs.contains(QStringLiteral("about <b>3.0 GB</b> of memory on a CPU, or 2.0 GB "
                                               "of GPU memory and 1.0 GB of RAM on a GPU")),
                 qPrintable(costs));
        wizard.hoursPerDay()->setValue(24);
        QVERIFY2(wizard.costText().contains(QStringLiteral("<b>613 MB down</b>")),
                 qPrintable(wizard.costText()));

        wizard.uploadCapGb()->setValue(0.5);
        wizard.downloadCapGb()->setValue(2);
        wizard.onlyWhenIdle()->setChecked(true);
        wizard.button(QWizard::FinishButton)->click();
        QCOMPARE(wizard.result(), int(QDialog::Accepted));
        const core::Settings s = wizard.settings();
        QCOMPARE(s.coordinatorUrl, std::string("https://127.0.0.1:8443"));
        QCOMPARE(s.pinnedPublicKey, pin);
        QCOMPARE(s.device, std::string("cpu"));
        QCOMPARE(s.displayName, std::string("Ada"));  // trimmed
        QCOMPARE(s.team, std::string("Analytical Engines"));
        QCOMPARE(s.rules.dailyUploadCapBytes, int64_t(500'000'000));
        QCOMPARE(s.rules.dailyDownloadCapBytes, int64_t(2'000'000'000));
        QVERIFY(s.rules.onlyWhenIdle);
        QVERIFY(core::validate(s).empty());
    }

    void failedMeasurementStillLetsThemContinue() {
        core::ManualClock clock(kNowMs);
        core::FixedOffsetTimeZone zone(0);
        ui::EngineBridge bridge(clock, zone);
        FakeServices services;
        services.bandwidthFails = true;
        ui::UiContext ctx;
        ctx.bridge = &bridge;
        ctx.services = &services;
        core::Settings initial;
        initial.coordinatorUrl = "https://127.0.0.1:9";
        ui::FirstRunWizard wizard(ctx, initial);
        wizard.show();
        QTRY_VERIFY(!wizard.detecting());
        wizard.next();
        wizard.next();
        QTRY_VERIFY(!wizard.measuring());
        QVERIFY(wizard.bandwidthLabel()->text().startsWith(
            QStringLiteral("The measurement failed: connection refused by 127.0.0.1:9")));
        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::CostsPage));
        QVERIFY(wizard.costText().contains(QStringLiteral("The connection was not measured")));
    }

    // A wrong pin is not a measurement to skip: the wizard stays on the connection page and says
    // to correct the pin; after going back and fixing it, it goes on.
    void wrongPinDoesNotLetThemStart() {
        core::ManualClock clock(kNowMs);
        core::FixedOffsetTimeZone zone(0);
        ui::EngineBridge bridge(clock, zone);
        FakeServices services;
        services.bandwidthFails = true;
        services.bandwidthProblem = core::Problem::WrongPin;
        ui::UiContext ctx;
        ctx.bridge = &bridge;
        ctx.services = &services;
        core::Settings initial;
        initial.coordinatorUrl = "https://127.0.0.1:9";
        initial.pinnedPublicKey = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        ui::FirstRunWizard wizard(ctx, initial);
        wizard.show();
        QTRY_VERIFY(!wizard.detecting());
        wizard.next();
        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::BandwidthPage));
        QTRY_VERIFY(!wizard.measuring());
        QVERIFY2(wizard.bandwidthLabel()->text().startsWith(
                     QStringLiteral("The coordinator's key does not match the pinned key")),
                 qPrintable(wizard.bandwidthLabel()->text()));
        QVERIFY(!wizard.currentPage()->isComplete());
        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::BandwidthPage));
        // Fixed: the next measurement goes through and the wizard moves on.
        services.bandwidthFails = false;
        wizard.back();
        wizard.next();
        QTRY_VERIFY(!wizard.measuring());
        QTRY_VERIFY(wizard.currentPage()->isComplete());
        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::CostsPage));
    }
};

QTEST_MAIN(TestUiWizard)
#include "test_ui_wizard.moc"
