// What every window and page of the app is given (no globals): the engine bridge, the outside
// services, and the current settings with the file they live in.
#pragma once

#include "settings.hpp"

#include <QString>
#include <QStringList>

#include <filesystem>
#include <functional>

namespace tandem::ui {

class EngineBridge;
class Services;
class UiPrefs;

struct UiContext {
    EngineBridge* bridge = nullptr;
    Services* services = nullptr;        // may be null: what needs it says so
    core::Settings* settings = nullptr;  // the settings in force (app/ owns them)
    std::filesystem::path settingsFile;  // where the settings dialog saves them
    UiPrefs* prefs = nullptr;            // one-time notices, last bandwidth measurement
    // The directory this app runs from (--data-dir, $TANDEM_DATA_DIR or the default): where
    // settings.json lives, and the work too unless the settings name another.
    std::filesystem::path dataDirectory;
    // The options to start with again at login (--data-dir DIR, --ca-file FILE, ...).
    QStringList launchArguments;
    // Why the idle time cannot be known here (DBusIdleSource::unknownReason); empty when it is
    // known. Unset: known. Shown where "only when idle" is on, since the rule cannot hold then.
    std::function<QString()> idleUnknownReason;
};

}  // namespace tandem::ui
