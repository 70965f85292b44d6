#include "clock.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace tandem::core {

int64_t SystemClock::nowMs() const {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

int32_t SystemTimeZone::utcOffsetSecondsAt(int64_t unixSeconds) const {
    const time_t t = static_cast<time_t>(unixSeconds);
    std::tm local{};
    if (localtime_r(&t, &local) == nullptr)
        return 0;
    return static_cast<int32_t>(local.tm_gmtoff);
}

// Howard Hinnant's days_from_civil / civil_from_days.
int64_t LocalDate::daysSinceEpoch() const {
    const int64_t y = static_cast<int64_t>(year) - (month <= 2 ? 1 : 0);
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t mp = (month + 9) % 12;
    const int64_t doy = (153 * mp + 2) / 5 + day - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

LocalDate LocalDate::fromDaysSinceEpoch(int64_t days) {
    const int64_t z = days + 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    const int64_t d = doy - (153 * mp + 2) / 5 + 1;
    const int64_t m = mp < 10 ? mp + 3 : mp - 9;
    const int64_t y = yoe + era * 400 + (m <= 2 ? 1 : 0);
    return LocalDate{static_cast<int>(y), static_cast<int>(m), static_cast<int>(d)};
}

int LocalDate::weekday() const {
    // 1970-01-01 was a Thursday (3 when Monday is 0).
    const int64_t w = (daysSinceEpoch() + 3) % 7;
    return static_cast<int>(w < 0 ? w + 7 : w);
}

std::string LocalDate::toString() const {
    char text[32];
    std::snprintf(text, sizeof text, "%04d-%02d-%02d", year, month, day);
    return text;
}

namespace {

int64_t floorDiv(int64_t a, int64_t b) {
    const int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t localSecondsAt(int64_t unixSeconds, const TimeZone& zone) {
    return unixSeconds + zone.utcOffsetSecondsAt(unixSeconds);
}

}  // namespace

LocalDateTime toLocal(int64_t unixMs, const TimeZone& zone) {
    const int64_t unixSeconds = floorDiv(unixMs, 1000);
    const int64_t local = localSecondsAt(unixSeconds, zone);
    const int64_t days = floorDiv(local, 86400);
    const int64_t secondOfDay = local - days * 86400;
    LocalDateTime out;
    out.date = LocalDate::fromDaysSinceEpoch(days);
    out.minuteOfDay = static_cast<int>(secondOfDay / 60);
    out.second = static_cast<int>(secondOfDay % 60);
    return out;
}

int64_t fromLocal(const LocalDate& date, int minuteOfDay, const TimeZone& zone) {
    const int64_t target = date.daysSinceEpoch() * 86400 + int64_t{minuteOfDay} * 60;
    // Offsets a day either side; assumes at most one switch within two days, true of real zones.
    const int64_t offsetBefore = zone.utcOffsetSecondsAt(target - 86400);
    const int64_t offsetAfter = zone.utcOffsetSecondsAt(target + 86400);
    int64_t best = INT64_MAX;
    for (int64_t offset : {offsetBefore, offsetAfter}) {
        const int64_t t = target - offset;
        if (zone.utcOffsetSecondsAt(t) == offset)
            best = std::min(best, t);
    }
    if (best == INT64_MAX) {
        // The wall time falls into a gap: find the first instant whose local reading passes it.
        int64_t lo = target - std::max(offsetBefore, offsetAfter);
        int64_t hi = target - std::min(offsetBefore, offsetAfter);
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (localSecondsAt(mid, zone) >= target) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        best = lo;
    }
    return best * 1000;
}

std::string formatMinuteOfDay(int minuteOfDay) {
    char text[16];
    std::snprintf(text, sizeof text, "%02d:%02d", minuteOfDay / 60, minuteOfDay % 60);
    return text;
}

}  // namespace tandem::core
