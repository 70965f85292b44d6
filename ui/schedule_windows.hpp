// The schedule rule's time windows as the Settings dialog shows them: one row per window of each
// weekday, converted to and from core's windows, checked for overlaps, named in the user's words.
#pragma once

#include "rules.hpp"

#include <QString>
#include <QStringList>

#include <array>
#include <vector>

namespace tandem::ui {

// One time window of one weekday, in local minutes of the day (0..1439).
struct DayWindow {
    int startMinute = 0;
    int endMinute = 0;
    bool operator==(const DayWindow&) const = default;
};

// The per-weekday rows of the dialog to core time windows and back (start == end is the whole
// day; an end before the start runs past midnight). Days with the same hours share one core
// window, so Mon-Fri 18:00-08:00 stays one entry in settings.json.
std::vector<core::TimeWindow> windowsFromDays(const std::array<std::vector<DayWindow>, 7>& days);
std::array<std::vector<DayWindow>, 7> daysFromWindows(const std::vector<core::TimeWindow>& windows);
// Windows of the week that overlap (a window past midnight counts on the next morning too), one
// message per pair naming both; empty when none do.
QStringList windowOverlaps(const std::array<std::vector<DayWindow>, 7>& days);

QString dayName(int weekday);  // 0 = Monday, translated
QString hhmm(int minute);      // minute of the day as "HH:MM"

}  // namespace tandem::ui
