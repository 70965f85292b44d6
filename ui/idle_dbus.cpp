#include "idle_dbus.hpp"

#include <QDBusConnection>
#include <QDBusMessage>
#include <QDBusReply>

namespace tandem::ui {

namespace {
std::optional<int64_t> callMs(const QString& service, const QString& path, const QString& iface,
                              const QString& method) {
    QDBusConnection bus = QDBusConnection::sessionBus();
    if (!bus.isConnected())
        return std::nullopt;
    QDBusMessage m = QDBusMessage::createMethodCall(service, path, iface, method);
    const QDBusMessage reply = bus.call(m, QDBus::Block, 500);
    if (reply.type() != QDBusMessage::ReplyMessage || reply.arguments().isEmpty())
        return std::nullopt;
    bool ok = false;
    const qulonglong ms = reply.arguments().front().toULongLong(&ok);
    if (!ok)
        return std::nullopt;
    return static_cast<int64_t>(ms);
}
}  // namespace

std::optional<int64_t> DBusIdleSource::query() {
    if (auto ms =
            callMs(QStringLiteral("org.gnome.Mutter.IdleMonitor"),
                   QStringLiteral("/org/gnome/Mutter/IdleMonitor/Core"),
                   QStringLiteral("org.gnome.Mutter.IdleMonitor"), QStringLiteral("GetIdletime")))
        return *ms / 1000;
    if (auto ms = callMs(QStringLiteral("org.freedesktop.ScreenSaver"),
                         QStringLiteral("/org/freedesktop/ScreenSaver"),
                         QStringLiteral("org.freedesktop.ScreenSaver"),
                         QStringLiteral("GetSessionIdleTime")))
        return *ms / 1000;
    return std::nullopt;
}

std::optional<int64_t> DBusIdleSource::idleSeconds() {
    std::lock_guard lock(m_mutex);
    const auto now = std::chrono::steady_clock::now();
    // Ask at most every 2 s; after repeated failures (no such service) every 5 minutes.
    const auto every = m_failures >= 3 ? std::chrono::seconds(300) : std::chrono::seconds(2);
    if (!m_asked || now - m_askedAt >= every) {
        m_asked = true;
        m_askedAt = now;
        m_last = query();
        m_failures = m_last ? 0 : m_failures + 1;
    }
    return m_last;
}

}  // namespace tandem::ui
