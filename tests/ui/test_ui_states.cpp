// Calm, actionable states: transient network trouble reads as a wait with its retry time, a
// problem only the donor can fix reads "Needs attention" with one line and a button to the
// settings page that fixes it; no status text can widen the window, and the tray tooltip is one
// short line. Against a real Engine whose fake coordinator fails every work request (the clock
// is held still, so the backoff never ends) and against snapshots worked out by hand.
#include "app_actions.hpp"
#include "eliding_label.hpp"
#include "engine.hpp"
#include "fake_coordinator.hpp"
#include "main_window.hpp"
#include "pages.hpp"
#include "state_view.hpp"
#include "tray.hpp"
#include "ui_fixture.hpp"
#include "ui_prefs.hpp"

#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>

#undef QTRY_VERIFY
#define QTRY_VERIFY(expr) QTRY_VERIFY_WITH_TIMEOUT(expr, 60000)

using namespace tandem;
using namespace tandem::uitest;

class TestUiStates : public QObject {
    Q_OBJECT

    core::FixedOffsetTimeZone m_zone{0};

  private slots:
    void initTestCase() { QLocale::setDefault(QLocale::c()); }

    // Worked by hand: the headline for each kind of trouble, its look and the page that fixes it.
    void problemsAreWordedByKind() {
        core::EngineSnapshot s;
        s.state = core::EngineState::Backoff;
        s.reason = "asking for work failed: Failed to connect to 127.0.0.1 port 8443";
        s.problemDetail = s.reason;
        s.nextActionAtMs = kNowMs + 6 * 60'000;  // 12:06
        s.problem = core::Problem::Unreachable;
        auto v = ui::describeState(s, true, kNowMs, m_zone);
        QCOMPARE(v.kind, ui::StateKind::Waiting);
        QCOMPARE(v.headline, QStringLiteral("Can't reach the training server; retrying at 12:06"));
        QVERIFY(!v.needsAttention);
        QCOMPARE(v.fixIn, ui::SettingsTab::None);
        QCOMPARE(v.problemDetail, QString::fromStdString(s.reason));
        QCOMPARE(v.tooltip, QStringLiteral("Tandem: Can't reach the training server; retrying at "
                                           "12:06"));
        s.problem = core::Problem::ServerBusy;
        QCOMPARE(ui::describeState(s, true, kNowMs, m_zone).kind, ui::StateKind::Waiting);
        struct Case {
            core::Problem problem;
            const char* headline;
            ui::SettingsTab tab;
        };
        const Case cases[] = {
            {core::Problem::WrongPin,
             "Needs attention: the server's key does not match the pin in Settings",
             ui::SettingsTab::Coordinator},
            {core::Problem::Certificate, "Needs attention: the server's certificate is not trusted",
             ui::SettingsTab::Coordinator},
            {core::Problem::Unauthorized,
             "Needs attention: the training server refused this computer",
             ui::SettingsTab::Coordinator},
            {core::Problem::DiskFull, "Needs attention: the disk with Tandem's data is full",
             ui::SettingsTab::General},
            {core::Problem::ProtocolMismatch,
             "Needs attention: this Tandem and the server's do not match; update Tandem",
             ui::SettingsTab::None},
        };
        for (const Case& c : cases) {
            s.problem = c.problem;
            v = ui::describeState(s, true, kNowMs, m_zone);
            QCOMPARE(v.kind, ui::StateKind::Error);
            QVERIFY(v.needsAttention);
            QCOMPARE(v.headline, QString::fromUtf8(c.headline));
            QCOMPARE(v.fixIn, c.tab);
            QVERIFY(!v.tooltip.contains(QLatin1Char('\n')));
            QVERIFY(v.tooltip.size() <= ui::kTooltipChars);
        }
        s.problem = core::Problem::Other;
        QCOMPARE(ui::describeState(s, true, kNowMs, m_zone).headline,
                 QStringLiteral("Something went wrong; retrying at 12:06"));
    }

