// The commands a person gives Tandem, as QActions shared by the tray menu and the window's menus
// (one action, one shortcut, one enabled state). update() relabels them from the engine state.
#pragma once

#include <QObject>

class QAction;
class QMenu;

namespace tandem::ui {

class EngineBridge;

class AppActions : public QObject {
    Q_OBJECT
  public:
    AppActions(EngineBridge* bridge, QObject* parent);

    QAction* pauseResume;  // Ctrl+P
    QAction* snoozeOneHour;
    QAction* snoozeThreeHours;
    QAction* snoozeTomorrow;
    QAction* finishThenPause;  // checkable
    QAction* openWindow;
    QAction* settings;  // Ctrl+,
    QAction* quit;      // Ctrl+Q

    // The Pause/Resume ... Quit menu of the tray (also the window's Work menu).
    void fillMenu(QMenu* menu, bool withOpenAndQuit);

  public slots:
    void update();

  private:
    EngineBridge* m_bridge;
};

}  // namespace tandem::ui
