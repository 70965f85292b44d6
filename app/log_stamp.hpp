// The time stamp that starts every log line of tandem-worker and tandem-coordinator:
// UTC, ISO 8601, milliseconds ("2026-11-22T06:10:31.011Z").
#pragma once

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace tandem::app {

inline std::string logStamp() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const int ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
        1000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char seconds[32];
    std::strftime(seconds, sizeof seconds, "%Y-%m-%dT%H:%M:%S", &tm);
    char out[40];
    std::snprintf(out, sizeof out, "%s.%03dZ", seconds, ms);
    return out;
}

}  // namespace tandem::app
