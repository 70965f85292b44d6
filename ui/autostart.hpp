// "Start at login" behind a small platform layer. Linux: an XDG autostart entry,
// $XDG_CONFIG_HOME/autostart/tandem.desktop (~/.config/autostart), copied from the packaged
// entry when there is one. Windows (HKCU Run key) and macOS (a LaunchAgent or SMAppService) are
// not implemented yet: supported() is false and unsupportedReason() says so.
#pragma once

#include <QString>
#include <QStringList>

namespace tandem::ui::autostart {

bool supported();
QString unsupportedReason();  // empty where supported
// The autostart entry's path (Linux).
QString entryPath();
bool enabled();
// Writes or removes the entry. program: the executable to start, with arguments (the options
// it runs with now, --data-dir first of all) and --background.
bool setEnabled(bool on, const QString& program, const QStringList& arguments, QString* error);
// One argument as the Exec key of a desktop entry needs it: quoted where it holds a space or
// another reserved character, '%' doubled (Desktop Entry Specification, "The Exec key").
QString execArgument(const QString& argument);

}  // namespace tandem::ui::autostart
