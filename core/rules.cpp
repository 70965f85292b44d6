#include "rules.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace tandem::core {

const char* toString(PowerSource source) {
    switch (source) {
        case PowerSource::Mains:
            return "mains";
        case PowerSource::Battery:
            return "battery";
        case PowerSource::Unknown:
            return "unknown";
    }
    return "unknown";
}

namespace {

constexpr std::array<const char*, 7> kDayNames{"Monday", "Tuesday",  "Wednesday", "Thursday",
                                               "Friday", "Saturday", "Sunday"};

struct Interval {
    int64_t startMs;
    int64_t endMs;
};

// The instance of a window that starts on the given local date (if the weekday is chosen).
std::optional<Interval> instanceOn(const TimeWindow& w, const LocalDate& date,
                                   const TimeZone& zone) {
    if ((w.weekdays & (1u << date.weekday())) == 0)
        return std::nullopt;
    const int64_t start = fromLocal(date, w.startMinute, zone);
    const LocalDate endDate = w.endMinute <= w.startMinute ? date.plusDays(1) : date;
    return Interval{start, fromLocal(endDate, w.endMinute, zone)};
}

Hold makeHold(Rule rule, std::string reason, std::optional<int64_t> mayChangeAtMs = std::nullopt) {
    Hold h;
    h.rule = rule;
    h.reason = std::move(reason);
    h.mayChangeAtMs = mayChangeAtMs;
    return h;
}

std::string formatTemperature(double c) {
    char text[32];
    std::snprintf(text, sizeof text, "%.0f °C", c);
    return text;
}

}  // namespace

bool insideTimeWindows(const std::vector<TimeWindow>& windows, int64_t nowMs,
                       const TimeZone& zone) {
    const LocalDate today = toLocal(nowMs, zone).date;
    for (const TimeWindow& w : windows) {
        for (int back = 1; back >= 0; --back) {
            auto i = instanceOn(w, today.plusDays(-back), zone);
            if (i && i->startMs <= nowMs && nowMs < i->endMs)
                return true;
        }
    }
    return false;
}

std::optional<int64_t> nextWindowStartMs(const std::vector<TimeWindow>& windows, int64_t nowMs,
                                         const TimeZone& zone) {
    const LocalDate today = toLocal(nowMs, zone).date;
    std::optional<int64_t> best;
    for (int d = 0; d <= 8; ++d) {
        for (const TimeWindow& w : windows) {
            auto i = instanceOn(w, today.plusDays(d), zone);
            if (i && i->startMs > nowMs && (!best || i->startMs < *best))
                best = i->startMs;
        }
    }
    return best;
}

std::optional<int64_t> windowCoverageEndMs(const std::vector<TimeWindow>& windows, int64_t nowMs,
                                           const TimeZone& zone) {
    const LocalDate today = toLocal(nowMs, zone).date;
    std::vector<Interval> all;
    for (int d = -1; d <= 9; ++d) {
        for (const TimeWindow& w : windows) {
            if (auto i = instanceOn(w, today.plusDays(d), zone))
                all.push_back(*i);
        }
    }
    std::sort(all.begin(), all.end(),
              [](const Interval& x, const Interval& y) { return x.startMs < y.startMs; });
    std::vector<Interval> merged;
    for (const Interval& i : all) {
        if (merged.empty() || i.startMs > merged.back().endMs) {
            merged.push_back(i);
        } else {
            merged.back().endMs = std::max(merged.back().endMs, i.endMs);
        }
    }
    // Covered past the whole horizon looked at: treat as never ending.
    const int64_t horizonMs = fromLocal(today.plusDays(9), 0, zone);
    for (const Interval& m : merged) {
        if (m.startMs <= nowMs && nowMs < m.endMs) {
            if (m.endMs >= horizonMs)
                return std::nullopt;
            return m.endMs;
        }
    }
    return std::nullopt;
}

std::string describeLocalTime(int64_t atMs, int64_t nowMs, const TimeZone& zone) {
    const LocalDateTime at = toLocal(atMs, zone);
    const LocalDate today = toLocal(nowMs, zone).date;
    const std::string hhmm = formatMinuteOfDay(at.minuteOfDay);
    const int64_t days = at.date.daysSinceEpoch() - today.daysSinceEpoch();
    if (days == 0)
        return "at " + hhmm;
    if (days == 1 && at.minuteOfDay == 0)
        return "at midnight";
    if (days == 1)
        return "tomorrow at " + hhmm;
    if (days == -1)
        return "yesterday at " + hhmm;
    if (days > 1 && days < 7)
        return "on " + std::string(kDayNames[at.date.weekday()]) + " at " + hhmm;
    return "on " + at.date.toString() + " at " + hhmm;
}

std::string formatBytes(int64_t bytes) {
    static constexpr std::array<const char*, 5> kUnits{"kB", "MB", "GB", "TB", "PB"};
    if (bytes < 1000)
        return std::to_string(bytes) + " B";
    double value = static_cast<double>(bytes);
    size_t unit = 0;
    value /= 1000;
    while (value >= 999.95 && unit + 1 < kUnits.size()) {
        value /= 1000;
        ++unit;
    }
    char text[32];
    if (value < 10) {
        std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
    } else {
        std::snprintf(text, sizeof text, "%.0f %s", value, kUnits[unit]);
    }
    return text;
}

