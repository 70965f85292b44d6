#include "idle_x11.hpp"

#include <QCoreApplication>

#include <X11/Xlib.h>
#include <X11/extensions/scrnsaver.h>

namespace tandem::ui {

namespace {
// The context lupdate gives these calls (the enclosing namespace or class); see ui/translations.
QString tr(const char* text) {
    return QCoreApplication::translate("tandem::ui::X11IdleSource", text);
}
}  // namespace

X11IdleSource::X11IdleSource(QByteArray display, bool wayland)
    : m_displayName(std::move(display)), m_wayland(wayland) {}

X11IdleSource X11IdleSource::fromEnvironment() {
    const bool wayland = !qgetenv("WAYLAND_DISPLAY").isEmpty() ||
                         qgetenv("XDG_SESSION_TYPE").toLower() == QByteArrayLiteral("wayland");
    return X11IdleSource(qgetenv("DISPLAY"), wayland);
}

X11IdleSource::~X11IdleSource() {
    if (m_display)
        XCloseDisplay(static_cast<Display*>(m_display));
}

std::optional<int64_t> X11IdleSource::idleSeconds() {
    std::lock_guard lock(m_mutex);
    if (!m_tried) {
        m_tried = true;
        if (m_wayland) {
            m_unknownReason = tr("on Wayland the X server does not see all input");
        } else if (m_displayName.isEmpty()) {
            m_unknownReason = tr("there is no X display (DISPLAY is not set)");
        } else if (Display* d = XOpenDisplay(m_displayName.constData()); !d) {
            m_unknownReason =
                tr("the X display %1 cannot be opened").arg(QString::fromLocal8Bit(m_displayName));
        } else {
            int eventBase = 0, errorBase = 0;
            if (!XScreenSaverQueryExtension(d, &eventBase, &errorBase)) {
                m_unknownReason = tr("the X server has no MIT-SCREEN-SAVER extension");
                XCloseDisplay(d);
            } else {
                m_display = d;
            }
        }
    }
    if (!m_display)
        return std::nullopt;
    Display* d = static_cast<Display*>(m_display);
    XScreenSaverInfo info{};
    if (!XScreenSaverQueryInfo(d, DefaultRootWindow(d), &info)) {
        m_unknownReason = tr("the X server did not tell the idle time");
        return std::nullopt;
    }
    m_unknownReason.clear();
    return static_cast<int64_t>(info.idle / 1000);
}

QString X11IdleSource::unknownReason() const {
    std::lock_guard lock(m_mutex);
    return m_unknownReason;
}

}  // namespace tandem::ui
