// The tray menu's actions against a real Engine (tests/core/fake_coordinator.hpp serves a tiny
// model): each action changes the engine's state, and the state shown by the tray icon, its
// tooltip, the window's status bar and the Overview headline change with it, alike.
#include "app_actions.hpp"
#include "eliding_label.hpp"
#include "engine.hpp"
#include "fake_coordinator.hpp"
#include "main_window.hpp"
#include "pages.hpp"
#include "tray.hpp"
#include "ui_fixture.hpp"
#include "ui_prefs.hpp"

#include <QAction>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QSignalSpy>

// Generous limits: the engine runs on its own threads, slower on a loaded CI machine. (Polling
// ends as soon as the condition holds; nothing here is timed.)
#undef QTRY_COMPARE
#define QTRY_COMPARE(expr, expected) QTRY_COMPARE_WITH_TIMEOUT(expr, expected, 60000)
#undef QTRY_VERIFY
#define QTRY_VERIFY(expr) QTRY_VERIFY_WITH_TIMEOUT(expr, 60000)
#undef QTRY_VERIFY2
#define QTRY_VERIFY2(expr, message) QTRY_VERIFY2_WITH_TIMEOUT(expr, message, 60000)

using namespace tandem;

namespace {

QAction* menuAction(QMenu* menu, const char* name) {
    for (QAction* a : menu->actions())
        if (a->objectName() == QLatin1String(name))
            return a;
    return nullptr;
}

}  // namespace

