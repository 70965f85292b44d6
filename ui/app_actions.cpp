#include "app_actions.hpp"

#include "engine_bridge.hpp"
#include "state_view.hpp"

#include <QAction>
#include <QMenu>

namespace tandem::ui {

AppActions::AppActions(EngineBridge* bridge, QObject* parent) : QObject(parent), m_bridge(bridge) {
    auto make = [this](const QString& text, const char* name) {
        auto* a = new QAction(text, this);
        a->setObjectName(QLatin1String(name));
        return a;
    };
    pauseResume = make(tr("&Pause"), "actionPauseResume");
    pauseResume->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_P));
    snoozeOneHour = make(tr("Snooze for &1 hour"), "actionSnooze1h");
    snoozeThreeHours = make(tr("Snooze for &3 hours"), "actionSnooze3h");
    snoozeTomorrow = make(tr("Snooze until &tomorrow"), "actionSnoozeTomorrow");
    finishThenPause = make(tr("&Finish current unit, then pause"), "actionFinishThenPause");
    finishThenPause->setCheckable(true);
    openWindow = make(tr("&Open Tandem"), "actionOpen");
    settings = make(tr("&Settings…"), "actionSettings");
    settings->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Comma));
    settings->setMenuRole(QAction::PreferencesRole);
    quit = make(tr("&Quit"), "actionQuit");
    quit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Q));
    quit->setMenuRole(QAction::QuitRole);

    connect(pauseResume, &QAction::triggered, bridge, &EngineBridge::togglePause);
    connect(snoozeOneHour, &QAction::triggered, bridge,
            [bridge] { bridge->snooze(core::Snooze::OneHour); });
    connect(snoozeThreeHours, &QAction::triggered, bridge,
            [bridge] { bridge->snooze(core::Snooze::ThreeHours); });
    connect(snoozeTomorrow, &QAction::triggered, bridge,
            [bridge] { bridge->snooze(core::Snooze::UntilTomorrow); });
    connect(finishThenPause, &QAction::toggled, bridge, &EngineBridge::setFinishThenPause);
    connect(quit, &QAction::triggered, bridge, &EngineBridge::requestQuit);
    connect(bridge, &EngineBridge::changed, this, &AppActions::update);
    update();
}

void AppActions::fillMenu(QMenu* menu, bool withOpenAndQuit) {
    if (withOpenAndQuit) {
        menu->addAction(openWindow);
        menu->addSeparator();
    }
    menu->addAction(pauseResume);
    menu->addAction(snoozeOneHour);
    menu->addAction(snoozeThreeHours);
    menu->addAction(snoozeTomorrow);
    menu->addAction(finishThenPause);
    if (withOpenAndQuit) {
        menu->addSeparator();
        menu->addAction(quit);
    }
}

void AppActions::update() {
    const auto s = m_bridge->snapshot();
    const bool attached = m_bridge->attached() && s.state != core::EngineState::Stopped;
    const bool held = s.state == core::EngineState::Paused ||
                      s.state == core::EngineState::Snoozed || s.snoozedUntilMs.has_value();
    // With a unit in training the two ways to pause say what they do.
    const bool training = s.state == core::EngineState::Training && s.current;
    pauseResume->setText(held ? tr("&Resume") : training ? tr("&Pause now") : tr("&Pause"));
    pauseResume->setEnabled(attached);
    for (QAction* a : {snoozeOneHour, snoozeThreeHours, snoozeTomorrow})
        a->setEnabled(attached);
    finishThenPause->setText(
        training && s.current->etaMs
            ? tr("&Finish this unit first (about %1)").arg(formatDuration(*s.current->etaMs))
            : tr("&Finish current unit, then pause"));
    finishThenPause->setEnabled(attached && !held);
    const QSignalBlocker block(finishThenPause);
    finishThenPause->setChecked(s.finishThenPause);
}

}  // namespace tandem::ui
