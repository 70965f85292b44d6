#include "tray.hpp"

#include "app_actions.hpp"
#include "engine_bridge.hpp"
#include "engine_words.hpp"
#include "main_window.hpp"
#include "state_view.hpp"
#include "ui_prefs.hpp"

#include <QAction>
#include <QMenu>
#include <QTimer>

namespace tandem::ui {

TrayController::TrayController(const UiContext& context, AppActions* actions, MainWindow* window,
                               QObject* parent)
    : QObject(parent), m_ctx(context), m_actions(actions), m_window(window) {
    m_menu = new QMenu();
    m_menu->setObjectName(QStringLiteral("trayMenu"));
    m_menu->setAccessibleName(tr("Tandem"));
    actions->fillMenu(m_menu, true);
    connect(actions->openWindow, &QAction::triggered, window, &MainWindow::bringToFront);

    m_available = QSystemTrayIcon::isSystemTrayAvailable();
    m_icon = new QSystemTrayIcon(this);
    m_icon->setContextMenu(m_menu);
    connect(m_icon, &QSystemTrayIcon::activated, this, [this](QSystemTrayIcon::ActivationReason r) {
        if (r == QSystemTrayIcon::Trigger || r == QSystemTrayIcon::DoubleClick) {
            if (m_window->isVisible() && !m_window->isMinimized() && m_window->isActiveWindow())
                m_window->hide();
            else
                m_window->bringToFront();
        }
    });
    window->setCloseToTray(m_available);
    connect(window, &MainWindow::closedToTray, this, &TrayController::onClosedToTray);
    connect(m_ctx.bridge, &EngineBridge::changed, this, &TrayController::update);
    connect(m_ctx.bridge, &EngineBridge::workUnitSettled, this, &TrayController::onWorkUnitSettled);
    // The snooze end and the error age move with the clock, not with engine signals.
    auto* timer = new QTimer(this);
    timer->setInterval(30000);
    connect(timer, &QTimer::timeout, this, &TrayController::update);
    timer->start();
    update();
    if (m_available) {
        m_icon->show();
    } else if (!m_ctx.prefs || !m_ctx.prefs->flag(QStringLiteral("notice/noTray"))) {
        // Said once: the window carries the notice until it is dismissed by a later start.
        window->setNotice(
            tr("This desktop has no system tray, so Tandem has no tray icon. Everything works from "
               "this window: closing it minimises it and Tandem keeps working; use Tandem ▸ Quit "
               "(Ctrl+Q) to stop."));
        if (m_ctx.prefs)
            m_ctx.prefs->setFlag(QStringLiteral("notice/noTray"));
    }
}

TrayController::~TrayController() {
    delete m_menu;
}

QString TrayController::toolTip() const {
    return m_tooltip;
}

void TrayController::update() {
    const int64_t now = m_ctx.bridge->clock().nowMs();
    const auto s = m_ctx.bridge->snapshot();
    const StateView v = describeState(s, m_ctx.bridge->attached(), now, m_ctx.bridge->zone());
    if (v.kind != m_kind || m_icon->icon().isNull())
        m_icon->setIcon(stateIcon(v.kind));
    m_kind = v.kind;
    // Progress in the tooltip: the state's headline and detail.
    m_tooltip = v.tooltip;
    m_icon->setToolTip(m_tooltip);

    // An error that lasts needs the person; a short one heals itself.
    if (v.kind == StateKind::Error) {
        if (!m_errorSinceMs)
            m_errorSinceMs = now;
        if (!m_errorNotified && now - *m_errorSinceMs >= kErrorNoticeAfterMs) {
            m_errorNotified = true;
            notify(tr("Tandem needs your attention"), v.headline, QSystemTrayIcon::Warning);
        }
    } else {
        m_errorSinceMs.reset();
        m_errorNotified = false;
    }
    // A daily cap reached: once per day.
    if (s.state == core::EngineState::Waiting && s.hold &&
        (s.hold->rule == core::Rule::UploadCap || s.hold->rule == core::Rule::DownloadCap)) {
        const QString day =
            QString::fromStdString(core::toLocal(now, m_ctx.bridge->zone()).date.toString());
        if (m_capNotifiedDay != day) {
            m_capNotifiedDay = day;
            notify(tr("Daily data cap reached"),
                   tr("%1. Tandem continues tomorrow, or raise the cap in Settings.")
                       .arg(holdText(*s.hold, now, m_ctx.bridge->zone())));
        }
    }
}

void TrayController::onClosedToTray() {
    if (m_ctx.prefs && m_ctx.prefs->flag(QStringLiteral("notice/closedToTray")))
        return;
    if (m_ctx.prefs)
        m_ctx.prefs->setFlag(QStringLiteral("notice/closedToTray"));
    // The balloon tells the real state: working, paused, or waiting (and why).
    const StateView v = describeState(m_ctx.bridge->snapshot(), m_ctx.bridge->attached(),
                                      m_ctx.bridge->clock().nowMs(), m_ctx.bridge->zone());
    switch (v.kind) {
        case StateKind::Working:
            notify(tr("Tandem keeps working"),
                   tr("Tandem is still contributing in the background. Open it or quit it from "
                      "its icon in the tray."));
            break;
        case StateKind::Paused:
            notify(
                tr("Tandem is in the tray"),
                tr("%1. Resume, open or quit Tandem from its icon in the tray.").arg(v.headline));
            break;
        case StateKind::Waiting:
            notify(tr("Tandem is in the tray"),
                   tr("%1. Tandem goes on by itself; open it from its icon in the tray.")
                       .arg(v.headline));
            break;
        case StateKind::Error:
            notify(
                tr("Tandem is in the tray"),
                tr("%1. Open Tandem from its icon in the tray to see what to do.").arg(v.headline));
            break;
    }
}

void TrayController::onWorkUnitSettled(const QString& id, int state) {
    if (static_cast<core::WorkUnitState>(state) != core::WorkUnitState::Accepted)
        return;
    if (m_ctx.prefs && m_ctx.prefs->flag(QStringLiteral("notice/firstContribution")))
        return;
    if (m_ctx.prefs)
        m_ctx.prefs->setFlag(QStringLiteral("notice/firstContribution"));
    notify(tr("Your first contribution was accepted"),
           tr("Work unit %1 is now part of the shared model. Thank you!").arg(id));
}

void TrayController::notify(const QString& title, const QString& message,
                            QSystemTrayIcon::MessageIcon icon) {
    m_notices.push_back({title, message});
    emit notified(title, message);
    if (m_available && m_icon->isVisible())
        m_icon->showMessage(title, message, icon, 10000);
}

}  // namespace tandem::ui
