// "Start at login" behind a small platform layer. Linux: an XDG autostart entry,
// $XDG_CONFIG_HOME/autostart/tandem.desktop (~/.config/autostart), copied from the packaged
// entry when there is one. Windows (HKCU Run key) and macOS (a LaunchAgent or SMAppService) are
// not implemented yet: supported() is false and unsupportedReason() says so.
#pragma once

#include <QString>

namespace tandem::ui::autostart {

bool supported();
QString unsupportedReason();  // empty where supported
// The autostart entry's path (Linux).
QString entryPath();
bool enabled();
// Writes or removes the entry. program: the executable to start (with --background).
bool setEnabled(bool on, const QString& program, QString* error);

}  // namespace tandem::ui::autostart
