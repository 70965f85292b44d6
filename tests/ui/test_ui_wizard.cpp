// The first-run wizard, page by page, with fake Services: devices with the reason a GPU cannot
// be used, the coordinator pre-filled and checked, the public name and team checked and kept, the
// bandwidth and the training speed measured, the costs worked out from the measured figures
// (hand-computed here; core/cost_estimate's own test has the formula), the limits set.
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

    // What the costs page says when a measurement failed; the bandwidth label into `link`.
    static QString costsAfterFailure(bool bandwidthFails, bool speedFails, QString& link) {
        core::ManualClock clock(kNowMs);
        core::FixedOffsetTimeZone zone(0);
        ui::EngineBridge bridge(clock, zone);
        FakeServices services;
        services.bandwidthFails = bandwidthFails;
        services.speedFails = speedFails;
        ui::UiContext ctx;
        ctx.bridge = &bridge;
        ctx.services = &services;
        core::Settings initial;
        initial.coordinatorUrl = "https://127.0.0.1:9";
        ui::FirstRunWizard wizard(ctx, initial);
        wizard.show();
        if (!QTest::qWaitFor([&] { return !wizard.detecting(); }))
            return QStringLiteral("devices never detected");
        wizard.next();
        wizard.next();
        if (!QTest::qWaitFor([&] { return !wizard.measuring(); }))
            return QStringLiteral("never measured");
        link = wizard.bandwidthLabel()->text();
        wizard.next();
        if (wizard.currentId() != ui::FirstRunWizard::CostsPage)
            return QStringLiteral("not on the costs page");
        return wizard.costText();
    }

  private slots:
    void initTestCase() { QLocale::setDefault(QLocale::c()); }

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
                 QStringLiteral("Download: 80.0 Mbit/s\nUpload: 20.0 Mbit/s\nLatency: 12 ms\n"
                                "Training speed: 1000 tokens/s on cpu"));
        QCOMPARE(services.speedCalls.load(), 1);
        QCOMPARE(prefs.number(QStringLiteral("bandwidth/downMbit")), 80.0);

        wizard.next();
        QCOMPARE(wizard.currentId(), int(ui::FirstRunWizard::CostsPage));
        // By hand (docs/costs.md): 1,000 tokens/s x 600 s / 256 tokens a step = 2,343 steps,
        // capped at the run's 500: 128,000 tokens, 128 s of training. Down 4,000,000 + 128,000 +
        // 1,536 (manifest) = 4,129,536 B, up 2,000,128 B. A unit takes 4 x 12 ms + 0.413 s
        // (download at 80 Mbit/s) + 0.5 s (loading) + 128 s = 128.96 s; the 0.8 s upload runs
        // beside it. 8 h a day: 223.3 units, 922 MB down and 447 MB up; 7.94 h of training at
        // 96 W (8 threads x 12 W, stated) = 0.76 kWh.
        const QString costs = wizard.costText();
        for (const char* part :
             {"work units of 500 training steps, each about <b>2 min</b> of training",
              "Each unit downloads 4.1 MB (the model's weights and its text) and uploads 2.0 MB",
              "a unit takes about <b>2 min</b> in all",
              "about 223 units a day: <b>922 MB down</b> and <b>447 MB up</b>",
              "Training draws about 96 W (an estimate for 8 CPU threads, not measured): about "
              "<b>0.76 kWh a day</b>. Enter your electricity price"})
            QVERIFY2(costs.contains(QString::fromUtf8(part)), qPrintable(costs));
        // The status's memory estimate (worked out by the app, given here).
        QVERIFY2(costs.contains(QStringLiteral("about <b>3.0 GB</b> of memory on a CPU, or 2.0 GB "
                                               "of GPU memory and 1.0 GB of RAM on a GPU")),
                 qPrintable(costs));
        wizard.energyPrice()->setValue(0.30);  // 0.76 kWh x 0.30 = 0.23
        QVERIFY2(wizard.costText().contains(
                     QStringLiteral("which costs about <b>0.23</b> a day at 0.30 per kWh")),
                 qPrintable(wizard.costText()));
        wizard.hoursPerDay()->setValue(24);  // 670 units
        QVERIFY2(wizard.costText().contains(QStringLiteral("<b>2.8 GB down</b>")),
                 qPrintable(wizard.costText()));

        wizard.uploadCapGb()->setValue(0.5);  // 0.5 GB / 2,000,128 B = 250 uploads a day
        wizard.downloadCapGb()->setValue(2);
        QVERIFY2(wizard.costText().contains(QStringLiteral(
                     "about 250 units a day: <b>1.0 GB down</b> and <b>500 MB up</b> per day. "
                     "Your daily caps keep it to that; without them it would be 670 units.")),
                 qPrintable(wizard.costText()));
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
        QCOMPARE(s.energyPricePerKwh, 0.30);
        QVERIFY(core::validate(s).empty());
    }

    void failedMeasurementStillLetsThemContinue() {
        QString link;
        const QString costs = costsAfterFailure(true, false, link);
        QVERIFY(link.startsWith(
            QStringLiteral("The measurement failed: connection refused by 127.0.0.1:9")));
        QVERIFY2(costs.contains(QStringLiteral("The connection was not measured")),
                 qPrintable(costs));
    }

    void speedNotMeasuredSaysWhy() {
        QString link;
        const QString costs = costsAfterFailure(false, true, link);
        // Without a speed the day cannot be worked out; the page says why.
        QVERIFY2(costs.contains(QStringLiteral(
                     "Your device's training speed could not be measured (not enough memory: "
                     "needs 9 GB, 2 GB free)")),
                 qPrintable(costs));
        QVERIFY(!costs.contains(QStringLiteral("units a day")));
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