class TestUiTray : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    core::SystemClock m_clock;
    core::FixedOffsetTimeZone m_zone{0};
    std::unique_ptr<testing::FakeCoordinator> m_api;
    std::unique_ptr<ui::EngineBridge> m_bridge;
    std::unique_ptr<core::Engine> m_engine;
    std::unique_ptr<ui::UiPrefs> m_prefs;
    core::Settings m_settings;
    ui::UiContext m_ctx;
    QString m_idleReason;  // what the idle source says; empty: known
    std::unique_ptr<ui::AppActions> m_actions;
    std::unique_ptr<ui::MainWindow> m_window;
    std::unique_ptr<ui::TrayController> m_tray;

    core::EngineState engineState() const { return m_engine->snapshot().state; }
    bool working() const {
        const auto s = engineState();
        return s == core::EngineState::Fetching || s == core::EngineState::Downloading ||
               s == core::EngineState::Training || s == core::EngineState::Uploading;
    }
    QString headline() const {
        return m_window->overviewPage()
            ->findChild<ui::ElidingLabel*>(QStringLiteral("headline"))
            ->fullText();
    }
    // Icon, tooltip, status bar and overview tell the same story.
    void checkShownAlike(ui::StateKind kind, const QString& headlineStart) {
        QTRY_COMPARE(m_tray->shownKind(), kind);
        QTRY_VERIFY2(headline().startsWith(headlineStart), qPrintable(headline()));
        // The tooltip is one short line.
        QTRY_COMPARE(m_tray->toolTip(),
                     ui::elideChars(QStringLiteral("Tandem: ") + headline(), ui::kTooltipChars));
        QTRY_VERIFY2(m_window->statusText().startsWith(headline()),
                     qPrintable(m_window->statusText()));
    }

  private slots:
    void initTestCase() {
        m_api = std::make_unique<testing::FakeCoordinator>("L=1,NH=2,C=16,T=16", 3000);
        m_bridge = std::make_unique<ui::EngineBridge>(m_clock, m_zone);
        core::EngineConfig cfg;
        cfg.dataDir = (m_dir.path() + QStringLiteral("/data")).toStdString();
        cfg.coordinatorUrl = "https://coordinator.test";
        cfg.pollIntervalMs = 20;
        cfg.rulesCheckIntervalMs = 0;
        core::Engine::Dependencies deps;
        deps.api = m_api.get();
        deps.clock = &m_clock;
        deps.zone = &m_zone;
        deps.backends = [](const std::string&) { return makeCpuBackend("cpu", 1); };
        deps.observer = m_bridge->observer();
        auto engine = core::Engine::create(cfg, deps);
        QVERIFY2(engine.ok(), engine.ok() ? "" : engine.error().message.c_str());
        m_engine = std::move(*engine);
        m_bridge->setEngine(m_engine.get());

        m_prefs = std::make_unique<ui::UiPrefs>(m_dir.path() + QStringLiteral("/ui.ini"));
        m_ctx.bridge = m_bridge.get();
        m_ctx.settings = &m_settings;
        m_ctx.prefs = m_prefs.get();
        m_ctx.idleUnknownReason = [this] { return m_idleReason; };
        m_actions = std::make_unique<ui::AppActions>(m_bridge.get(), nullptr);
        m_window = std::make_unique<ui::MainWindow>(m_ctx, m_actions.get());
        m_tray = std::make_unique<ui::TrayController>(m_ctx, m_actions.get(), m_window.get());
        m_window->show();
        m_engine->start();
        QTRY_VERIFY_WITH_TIMEOUT(working(), 30000);
        checkShownAlike(ui::StateKind::Working, QStringLiteral("Working: "));
    }

    void menuHoldsTheActions() {
        QMenu* menu = m_tray->menu();
        QStringList names;
        for (QAction* a : menu->actions())
            if (!a->isSeparator())
                names << a->objectName();
        QCOMPARE(names,
                 QStringList({"actionOpen", "actionPauseResume", "actionSnooze1h", "actionSnooze3h",
                              "actionSnoozeTomorrow", "actionFinishThenPause", "actionQuit"}));
        // With a unit in training, pausing says that it stops now (finishing first is the other
        // entry, with the time it takes).
        QTRY_COMPARE(engineState(), core::EngineState::Training);
        m_actions->update();
        QCOMPARE(menuAction(menu, "actionPauseResume")->text(), QStringLiteral("&Pause now"));
        QTRY_VERIFY2(menuAction(menu, "actionFinishThenPause")
                         ->text()
                         .startsWith(QStringLiteral("&Finish this unit first (about ")),
                     qPrintable(menuAction(menu, "actionFinishThenPause")->text()));
    }

    // The Overview's Pause button offers both ways while a unit trains: "Pause now" stops at
    // the current step, "Finish this unit first (about N s)" sets the flag.
    void pauseButtonOffersNowOrAfterTheUnit() {
        QTRY_COMPARE(engineState(), core::EngineState::Training);
        auto* button =
            m_window->overviewPage()->findChild<QPushButton*>(QStringLiteral("pauseButton"));
        QVERIFY(button);
        QTRY_VERIFY(button->menu() != nullptr);
        auto* now = button->menu()->findChild<QAction*>(QStringLiteral("pauseNowAction"));
        auto* after = button->menu()->findChild<QAction*>(QStringLiteral("finishFirstAction"));
        QVERIFY(now && after);
        QVERIFY(button->menu()->actions().contains(now));
        QTRY_VERIFY2(after->text().startsWith(QStringLiteral("Finish this unit first (about ")),
                     qPrintable(after->text()));
        now->trigger();
        QTRY_COMPARE(engineState(), core::EngineState::Paused);
        QTRY_VERIFY(button->menu() == nullptr);  // paused: the button resumes
        QTRY_VERIFY(button->text().contains(QStringLiteral("Resume")));
        button->click();
        QTRY_COMPARE(engineState(), core::EngineState::Training);
        QTRY_VERIFY(button->menu() != nullptr);
        after->trigger();
        QTRY_VERIFY(m_engine->snapshot().finishThenPause);
        m_bridge->setFinishThenPause(false);
        QTRY_VERIFY(!m_engine->snapshot().finishThenPause);
    }

    void pauseAndResume() {
        QAction* pause = menuAction(m_tray->menu(), "actionPauseResume");
        pause->trigger();
        QTRY_COMPARE(engineState(), core::EngineState::Paused);
        checkShownAlike(ui::StateKind::Paused, QStringLiteral("Paused"));
        QTRY_COMPARE(pause->text(), QStringLiteral("&Resume"));
        // Closed to the tray while paused, the balloon says so (not "keeps working"), and
        // the current-unit box shows no speed or time left from before the pause.
        m_tray->onClosedToTray();
        QCOMPARE(m_tray->notices().back().title, QStringLiteral("Tandem is in the tray"));
        QVERIFY2(m_tray->notices().back().message.startsWith(QStringLiteral("Paused. Resume")),
                 qPrintable(m_tray->notices().back().message));
        m_window->refresh();
        auto* overview = m_window->overviewPage();
        QCOMPARE(overview->findChild<QLabel*>(QStringLiteral("speed"))->text(),
                 QStringLiteral("–"));
        QCOMPARE(overview->findChild<QLabel*>(QStringLiteral("eta"))->text(), QStringLiteral("–"));
        pause->trigger();
        QTRY_VERIFY(working());
        checkShownAlike(ui::StateKind::Working, QStringLiteral("Working"));
        QTRY_VERIFY2(pause->text().startsWith(QStringLiteral("&Pause")), qPrintable(pause->text()));
    }

    void snoozeOneHour() {
        const int64_t before = m_clock.nowMs();
        menuAction(m_tray->menu(), "actionSnooze1h")->trigger();
        QTRY_COMPARE(engineState(), core::EngineState::Snoozed);
        const auto until = m_engine->snapshot().snoozedUntilMs;
        QVERIFY(until.has_value());
        QVERIFY(*until >= before + 3600'000 && *until <= m_clock.nowMs() + 3600'000);
        checkShownAlike(ui::StateKind::Paused, QStringLiteral("Snoozed until "));
        // Resume ends a snooze.
        menuAction(m_tray->menu(), "actionPauseResume")->trigger();
        QTRY_VERIFY(working());
        QVERIFY(!m_engine->snapshot().snoozedUntilMs.has_value());
    }

    void snoozeThreeHoursAndTomorrow() {
        menuAction(m_tray->menu(), "actionSnooze3h")->trigger();
        QTRY_COMPARE(engineState(), core::EngineState::Snoozed);
        QVERIFY(*m_engine->snapshot().snoozedUntilMs >= m_clock.nowMs() + 3 * 3600'000 - 60'000);
        menuAction(m_tray->menu(), "actionSnoozeTomorrow")->trigger();
        // Until the next local midnight (UTC here).
        QTRY_VERIFY(m_engine->snapshot().snoozedUntilMs.has_value() &&
                    *m_engine->snapshot().snoozedUntilMs % 86400'000 == 0);
        checkShownAlike(ui::StateKind::Paused, QStringLiteral("Snoozed until "));
        menuAction(m_tray->menu(), "actionPauseResume")->trigger();
        QTRY_VERIFY(working());
    }

    void finishThenPause() {
        QAction* finish = menuAction(m_tray->menu(), "actionFinishThenPause");
        QVERIFY(finish->isCheckable());
        const int64_t trained = m_engine->snapshot().totals.workUnitsTrained;
        finish->trigger();
        QTRY_VERIFY(m_engine->snapshot().finishThenPause);
        // The unit finishes (3000 steps: about a second here, over a minute on a loaded
        // machine), then the engine pauses without starting another.
        QTRY_COMPARE_WITH_TIMEOUT(engineState(), core::EngineState::Paused, 240000);
        QVERIFY(m_engine->snapshot().totals.workUnitsTrained >= trained);
        checkShownAlike(ui::StateKind::Paused, QStringLiteral("Paused"));
        QTRY_VERIFY(!finish->isChecked());
    }

    void openAndQuit() {
        m_window->close();  // no system tray on offscreen: minimised, not hidden
        QVERIFY(!m_tray->available());
        QVERIFY(m_window->isVisible());
        auto* notice = m_window->overviewPage()->findChild<QLabel*>(QStringLiteral("notice"));
        // The app tells the window, after the tray, whether the engine started (empty: it did);
        // that must not take the tray's notice away.
        m_window->setStartError(QString());
        QVERIFY(notice->text().contains(QStringLiteral("no system tray")));
        QVERIFY(notice->isVisibleTo(m_window.get()));
        m_window->setStartError(QStringLiteral("Tandem cannot start: disk full"));
        QVERIFY(notice->text().contains(QStringLiteral("no system tray")));
        QVERIFY(notice->text().startsWith(QStringLiteral("Tandem cannot start: disk full")));
        m_window->setStartError(QString());
        menuAction(m_tray->menu(), "actionOpen")->trigger();
        QVERIFY(m_window->isVisible() && !m_window->isMinimized());
        QSignalSpy quit(m_bridge.get(), &ui::EngineBridge::quitRequested);
        menuAction(m_tray->menu(), "actionQuit")->trigger();
        QCOMPARE(quit.count(), 1);
    }

    void firstAcceptedContributionIsNotifiedOnce() {
        // The engine settled units while the tests ran: one notice, however many were accepted.
        QTRY_VERIFY(m_engine->snapshot().totals.workUnitsAccepted >= 1);
        int firsts = 0;
        for (const auto& n : m_tray->notices())
            firsts += n.title.startsWith(QStringLiteral("Your first contribution")) ? 1 : 0;
        QCOMPARE(firsts, 1);
        m_tray->onWorkUnitSettled(QStringLiteral("99"), int(core::WorkUnitState::Accepted));
        firsts = 0;
        for (const auto& n : m_tray->notices())
            firsts += n.title.startsWith(QStringLiteral("Your first contribution")) ? 1 : 0;
        QCOMPARE(firsts, 1);
    }

    // "Only when idle" with an unknown idle time: the Overview says why the rule cannot hold.
    void unknownIdleIsExplained() {
        auto* note = m_window->overviewPage()->findChild<QLabel*>(QStringLiteral("idleUnknown"));
        QVERIFY(note);
        m_idleReason = QStringLiteral("there is no D-Bus session bus to ask the desktop");
        m_window->refresh();
        QVERIFY(note->isHidden());  // the rule is off: nothing to explain
        m_settings.rules.onlyWhenIdle = true;
        m_window->refresh();
        QVERIFY(!note->isHidden());
        QVERIFY2(note->text().contains(QStringLiteral("cannot tell how long this computer has been "
                                                      "idle (there is no D-Bus session bus")),
                 qPrintable(note->text()));
        m_idleReason.clear();  // known again
        m_window->refresh();
        QVERIFY(note->isHidden());
        m_settings.rules.onlyWhenIdle = false;
    }

    void cleanupTestCase() {
        m_tray.reset();
        m_window.reset();
        m_bridge->setEngine(nullptr);
        m_engine.reset();  // quits with a checkpoint and joins
    }
};

QTEST_MAIN(TestUiTray)
#include "test_ui_tray.moc"
