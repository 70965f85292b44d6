// How long the person has been away from keyboard and mouse, asked of the X server through its
// MIT-SCREEN-SAVER extension (libXss: XScreenSaverQueryInfo, whose `idle` is the milliseconds
// since the last input the server saw). For X11 sessions whose desktop offers no idle time on
// D-Bus (most window managers other than GNOME's and KDE's). Not used on Wayland: there the X
// server (XWayland) sees only the input of X programs, so it would call a busy person idle.
// Without a display, or with a server lacking the extension, the answer is nullopt and
// unknownReason() says why.
#pragma once

#include "platform_probe.hpp"

#include <QByteArray>
#include <QString>

#include <cstdint>
#include <mutex>
#include <optional>

namespace tandem::ui {

class X11IdleSource final : public core::IdleSource {
  public:
    // display: an X display name (":0"; empty: none); wayland: the session is a Wayland one.
    X11IdleSource(QByteArray display, bool wayland);
    // From the environment: DISPLAY, and WAYLAND_DISPLAY or XDG_SESSION_TYPE=wayland.
    static X11IdleSource fromEnvironment();
    ~X11IdleSource() override;
    X11IdleSource(const X11IdleSource&) = delete;
    X11IdleSource& operator=(const X11IdleSource&) = delete;

    // Any thread (the engine asks from its own); the display is opened at the first question.
    std::optional<int64_t> idleSeconds() override;
    // Why the last question got no answer; empty while the idle time is known.
    QString unknownReason() const;

  private:
    QByteArray m_displayName;
    bool m_wayland = false;
    mutable std::mutex m_mutex;
    void* m_display = nullptr;  // Display*, kept out of this header (Xlib's macros)
    bool m_tried = false;       // opening was tried (once: a missing display stays missing)
    QString m_unknownReason;
};

}  // namespace tandem::ui
