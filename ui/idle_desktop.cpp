#include "idle_desktop.hpp"

namespace tandem::ui {

std::optional<int64_t> DesktopIdleSource::idleSeconds() {
    if (auto seconds = m_dbus.idleSeconds())
        return seconds;
#ifdef TANDEM_X11_IDLE
    return m_x11.idleSeconds();
#else
    return std::nullopt;
#endif
}

QString DesktopIdleSource::unknownReason() const {
    const QString dbus = m_dbus.unknownReason();
#ifdef TANDEM_X11_IDLE
    const QString x11 = m_x11.unknownReason();
    if (dbus.isEmpty() || x11.isEmpty())
        return {};  // one of them knows (or has not been asked yet)
    return dbus + QStringLiteral("; ") + x11;
#else
    return dbus;
#endif
}

}  // namespace tandem::ui
