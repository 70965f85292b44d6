// The main window: a list of pages on the left (Overview, Contributions, Performance, Training
// run, Network, Log), the page on the right, and a status bar with the one state. Closing it
// leaves Tandem working in the tray (or, without a tray, minimises it).
#pragma once

#include "ui_context.hpp"

#include <QMainWindow>

class QLabel;

namespace tandem::ui {
class ElidingLabel;
}
class QListWidget;
class QStackedWidget;
class QTimer;

namespace tandem::ui {

class AppActions;
class ContributionsPage;
class LogPage;
class NetworkPage;
class OverviewPage;
class Page;
class PerformancePage;
class RunPage;

class MainWindow final : public QMainWindow {
    Q_OBJECT
  public:
    enum PageIndex { Overview, Contributions, Performance, TrainingRun, Network, Log, PageCount };

    MainWindow(const UiContext& context, AppActions* actions, QWidget* parent = nullptr);

    void showPage(int index);
    int currentPage() const;
    Page* page(int index) const;
    OverviewPage* overviewPage() const;
    ContributionsPage* contributionsPage() const;
    PerformancePage* performancePage() const;
    RunPage* runPage() const;
    NetworkPage* networkPage() const;
    LogPage* logPage() const;
    QString statusText() const;

    // With a tray, closing hides the window; without one it minimises (Tandem keeps working).
    void setCloseToTray(bool on) { m_closeToTray = on; }
    // Shown on the Overview page, each until replaced: a notice about the desktop (no system
    // tray) and why the engine cannot start (empty once it starts); one never hides the other.
    void setNotice(const QString& text);
    void setStartError(const QString& text);
    // Shows, un-minimises and raises the window (a second launch, the tray's Open).
    void bringToFront();

  public slots:
    void refresh();  // the state and the visible page
    // tab: the page to show first (a SettingsTab), -1 the first.
    void openSettings(int tab = -1);
    void showAbout();

  signals:
    void closedToTray();
    void settingsSaved();  // *context.settings holds the new settings

  protected:
    void closeEvent(QCloseEvent* event) override;
    void showEvent(QShowEvent* event) override;

  private:
    void showNotices();
    QString m_notice, m_startError;
    // Never larger than the screen's available area (a 2x screen is 960 x 540 wide and high).
    void fitToScreen();
    UiContext m_ctx;
    AppActions* m_actions;
    QListWidget* m_nav;
    QStackedWidget* m_pages;
    QLabel* m_stateIcon;
    ElidingLabel* m_stateText;
    QTimer* m_timer;
    bool m_closeToTray = true;
    bool m_refreshQueued = false;
};

}  // namespace tandem::ui
