// The tray icon: its icon and tooltip show the one state (describeState), its menu holds the
// shared actions (Open, Pause/Resume, Snooze 1 h / 3 h / until tomorrow, Finish then pause,
// Quit). It also posts the few notifications a person should know about: the first close to the
// tray, an error that persists, the first accepted contribution, a daily cap reached.
#pragma once

#include "state_view.hpp"
#include "ui_context.hpp"

#include <QObject>
#include <QSystemTrayIcon>

#include <optional>

class QMenu;

namespace tandem::ui {

class AppActions;
class MainWindow;

class TrayController final : public QObject {
    Q_OBJECT
  public:
    // An error is worth a notification once it has lasted this long (transient network errors
    // heal themselves within the backoff).
    static constexpr int64_t kErrorNoticeAfterMs = 10 * 60 * 1000;

    TrayController(const UiContext& context, AppActions* actions, MainWindow* window,
                   QObject* parent = nullptr);
    ~TrayController() override;

    bool available() const { return m_available; }
    QSystemTrayIcon* icon() const { return m_icon; }
    QMenu* menu() const { return m_menu; }
    StateKind shownKind() const { return m_kind; }
    QString toolTip() const;

    struct Notice {
        QString title;
        QString message;
    };
    const std::vector<Notice>& notices() const { return m_notices; }  // posted so far

  public slots:
    void update();
    void onClosedToTray();
    void onWorkUnitSettled(const QString& id, int state);

  signals:
    void notified(const QString& title, const QString& message);

  private:
    void notify(const QString& title, const QString& message,
                QSystemTrayIcon::MessageIcon icon = QSystemTrayIcon::Information);

    UiContext m_ctx;
    AppActions* m_actions;
    MainWindow* m_window;
    bool m_available = false;
    QSystemTrayIcon* m_icon = nullptr;
    QMenu* m_menu = nullptr;
    StateKind m_kind = StateKind::Waiting;
    QString m_tooltip;
    std::optional<int64_t> m_errorSinceMs;
    bool m_errorNotified = false;
    QString m_capNotifiedDay;
    std::vector<Notice> m_notices;
};

}  // namespace tandem::ui
