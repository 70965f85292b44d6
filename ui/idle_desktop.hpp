// The desktop app's idle time: the desktop session's answer on D-Bus (idle_dbus.hpp) where it
// gives one, else the X server's (idle_x11.hpp; Linux builds, TANDEM_X11_IDLE). When neither can
// tell, the answer is nullopt, core's "only when idle" rule holds all work, and unknownReason()
// says why for the Overview and the settings dialog.
#pragma once

#include "idle_dbus.hpp"
#ifdef TANDEM_X11_IDLE
#include "idle_x11.hpp"
#endif

namespace tandem::ui {

class DesktopIdleSource final : public core::IdleSource {
  public:
#ifdef TANDEM_X11_IDLE
    DesktopIdleSource() : m_x11(X11IdleSource::fromEnvironment()) {}
    // Tests: an X display of their own.
    DesktopIdleSource(QByteArray display, bool wayland) : m_x11(std::move(display), wayland) {}
#endif

    std::optional<int64_t> idleSeconds() override;  // any thread
    // Both sources' reasons ("...; ..."); empty while the idle time is known.
    QString unknownReason() const;

  private:
    DBusIdleSource m_dbus;
#ifdef TANDEM_X11_IDLE
    X11IdleSource m_x11;
#endif
};

}  // namespace tandem::ui