    void elidingHelpers() {
        QCOMPARE(ui::elideChars(QStringLiteral("abcdef"), 6), QStringLiteral("abcdef"));
        QCOMPARE(ui::elideChars(QStringLiteral("abcdefg"), 6), QStringLiteral("abcde…"));
        const QString key(60, QLatin1Char('k'));
        const QString broken = ui::breakableText(QStringLiteral("pin ") + key);
        QCOMPARE(broken.count(QChar(0x200B)), 2);  // after 24 and 48 characters of the key
        QCOMPARE(QString(broken).remove(QChar(0x200B)), QStringLiteral("pin ") + key);
    }

    // A wrong pin with a long, unbreakable message: the window stays as narrow as it was, the
    // Overview says what to do and its button asks for the Coordinator page; the tray tooltip is
    // one short line.
    void wrongPinNeedsAttentionWithoutWideningTheWindow() {
        QTemporaryDir dir;
        core::ManualClock clock(kNowMs);
        testing::FakeCoordinator api;
        core::ApiFailure pin =
            core::apiFailure("TLS: the server's public key sha256//" + std::string(300, 'A') +
                                 " is not the pinned one sha256//" + std::string(300, 'B'),
                             true);
        pin.problem = core::Problem::WrongPin;
        for (int i = 0; i < 20; ++i)
            api.workFailures.push_back(pin);
        ui::EngineBridge bridge(clock, m_zone);
        core::EngineConfig cfg;
        cfg.dataDir = (dir.path() + QStringLiteral("/data")).toStdString();
        cfg.coordinatorUrl = "https://coordinator.test";
        cfg.pollIntervalMs = 20;
        core::Engine::Dependencies deps;
        deps.api = &api;
        deps.clock = &clock;
        deps.zone = &m_zone;
        deps.backends = [](const std::string&) { return makeCpuBackend("cpu", 1); };
        deps.observer = bridge.observer();
        auto engine = core::Engine::create(cfg, deps);
        QVERIFY(engine.ok());
        bridge.setEngine(engine->get());

        ui::UiPrefs prefs(dir.path() + QStringLiteral("/ui.ini"));
        core::Settings settings;
        ui::UiContext ctx;
        ctx.bridge = &bridge;
        ctx.settings = &settings;
        ctx.prefs = &prefs;
        ui::AppActions actions(&bridge, nullptr);
        ui::MainWindow window(ctx, &actions);
        ui::TrayController tray(ctx, &actions, &window);
        window.show();
        const int narrowest = window.minimumSizeHint().width();
        (*engine)->start();
        QTRY_VERIFY((*engine)->snapshot().problem == core::Problem::WrongPin);
        window.refresh();
        tray.update();
        auto* overview = window.overviewPage();
        auto* headline = overview->findChild<ui::ElidingLabel*>(QStringLiteral("headline"));
        QVERIFY(headline);
        QCOMPARE(headline->fullText(),
                 QStringLiteral("Needs attention: the server's key does not match the pin in "
                                "Settings"));
        auto* details = overview->findChild<QLabel*>(QStringLiteral("problemDetails"));
        QVERIFY(details && details->isVisibleTo(&window));
        QVERIFY(QString(details->text()).remove(QChar(0x200B)).contains(QString(300, 'B')));
        QVERIFY2(
            window.minimumSizeHint().width() <= narrowest,
            qPrintable(
                QStringLiteral("%1 > %2").arg(window.minimumSizeHint().width()).arg(narrowest)));
        QVERIFY(window.windowTitle().size() <= 80);
        QVERIFY(!tray.toolTip().contains(QLatin1Char('\n')));
        QVERIFY(tray.toolTip().size() <= ui::kTooltipChars);
        QCOMPARE(tray.shownKind(), ui::StateKind::Error);
        auto* fix = overview->findChild<QPushButton*>(QStringLiteral("fixButton"));
        QVERIFY(fix && fix->isVisibleTo(&window));
        QSignalSpy asked(overview, &ui::OverviewPage::settingsRequested);
        // The page's signal is connected to the window's openSettings (a modal dialog): count it
        // without opening one.
        QObject::disconnect(overview, &ui::OverviewPage::settingsRequested, &window, nullptr);
        fix->click();
        QCOMPARE(asked.count(), 1);
        QCOMPARE(asked.front().front().toInt(), int(ui::SettingsTab::Coordinator));
        bridge.setEngine(nullptr);
        engine->reset();
    }
};

QTEST_MAIN(TestUiStates)
#include "test_ui_states.moc"
