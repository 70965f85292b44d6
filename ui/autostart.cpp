#include "autostart.hpp"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>
#include <QStandardPaths>

#include <algorithm>

namespace tandem::ui::autostart {

namespace {
// The context lupdate gives these calls (the enclosing namespace or class); see ui/translations.
QString tr(const char* text) {
    return QCoreApplication::translate("tandem::ui::autostart", text);
}
}  // namespace

QString execArgument(const QString& argument) {
    QString out = argument;
    out.replace(QLatin1Char('%'), QStringLiteral("%%"));
    static const QString kReserved = QStringLiteral(" \t\n\"'\\><~|&;$*?#()`");
    const bool quote = out.isEmpty() || std::any_of(out.begin(), out.end(),
                                                    [](QChar c) { return kReserved.contains(c); });
    if (!quote)
        return out;
    QString quoted;
    for (const QChar c : out) {
        // Inside quotes '"', '`', '$' and '\' take a backslash; the desktop file's own string
        // escaping doubles every backslash once more.
        if (c == QLatin1Char('\\'))
            quoted += QStringLiteral("\\\\\\\\");
        else if (c == QLatin1Char('"') || c == QLatin1Char('`') || c == QLatin1Char('$'))
            quoted += QStringLiteral("\\\\") + c;
        else
            quoted += c;
    }
    return QLatin1Char('"') + quoted + QLatin1Char('"');
}

#if defined(Q_OS_LINUX) || defined(Q_OS_FREEBSD)

bool supported() {
    return true;
}
QString unsupportedReason() {
    return {};
}

QString entryPath() {
    QString config = qEnvironmentVariable("XDG_CONFIG_HOME");
    if (config.isEmpty())
        config = QDir::homePath() + QStringLiteral("/.config");
    return config + QStringLiteral("/autostart/tandem.desktop");
}

bool enabled() {
    QFile f(entryPath());
    if (!f.open(QIODevice::ReadOnly))
        return false;
    // A user may switch an entry off in the desktop's settings instead of deleting it.
    const QByteArray text = f.readAll();
    return !text.contains("Hidden=true") && !text.contains("X-GNOME-Autostart-enabled=false");
}

bool setEnabled(bool on, const QString& program, const QStringList& arguments, QString* error) {
    const QString path = entryPath();
    if (!on) {
        if (QFile::exists(path) && !QFile::remove(path)) {
            if (error)
                *error = tr("Cannot remove %1.").arg(path);
            return false;
        }
        return true;
    }
    if (!QDir().mkpath(QFileInfo(path).absolutePath())) {
        if (error)
            *error = tr("Cannot create the folder %1.").arg(QFileInfo(path).absolutePath());
        return false;
    }
    QStringList exec{execArgument(program)};
    for (const QString& a : arguments)
        exec << execArgument(a);
    const QString text = QStringLiteral(
                             "[Desktop Entry]\n"
                             "Type=Application\n"
                             "Name=Tandem\n"
                             "Comment=Start Tandem in the tray at login\n"
                             "Exec=%1 --background\n"
                             "Icon=tandem\n"
                             "Terminal=false\n"
                             "NoDisplay=true\n"
                             "X-GNOME-Autostart-enabled=true\n")
                             .arg(exec.join(QLatin1Char(' ')));
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(text.toUtf8()) < 0 || !f.commit()) {
        if (error)
            *error = tr("Cannot write %1: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

#else  // Windows, macOS: not implemented yet

bool supported() {
    return false;
}
QString unsupportedReason() {
#if defined(Q_OS_WIN)
    return tr("Start at login is not supported on Windows yet.");
#elif defined(Q_OS_MACOS)
    return tr("Start at login is not supported on macOS yet.");
#else
    return tr("Start at login is not supported on this platform.");
#endif
}
QString entryPath() {
    return {};
}
bool enabled() {
    return false;
}
bool setEnabled(bool, const QString&, const QStringList&, QString* error) {
    if (error)
        *error = unsupportedReason();
    return false;
}

#endif

}  // namespace tandem::ui::autostart