RulesVerdict evaluateRules(const RulesConfig& c, const RuleInputs& in, const TimeZone& zone) {
    RulesVerdict v;
    const LocalDate today = toLocal(in.nowMs, zone).date;
    const int64_t midnightMs = fromLocal(today.plusDays(1), 0, zone);

    if (c.pauseOnBattery && in.power == PowerSource::Battery) {
        v.holds.push_back(makeHold(Rule::OnBattery, "Waiting: on battery"));
    }

    if (c.useTimeWindows) {
        if (c.timeWindows.empty()) {
            Hold h = makeHold(Rule::OutsideTimeWindow, "Waiting: no time window is set");
            h.noTimeWindow = true;
            v.holds.push_back(h);
        } else if (!insideTimeWindows(c.timeWindows, in.nowMs, zone)) {
            auto next = nextWindowStartMs(c.timeWindows, in.nowMs, zone);
            std::string reason = "Waiting: outside the time window";
            if (next)
                reason += " (resumes " + describeLocalTime(*next, in.nowMs, zone) + ")";
            v.holds.push_back(makeHold(Rule::OutsideTimeWindow, reason, next));
        } else {
            v.freeUntilMs = windowCoverageEndMs(c.timeWindows, in.nowMs, zone);
        }
    }

    // Unknown idle time holds: working as if idle would take the computer from its user.
    if (c.onlyWhenIdle && !in.idleSeconds) {
        v.holds.push_back(makeHold(Rule::IdleUnknown,
                                   "Waiting: cannot tell whether the computer is in use (\"only "
                                   "when idle\" is on)"));
    } else if (c.onlyWhenIdle && *in.idleSeconds < c.idleThresholdSeconds) {
        const int64_t minutes = (c.idleThresholdSeconds + 59) / 60;
        Hold h = makeHold(
            Rule::UserActive,
            "Waiting: computer in use (resumes after " + std::to_string(minutes) + " min idle)",
            in.nowMs + (c.idleThresholdSeconds - *in.idleSeconds) * 1000);
        h.idleThresholdSeconds = c.idleThresholdSeconds;
        v.holds.push_back(h);
    }

    v.temperatureUnknown = c.maxTemperatureC && !in.temperatureC;
    if (c.maxTemperatureC && in.temperatureC) {
        const double limit = *c.maxTemperatureC;
        const double resumeAt = limit - std::max(0.0, c.temperatureHysteresisC);
        const double t = *in.temperatureC;
        if (t >= limit) {
            Hold h = makeHold(Rule::TooHot, "Waiting: device too hot (" + formatTemperature(t) +
                                                ", limit " + formatTemperature(limit) + ")");
            h.temperatureC = t;
            h.limitC = limit;
            v.holds.push_back(h);
        } else if (in.heldByTemperature && t > resumeAt) {
            Hold h =
                makeHold(Rule::TooHot, "Waiting: device cooling down (" + formatTemperature(t) +
                                           ", resumes at " + formatTemperature(resumeAt) + ")");
            h.temperatureC = t;
            h.limitC = resumeAt;
            h.coolingDown = true;
            v.holds.push_back(h);
        }
    }

    auto capHold = [&](Rule rule, const char* what, int64_t cap, int64_t used, int64_t next) {
        if (cap <= 0)
            return;
        if (used >= cap || (next > 0 && used + next > cap)) {
            const bool reached = used >= cap;
            Hold h = makeHold(rule,
                              std::string("Waiting: daily ") + what + " cap " +
                                  (reached ? "reached" : "would be exceeded") + " (" +
                                  formatBytes(used) + " of " + formatBytes(cap) + " used; resets " +
                                  describeLocalTime(midnightMs, in.nowMs, zone) + ")",
                              midnightMs);
            h.usedBytes = used;
            h.capBytes = cap;
            h.capReached = reached;
            v.holds.push_back(h);
        }
    };
    capHold(Rule::UploadCap, "upload", c.dailyUploadCapBytes, in.bytesUpToday, in.nextUploadBytes);
    capHold(Rule::DownloadCap, "download", c.dailyDownloadCapBytes, in.bytesDownToday,
            in.nextDownloadBytes);

    if (!v.holds.empty())
        v.freeUntilMs.reset();
    return v;
}

int64_t snoozeUntilMs(Snooze choice, int64_t nowMs, const TimeZone& zone) {
    switch (choice) {
        case Snooze::OneHour:
            return nowMs + 3600 * 1000;
        case Snooze::ThreeHours:
            return nowMs + 3 * 3600 * 1000;
        case Snooze::UntilTomorrow:
            break;
    }
    return fromLocal(toLocal(nowMs, zone).date.plusDays(1), 0, zone);
}

}  // namespace tandem::core
