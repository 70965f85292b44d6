#include "schedule_windows.hpp"

#include <QCoreApplication>

#include <algorithm>

namespace tandem::ui {

std::vector<core::TimeWindow> windowsFromDays(const std::array<std::vector<DayWindow>, 7>& days) {
    std::vector<core::TimeWindow> out;
    for (int d = 0; d < 7; ++d) {
        for (const DayWindow& w : days[d]) {
            // Days with the same hours share one window (Mon-Fri 18:00-08:00 stays one entry).
            auto same = std::find_if(out.begin(), out.end(), [&](const core::TimeWindow& o) {
                return o.startMinute == w.startMinute && o.endMinute == w.endMinute &&
                       (o.weekdays & (1u << d)) == 0;
            });
            if (same != out.end())
                same->weekdays = static_cast<uint8_t>(same->weekdays | (1u << d));
            else
                out.push_back({static_cast<uint8_t>(1u << d), w.startMinute, w.endMinute});
        }
    }
    return out;
}

std::array<std::vector<DayWindow>, 7> daysFromWindows(
    const std::vector<core::TimeWindow>& windows) {
    std::array<std::vector<DayWindow>, 7> days;
    for (const auto& w : windows)
        for (int d = 0; d < 7; ++d)
            if (w.weekdays & (1u << d))
                days[d].push_back({w.startMinute, w.endMinute});
    return days;
}

QString dayName(int weekday) {
    static const char* const kNames[] = {
        QT_TRANSLATE_NOOP("tandem::ui::SettingsDialog", "Monday"),
        QT_TRANSLATE_NOOP("tandem::ui::SettingsDialog", "Tuesday"),
        QT_TRANSLATE_NOOP("tandem::ui::SettingsDialog", "Wednesday"),
        QT_TRANSLATE_NOOP("tandem::ui::SettingsDialog", "Thursday"),
        QT_TRANSLATE_NOOP("tandem::ui::SettingsDialog", "Friday"),
        QT_TRANSLATE_NOOP("tandem::ui::SettingsDialog", "Saturday"),
        QT_TRANSLATE_NOOP("tandem::ui::SettingsDialog", "Sunday")};
    return QCoreApplication::translate("tandem::ui::SettingsDialog", kNames[weekday]);
}

QString hhmm(int minute) {
    return QStringLiteral("%1:%2")
        .arg(minute / 60, 2, 10, QLatin1Char('0'))
        .arg(minute % 60, 2, 10, QLatin1Char('0'));
}

QStringList windowOverlaps(const std::array<std::vector<DayWindow>, 7>& days) {
    // Each window as an arc on the week's circle of minutes: [start, start + length).
    constexpr int kWeek = 7 * 1440;
    struct Arc {
        int day, start, length;
        DayWindow w;
    };
    std::vector<Arc> arcs;
    for (int d = 0; d < 7; ++d)
        for (const DayWindow& w : days[d]) {
            const int length = w.endMinute > w.startMinute ? w.endMinute - w.startMinute
                                                           : 1440 - w.startMinute + w.endMinute;
            arcs.push_back({d, d * 1440 + w.startMinute, length, w});
        }
    auto inside = [](int from, int point, int length) {
        return ((point - from) % kWeek + kWeek) % kWeek < length;
    };
    QStringList out;
    for (size_t i = 0; i < arcs.size(); ++i)
        for (size_t j = i + 1; j < arcs.size(); ++j) {
            const Arc& a = arcs[i];
            const Arc& b = arcs[j];
            if (!inside(a.start, b.start, a.length) && !inside(b.start, a.start, b.length))
                continue;
            out << QCoreApplication::translate(
                       "tandem::ui::SettingsDialog",
                       "the time window %1 %2 to %3 overlaps %4 %5 to %6; expected windows "
                       "that do not overlap (join them into one, or change the times)")
                       .arg(dayName(a.day), hhmm(a.w.startMinute), hhmm(a.w.endMinute),
                            dayName(b.day), hhmm(b.w.startMinute), hhmm(b.w.endMinute));
        }
    return out;
}

}  // namespace tandem::ui
