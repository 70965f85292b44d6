// The typed settings of the worker and the app, stored as settings.json in the data directory.
// Parsing checks the JSON's shape and types; validate() checks the values and says, for each
// bad one, what was found and what was expected. Keys this build does not know are kept and
// written back (a newer Tandem's settings survive a round trip through an older one) and are
// reported as warnings.
#pragma once

#include "expected.hpp"
#include "rules.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::core {

inline constexpr const char* kSettingsFileName = "settings.json";

struct Settings {
    static constexpr int kVersion = 1;

    std::string device = "auto";            // "auto", "cpu" or "cuda:N"
    RulesConfig rules;                      // idle, battery, time windows, temperature, daily caps
    int64_t uploadLimitBytesPerSecond = 0;  // 0: unlimited
    int64_t downloadLimitBytesPerSecond = 0;
    // "" takes the proxy from the environment (https_proxy, all_proxy, no_proxy), "direct" uses
    // none, otherwise scheme://[user:password@]host[:port] with scheme http, https, socks4,
    // socks4a, socks5 or socks5h.
    std::string proxy;
    std::string dataDirectory;    // absolute; "" is the platform default
    std::string coordinatorUrl;   // https://host[:port][/path]; "" until the user chooses one
    std::string caFile;           // absolute path to a PEM bundle; "" uses the system store
    std::string pinnedPublicKey;  // "sha256//<base64 of 32 bytes>"; exclusive with caFile
    std::string registerSecret;   // sent when registering (coordinator --register-secret); "" none
    bool startAtLogin = false;
    // The donor's public display name and team on the coordinator's leaderboard and run page
    // (net/donor_profile.hpp); "" for none (anonymous, no team).
    std::string displayName;
    std::string team;
    // What a kWh costs the donor, in their own currency, for the cost estimate; 0: not given.
    double energyPricePerKwh = 0;

    // Keys this build does not know, by dotted path ("rules.foo"), as JSON text.
    std::map<std::string, std::string> unknownKeys;

    bool operator==(const Settings&) const = default;
};

struct SettingsIssue {
    std::string key;  // dotted JSON path, e.g. "rules.idleThresholdSeconds"
    std::string message;
};

// Every invalid value, in a fixed order; empty when the settings are usable.
std::vector<SettingsIssue> validate(const Settings& settings);
// The issues as one Status ("settings: a; b").
Status validateSettings(const Settings& settings);

struct LoadedSettings {
    Settings settings;
    std::vector<std::string> warnings;  // unknown keys, newer version
};

// JSON text to Settings; missing keys take their defaults. Wrong types and malformed values
// (a time that is not HH:MM, a weekday that is not mon..sun) are errors; values are not validated.
Expected<LoadedSettings> parseSettings(std::string_view json);
std::string serializeSettings(const Settings& settings);

// Reads and validates settings.json; a missing file gives the defaults.
Expected<LoadedSettings> loadSettings(const std::filesystem::path& file);
// Validates, then writes atomically (temp file, fsync, rename). Invalid settings are not written.
Status saveSettings(const std::filesystem::path& file, const Settings& settings);

// "18:05" to a minute of the day (formatMinuteOfDay in clock.hpp goes back).
Expected<int> parseTimeOfDay(std::string_view text);

}  // namespace tandem::core
