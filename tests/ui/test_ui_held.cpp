// What the window says while the engine is held (issue 17, items 4 and 6), against a real
// Engine with a fake coordinator and a rule probe the test sets:
// - "only when idle" without an idle time holds all work and says so (headline, Overview notice,
//   settings);
// - a temperature limit on a device without a temperature reading is reported on the Overview
//   and next to the setting (work goes on);
// - the current-unit box shows no speed, time left or step loss from before a hold (waiting on a
//   rule, snoozed), and the close-to-tray balloon tells the state as it is;
// - "Last upload" comes from the ledger after a restart.
#include "app_actions.hpp"
#include "eliding_label.hpp"
#include "engine_words.hpp"
#include "held_engine.hpp"
#include "main_window.hpp"
#include "pages.hpp"
#include "settings_dialog.hpp"
#include "tray.hpp"
#include "ui_fixture.hpp"
#include "ui_prefs.hpp"

#include <QCheckBox>
#include <QLabel>

#undef QTRY_VERIFY
#define QTRY_VERIFY(expr) QTRY_VERIFY_WITH_TIMEOUT(expr, 60000)
#undef QTRY_VERIFY2
#define QTRY_VERIFY2(expr, message) QTRY_VERIFY2_WITH_TIMEOUT(expr, message, 60000)
#undef QTRY_COMPARE
#define QTRY_COMPARE(expr, expected) QTRY_COMPARE_WITH_TIMEOUT(expr, expected, 60000)

using namespace tandem;
using namespace tandem::uitest;

namespace {

// A main window and tray on a bridge, with prefs of their own (a fresh close-to-tray notice).
struct Window {
    Window(ui::EngineBridge& bridge, core::Settings& settings, const QString& dir,
           std::function<QString()> idleReason = {})
        : prefs(dir + QStringLiteral("/ui.ini")) {
        ctx.bridge = &bridge;
        ctx.settings = &settings;
        ctx.prefs = &prefs;
        ctx.idleUnknownReason = std::move(idleReason);
        actions = std::make_unique<ui::AppActions>(&bridge, nullptr);
        window = std::make_unique<ui::MainWindow>(ctx, actions.get());
        tray = std::make_unique<ui::TrayController>(ctx, actions.get(), window.get());
    }
    QLabel* label(const char* name) const {
        return window->overviewPage()->findChild<QLabel*>(QLatin1String(name));
    }
    QString headline() const {
        return window->overviewPage()
            ->findChild<ui::ElidingLabel*>(QStringLiteral("headline"))
            ->fullText();
    }
    QString text(const char* name) {
        window->refresh();
        return label(name)->text();
    }
    bool shown(const char* name) {
        window->refresh();
        return label(name)->isVisibleTo(window.get());
    }

    ui::UiPrefs prefs;
    ui::UiContext ctx;
    std::unique_ptr<ui::AppActions> actions;
    std::unique_ptr<ui::MainWindow> window;
    std::unique_ptr<ui::TrayController> tray;
};

}  // namespace

class TestUiHeld : public QObject {
    Q_OBJECT

    core::SystemClock m_clock;
    core::FixedOffsetTimeZone m_zone{0};

  private slots:
    void initTestCase() { QLocale::setDefault(QLocale::c()); }

