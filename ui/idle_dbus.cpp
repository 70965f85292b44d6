#include "idle_dbus.hpp"

#include <QCoreApplication>
#include <QDBusConnection>
#include <QDBusConnectionInterface>
#include <QDBusMessage>

namespace tandem::ui {

int64_t screenSaverIdleSeconds(uint32_t answer, bool kdeScreenLocker) {
    return kdeScreenLocker ? static_cast<int64_t>(answer) / 1000 : static_cast<int64_t>(answer);
}

namespace {
// The context lupdate gives these calls (the enclosing namespace or class); see ui/translations.
QString tr(const char* text) {
    return QCoreApplication::translate("tandem::ui::DBusIdleSource", text);
}

struct Answer {
    std::optional<uint64_t> value;
    QString error;  // the D-Bus error when there is no value
};

Answer call(QDBusConnection& bus, const QString& service, const QString& path, const QString& iface,
            const QString& method) {
    QDBusMessage m = QDBusMessage::createMethodCall(service, path, iface, method);
    const QDBusMessage reply = bus.call(m, QDBus::Block, 500);
    if (reply.type() != QDBusMessage::ReplyMessage || reply.arguments().isEmpty())
        return {std::nullopt,
                reply.errorMessage().isEmpty() ? reply.errorName() : reply.errorMessage()};
    bool ok = false;
    const qulonglong v = reply.arguments().front().toULongLong(&ok);
    if (!ok)
        return {std::nullopt, QCoreApplication::translate("tandem::ui::DBusIdleSource",
                                                          "the answer is not a number")};
    return {static_cast<uint64_t>(v), {}};
}

bool hasOwner(QDBusConnection& bus, const QString& name) {
    QDBusConnectionInterface* iface = bus.interface();
    return iface && iface->isServiceRegistered(name).value();
}
}  // namespace

std::optional<int64_t> DBusIdleSource::query(QString* whyUnknown) {
    QDBusConnection bus = QDBusConnection::sessionBus();
    if (!bus.isConnected()) {
        *whyUnknown = tr("there is no D-Bus session bus to ask the desktop");
        return std::nullopt;
    }
    const QString mutter = QStringLiteral("org.gnome.Mutter.IdleMonitor");
    const QString saver = QStringLiteral("org.freedesktop.ScreenSaver");
    if (hasOwner(bus, mutter)) {
        const Answer a = call(bus, mutter, QStringLiteral("/org/gnome/Mutter/IdleMonitor/Core"),
                              mutter, QStringLiteral("GetIdletime"));
        if (a.value)
            return static_cast<int64_t>(*a.value / 1000);  // milliseconds
    }
    if (!hasOwner(bus, saver)) {
        *whyUnknown =
            tr("the desktop offers no idle time on the session bus (neither "
               "org.gnome.Mutter.IdleMonitor nor org.freedesktop.ScreenSaver)");
        return std::nullopt;
    }
    const Answer a = call(bus, saver, QStringLiteral("/org/freedesktop/ScreenSaver"), saver,
                          QStringLiteral("GetSessionIdleTime"));
    if (!a.value) {
        *whyUnknown =
            tr("org.freedesktop.ScreenSaver did not tell the idle time (%1)").arg(a.error);
        return std::nullopt;
    }
    const bool kde = hasOwner(bus, QStringLiteral("org.kde.screensaver"));
    return screenSaverIdleSeconds(static_cast<uint32_t>(*a.value), kde);
}

std::optional<int64_t> DBusIdleSource::idleSeconds() {
    std::unique_lock lock(m_mutex);
    const auto now = std::chrono::steady_clock::now();
    // Ask at most every 2 s; after repeated failures (no such service) every 5 minutes.
    const auto every = m_failures >= 3 ? std::chrono::seconds(300) : std::chrono::seconds(2);
    if (!m_asked || now - m_askedAt >= every) {
        m_asked = true;
        m_askedAt = now;
        QString why;
        m_last = query(&why);
        m_unknownReason = m_last ? QString() : why;
        m_failures = m_last ? 0 : m_failures + 1;
    }
    return m_last;
}

QString DBusIdleSource::unknownReason() const {
    std::lock_guard lock(m_mutex);
    return m_unknownReason;
}

}  // namespace tandem::ui
