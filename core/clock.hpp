// Time as the engine sees it: an injectable clock (Unix milliseconds, UTC) and an injectable time
// zone, so rules, snooze and per-day ledger queries are testable with fixed instants and zones.
// Nothing in core/ reads the system clock except SystemClock.
#pragma once

#include <cstdint>
#include <string>

namespace tandem::core {

class Clock {
  public:
    virtual ~Clock() = default;
    virtual int64_t nowMs() const = 0;  // Unix time in milliseconds
};

class SystemClock final : public Clock {
  public:
    int64_t nowMs() const override;
};

// A clock a test sets and advances by hand.
class ManualClock final : public Clock {
  public:
    explicit ManualClock(int64_t nowMs = 0) : m_nowMs(nowMs) {}
    int64_t nowMs() const override { return m_nowMs; }
    void setMs(int64_t nowMs) { m_nowMs = nowMs; }
    void advanceMs(int64_t deltaMs) { m_nowMs += deltaMs; }

  private:
    int64_t m_nowMs;
};

// Maps an instant to the local wall clock. Offsets may change over time (daylight saving), so
// local days can be 23 or 25 hours long.
class TimeZone {
  public:
    virtual ~TimeZone() = default;
    // Seconds to add to UTC to get local time at the given instant.
    virtual int32_t utcOffsetSecondsAt(int64_t unixSeconds) const = 0;
};

// The zone the process runs in (TZ, /etc/localtime), through localtime_r.
class SystemTimeZone final : public TimeZone {
  public:
    int32_t utcOffsetSecondsAt(int64_t unixSeconds) const override;
};

class FixedOffsetTimeZone final : public TimeZone {
  public:
    explicit FixedOffsetTimeZone(int32_t offsetSeconds) : m_offsetSeconds(offsetSeconds) {}
    int32_t utcOffsetSecondsAt(int64_t) const override { return m_offsetSeconds; }

  private:
    int32_t m_offsetSeconds;
};

// Two offsets with one switch instant: enough to test days that are not 24 hours long.
class SwitchingTimeZone final : public TimeZone {
  public:
    SwitchingTimeZone(int32_t offsetBeforeSeconds, int64_t switchUnixSeconds,
                      int32_t offsetAfterSeconds)
        : m_before(offsetBeforeSeconds), m_switch(switchUnixSeconds), m_after(offsetAfterSeconds) {}
    int32_t utcOffsetSecondsAt(int64_t unixSeconds) const override {
        return unixSeconds < m_switch ? m_before : m_after;
    }

  private:
    int32_t m_before;
    int64_t m_switch;
    int32_t m_after;
};

// A calendar date in the proleptic Gregorian calendar.
struct LocalDate {
    int year = 1970;
    int month = 1;  // 1..12
    int day = 1;    // 1..31

    auto operator<=>(const LocalDate&) const = default;
    // Days since 1970-01-01 (negative before).
    int64_t daysSinceEpoch() const;
    static LocalDate fromDaysSinceEpoch(int64_t days);
    LocalDate plusDays(int64_t days) const { return fromDaysSinceEpoch(daysSinceEpoch() + days); }
    // 0 = Monday ... 6 = Sunday.
    int weekday() const;
    std::string toString() const;  // YYYY-MM-DD
};

// The local wall-clock reading of an instant.
struct LocalDateTime {
    LocalDate date;
    int minuteOfDay = 0;  // 0..1439
    int second = 0;       // 0..59
};

LocalDateTime toLocal(int64_t unixMs, const TimeZone& zone);
// The first instant (Unix ms) whose local reading is at or after date + minuteOfDay. Around a
// forward daylight-saving jump a wall time that does not exist maps to the end of the gap.
int64_t fromLocal(const LocalDate& date, int minuteOfDay, const TimeZone& zone);
// Local midnight starting the given date.
inline int64_t startOfLocalDay(const LocalDate& date, const TimeZone& zone) {
    return fromLocal(date, 0, zone);
}
// "HH:MM" for a minute of the day.
std::string formatMinuteOfDay(int minuteOfDay);

}  // namespace tandem::core