    void unknownIdleTimeHoldsAndSaysSo() {
        ui::EngineBridge bridge(m_clock, m_zone);
        core::Settings settings;
        settings.rules.onlyWhenIdle = true;
        HeldEngine held(bridge, m_clock, m_zone, settings.rules);
        QVERIFY2(held.engine, held.error.c_str());
        const QString why = QStringLiteral("there is no X display (DISPLAY is not set)");
        Window w(bridge, settings, held.dir.path(), [&] { return why; });
        w.window->show();
        held.start();
        QTRY_COMPARE(bridge.snapshot().state, core::EngineState::Waiting);
        QCOMPARE(bridge.snapshot().hold.value().rule, core::Rule::IdleUnknown);
        QCOMPARE(held.api.workRequests.load(), 0);  // nothing asked, nothing trained
        w.window->refresh();
        QCOMPARE(w.headline(),
                 QStringLiteral("Waiting: Tandem cannot tell whether the computer is in use"));
        QVERIFY(w.shown("idleUnknown"));
        QVERIFY2(w.text("idleUnknown").contains(why + QStringLiteral("), so it does not work")),
                 qPrintable(w.text("idleUnknown")));
        QCOMPARE(w.text("nextAction"), QStringLiteral("check again when that changes"));
        // The settings say the same next to the rule.
        ui::SettingsDialog dialog(w.ctx, settings, nullptr);
        QVERIFY(!dialog.idleUnknownNote()->isHidden());
        QVERIFY(dialog.idleUnknownNote()->text().contains(QStringLiteral("so it does not work")));
        // An idle time appears (the person left): work starts.
        held.setProbe({int64_t{3600}, core::PowerSource::Mains, std::nullopt});
        QTRY_VERIFY(held.api.workRequests.load() > 0);
    }

    void temperatureLimitWithoutASensorIsReported() {
        ui::EngineBridge bridge(m_clock, m_zone);
        core::Settings settings;
        settings.rules.maxTemperatureC = 80;
        HeldEngine held(bridge, m_clock, m_zone, settings.rules);
        QVERIFY2(held.engine, held.error.c_str());
        Window w(bridge, settings, held.dir.path());
        w.window->show();
        QVERIFY(!w.shown("temperatureUnknown"));  // nothing known yet
        held.start();
        QTRY_VERIFY(bridge.snapshot().temperatureUnknown);
        QTRY_VERIFY(held.api.workRequests.load() > 0);  // it works on, without the limit
        QVERIFY(w.shown("temperatureUnknown"));
        QVERIFY(w.text("temperatureUnknown").contains(QStringLiteral("reports no temperature")));
        ui::SettingsDialog dialog(w.ctx, settings, nullptr);
        QLabel* note = dialog.temperatureUnknownNote();
        QVERIFY(!note->isHidden());
        dialog.temperatureLimit()->setChecked(false);
        QVERIFY(note->isHidden());
        dialog.temperatureLimit()->setChecked(true);
        QVERIFY(!note->isHidden());
        // Without the limit the Overview has nothing to say; with a sensor neither.
        settings.rules.maxTemperatureC.reset();
        QVERIFY(!w.shown("temperatureUnknown"));
        settings.rules.maxTemperatureC = 80;
        held.setProbe({std::nullopt, core::PowerSource::Mains, 55.0});
        QTRY_VERIFY(!bridge.snapshot().temperatureUnknown);
        QVERIFY(!w.shown("temperatureUnknown"));
        ui::SettingsDialog withSensor(w.ctx, settings, nullptr);
        QVERIFY(withSensor.temperatureUnknownNote()->isHidden());
    }

