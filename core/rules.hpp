// The scheduling rules: pure functions from a configuration and the current inputs (time, idle
// time, power source, temperature, bytes moved today) to a verdict: free to work, or held back by
// one or more rules, each with a reason for the UI and, where known, when it may change.
// Nothing here reads the clock or the system; the engine passes everything in.
#pragma once

#include "clock.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::core {

enum class PowerSource { Unknown, Mains, Battery };
const char* toString(PowerSource source);

// A window of allowed time that starts on the chosen weekdays. An end at or before the start
// means the window runs past midnight into the next day (Mon-Fri 18:00-08:00 covers Monday 18:00
// to Tuesday 08:00 ... Friday 18:00 to Saturday 08:00); start == end means 24 hours.
struct TimeWindow {
    static constexpr uint8_t kEveryDay = 0x7f;
    static constexpr uint8_t kWeekdays = 0x1f;  // Monday to Friday
    uint8_t weekdays = kEveryDay;               // bit 0 = Monday ... bit 6 = Sunday
    int startMinute = 0;                        // local minute of the day, 0..1439
    int endMinute = 0;                          // 0..1439

    bool operator==(const TimeWindow&) const = default;
};

struct RulesConfig {
    bool onlyWhenIdle = false;
    int64_t idleThresholdSeconds = 300;
    bool pauseOnBattery = true;
    bool useTimeWindows = false;
    std::vector<TimeWindow> timeWindows;
    std::optional<double> maxTemperatureC;  // none: no limit
    double temperatureHysteresisC = 5;      // once held, resume at max - hysteresis
    int64_t dailyUploadCapBytes = 0;        // 0: no cap
    int64_t dailyDownloadCapBytes = 0;      // 0: no cap

    bool operator==(const RulesConfig&) const = default;
};

struct RuleInputs {
    int64_t nowMs = 0;
    std::optional<int64_t> idleSeconds;  // none: unknown; "only when idle" then holds (IdleUnknown)
    PowerSource power = PowerSource::Unknown;
    std::optional<double> temperatureC;  // none: the device reports no temperature
    bool heldByTemperature = false;      // the previous verdict held for temperature
    int64_t bytesUpToday = 0;
    int64_t bytesDownToday = 0;
    int64_t nextUploadBytes = 0;  // what the next work unit will move, where known
    int64_t nextDownloadBytes = 0;
};

// In priority order: the first that holds is the one the UI shows.
enum class Rule {
    OnBattery,
    OutsideTimeWindow,
    UserActive,
    IdleUnknown,  // "only when idle" is on and the idle time cannot be told: no work
    TooHot,
    UploadCap,
    DownloadCap,
};

// A rule that holds, as a code with the figures its words need: the UI words and translates it
// (ui/engine_words.hpp); `reason` is the English for the log and tandem-worker's status.
struct Hold {
    Rule rule = Rule::OnBattery;
    std::string reason;                    // "Waiting: on battery"
    std::optional<int64_t> mayChangeAtMs;  // earliest instant it may stop holding, where known
    bool noTimeWindow = false;             // OutsideTimeWindow: the rule is on without a window
    int64_t idleThresholdSeconds = 0;      // UserActive
    double temperatureC = 0;               // TooHot: the reading
    double limitC = 0;                     // TooHot: the limit, or where it resumes when cooling
    bool coolingDown = false;              // TooHot: under the limit, not yet cool enough
    int64_t usedBytes = 0, capBytes = 0;   // UploadCap, DownloadCap: today's bytes and the cap
    bool capReached = false;               // false: the next transfer would exceed the cap

    bool operator==(const Hold&) const = default;
};

struct RulesVerdict {
    std::vector<Hold> holds;  // in priority order; empty: free to work
    // While free: the next instant a rule will start holding by the clock alone (a time window
    // closing, the day's cap resetting does not count); none when no such instant.
    std::optional<int64_t> freeUntilMs;
    // A temperature limit is set but the device reports no temperature: the limit cannot be
    // applied (the UI says so; work goes on).
    bool temperatureUnknown = false;

    bool allowed() const { return holds.empty(); }
    std::string reason() const { return holds.empty() ? std::string() : holds.front().reason; }
};

RulesVerdict evaluateRules(const RulesConfig& config, const RuleInputs& inputs,
                           const TimeZone& zone);

// Whether nowMs lies in one of the windows.
bool insideTimeWindows(const std::vector<TimeWindow>& windows, int64_t nowMs, const TimeZone& zone);
// The next start of a window after nowMs (within a week); none without windows.
std::optional<int64_t> nextWindowStartMs(const std::vector<TimeWindow>& windows, int64_t nowMs,
                                         const TimeZone& zone);
// Where the union of windows containing nowMs ends; none when outside or covered for good.
std::optional<int64_t> windowCoverageEndMs(const std::vector<TimeWindow>& windows, int64_t nowMs,
                                           const TimeZone& zone);

enum class Snooze { OneHour, ThreeHours, UntilTomorrow };
// When a snooze chosen at nowMs ends: 1 h or 3 h of real time, or the next local midnight.
int64_t snoozeUntilMs(Snooze choice, int64_t nowMs, const TimeZone& zone);

// When atMs is, seen from nowMs, as a phrase that follows "resumes" or "retry": "at 18:00"
// today, "at midnight" (the coming one), "tomorrow at 18:00", "yesterday at 18:00",
// "on Saturday at 18:00" within the week, else "on 2026-11-30 at 18:00". English, for the log
// and tandem-worker; the UI has its translated twin (ui/engine_words.hpp).
std::string describeLocalTime(int64_t atMs, int64_t nowMs, const TimeZone& zone);
// "0 B", "812 kB", "1.5 GB" (decimal units, as the caps are set).
std::string formatBytes(int64_t bytes);

}  // namespace tandem::core
