// The engine's codes in words, translated: the rule that holds (core/rules.hpp Hold), what the
// engine does next (core/next_action.hpp) and when something happens, in the locale's formats.
// core/ hands over codes with figures; its English texts are for the log and tandem-worker, and
// never reach the window.
#pragma once

#include "next_action.hpp"
#include "rules.hpp"

#include <QString>

#include <cstdint>

namespace tandem::ui {

// Why a rule holds, to follow "Waiting: ": "on battery", "outside the time window (resumes
// tomorrow at 08:00)", "today's upload cap is reached (1.0 GB of 1.0 GB; resets at midnight)".
QString holdReason(const core::Hold& hold, int64_t nowMs, const core::TimeZone& zone);
// "Waiting: " + holdReason.
QString holdText(const core::Hold& hold, int64_t nowMs, const core::TimeZone& zone);
// "try again at 14:06", "send work unit 17 after step 40", ...; empty for NextStep::None.
QString nextActionText(const core::NextAction& next, int64_t nowMs, const core::TimeZone& zone);

// An instant as a phrase after a verb: "at 18:00" (today), "at midnight" (the coming one),
// "tomorrow at 08:00", "yesterday at 08:00", "on Saturday at 18:00" (within the week), else
// "on 30/11/2026 at 18:00"; time and date in the locale's formats.
QString formatAt(int64_t atMs, int64_t nowMs, const core::TimeZone& zone);
// The same after "until": "18:00", "midnight", "tomorrow 08:00", "Saturday 18:00".
QString formatUntil(int64_t atMs, int64_t nowMs, const core::TimeZone& zone);
// A local minute of the day in the locale's short time format ("18:05", "6:05 PM"; "18:05" in
// the C locale, whose short format has seconds).
QString formatClock(int minuteOfDay);
// A day of the year in the locale's short date format without the year: "22.11" (German),
// "11/22" (US English), "22/11" (British English), "22 Nov" (C).
QString formatDayMonth(const core::LocalDate& date);
// The format of a chart's time axis (QDateTimeAxis) in the locale's short time format: "HH:mm",
// "h:mm AP"; withDay: the weekday's short name first.
QString axisTimeFormat(bool withDay);
// A temperature in the locale's number format: "85 °C".
QString formatCelsius(double celsius);

}  // namespace tandem::ui