    // Training, then held by a rule, then snoozed: the unit box keeps the unit and its step,
    // but no speed, time left or loss from before; the balloon says what really happens.
    void heldShowsNothingStale() {
        ui::EngineBridge bridge(m_clock, m_zone);
        core::Settings settings;  // pause on battery: on by default
        HeldEngine::Options options{settings.rules, 3000, 0, {}};
        HeldEngine held(bridge, m_clock, m_zone, options);
        QVERIFY2(held.engine, held.error.c_str());
        Window w(bridge, settings, held.dir.path());
        w.window->show();
        held.start();
        QTRY_VERIFY2(
            w.text("loss") != QStringLiteral("–") && w.text("speed") != QStringLiteral("–"),
            qPrintable(w.text("loss") + QLatin1Char(' ') + w.text("speed")));
        held.setProbe({std::nullopt, core::PowerSource::Battery, std::nullopt});
        QTRY_COMPARE(bridge.snapshot().state, core::EngineState::Waiting);
        QVERIFY(bridge.snapshot().current.has_value());   // the unit waits, it is not dropped
        QVERIFY(bridge.snapshot().stepLoss.has_value());  // the engine keeps its last loss
        for (const char* name : {"speed", "eta", "loss"})
            QVERIFY2(w.text(name) == QStringLiteral("–"), name);
        QVERIFY2(w.text("unit").startsWith(QString::fromStdString(bridge.snapshot().current->id)),
                 qPrintable(w.text("unit")));
        QCOMPARE(w.headline(), QStringLiteral("Waiting: on battery"));
        w.tray->onClosedToTray();
        QCOMPARE(w.tray->notices().back().title, QStringLiteral("Tandem is in the tray"));
        QCOMPARE(w.tray->notices().back().message,
                 QStringLiteral("Waiting: on battery. Tandem goes on by itself; open it from its "
                                "icon in the tray."));

        held.setProbe({std::nullopt, core::PowerSource::Mains, std::nullopt});
        QTRY_COMPARE(bridge.snapshot().state, core::EngineState::Training);
        QTRY_VERIFY(w.text("speed") != QStringLiteral("–"));
        bridge.snooze(core::Snooze::OneHour);
        QTRY_COMPARE(bridge.snapshot().state, core::EngineState::Snoozed);
        for (const char* name : {"speed", "eta", "loss"})
            QVERIFY2(w.text(name) == QStringLiteral("–"), name);
        // After 23:00 an hour's snooze ends tomorrow: the words come from the snooze's end.
        const auto until = bridge.snapshot().snoozedUntilMs;
        QVERIFY(until.has_value());
        const QString when = ui::formatAt(*until, m_clock.nowMs(), m_zone);
        QVERIFY2(w.text("nextAction") == QStringLiteral("resumes ") + when,
                 qPrintable(w.text("nextAction") + QStringLiteral(" / resumes ") + when));
        Window again(bridge, settings, held.dir.path() + QStringLiteral("/second"));
        again.tray->onClosedToTray();
        QVERIFY2(again.tray->notices().back().message.startsWith(QStringLiteral("Snoozed until ")),
                 qPrintable(again.tray->notices().back().message));
    }

    // A unit accepted in an earlier session: after the restart (paused, so nothing new comes)
    // the Overview names it, not "none yet".
    void lastUploadFromTheLedgerAfterARestart() {
        QTemporaryDir dir;
        const QString data = dir.path() + QStringLiteral("/data");
        std::string acceptedId;
        {
            ui::EngineBridge bridge(m_clock, m_zone);
            HeldEngine held(bridge, m_clock, m_zone, HeldEngine::Options{{}, 6, 1, data});
            QVERIFY2(held.engine, held.error.c_str());
            held.start();
            QTRY_COMPARE(bridge.snapshot().state, core::EngineState::Stopped);
            QVERIFY(bridge.snapshot().lastUpload.has_value());
            QCOMPARE(bridge.snapshot().lastUpload->state, core::WorkUnitState::Accepted);
            acceptedId = bridge.snapshot().lastUpload->id;
        }
        ui::EngineBridge bridge(m_clock, m_zone);
        HeldEngine held(bridge, m_clock, m_zone, HeldEngine::Options{{}, 6, 0, data});
        QVERIFY2(held.engine, held.error.c_str());
        held.engine->pause();
        core::Settings settings;
        Window w(bridge, settings, dir.path());
        held.start();
        QTRY_COMPARE(bridge.snapshot().state, core::EngineState::Paused);
        QCOMPARE(held.api.workRequests.load(), 0);
        QVERIFY2(w.text("lastUpload")
                     .startsWith(QStringLiteral("work unit %1 accepted at ")
                                     .arg(QString::fromStdString(acceptedId))),
                 qPrintable(w.text("lastUpload")));
    }
};

QTEST_MAIN(TestUiHeld)
#include "test_ui_held.moc"
