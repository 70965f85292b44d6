#include "engine_words.hpp"

#include "state_view.hpp"

#include <QCoreApplication>
#include <QDate>
#include <QLocale>
#include <QRegularExpression>
#include <QTime>

namespace tandem::ui {

namespace {
// The context lupdate gives these calls (the enclosing namespace or class); see ui/translations.
QString tr(const char* text) {
    return QCoreApplication::translate("tandem::ui", text);
}

QString dayName(const core::LocalDate& date) {
    return QLocale().dayName(date.weekday() + 1);  // Qt: 1 = Monday
}

QString shortDate(const core::LocalDate& date) {
    return QLocale().toString(QDate(date.year, date.month, date.day), QLocale::ShortFormat);
}

QString capReason(const core::Hold& h, const QString& resets) {
    const QString used = formatBytes(h.usedBytes), cap = formatBytes(h.capBytes);
    if (h.rule == core::Rule::UploadCap)
        return h.capReached
                   ? tr("today's upload cap is reached (%1 of %2; resets %3)")
                         .arg(used, cap, resets)
                   : tr("the next upload would pass today's cap (%1 of %2 used; resets %3)")
                         .arg(used, cap, resets);
    return h.capReached
               ? tr("today's download cap is reached (%1 of %2; resets %3)").arg(used, cap, resets)
               : tr("the next download would pass today's cap (%1 of %2 used; resets %3)")
                     .arg(used, cap, resets);
}
}  // namespace

QString formatClock(int minuteOfDay) {
    const QTime time(minuteOfDay / 60, minuteOfDay % 60);
    const QLocale locale;
    if (locale.language() == QLocale::C)
        return time.toString(QStringLiteral("HH:mm"));
    return locale.toString(time, QLocale::ShortFormat);
}

QString formatDayMonth(const core::LocalDate& date) {
    // The short date format less its year and the separator that joins it.
    static const QRegularExpression year(QStringLiteral("[^dM]*y+[^dM]*"));
    QString format = QLocale().dateFormat(QLocale::ShortFormat);
    format.remove(year);
    return QLocale().toString(QDate(date.year, date.month, date.day), format);
}

QString axisTimeFormat(bool withDay) {
    const QLocale locale;
    const QString time = locale.language() == QLocale::C ? QStringLiteral("HH:mm")
                                                         : locale.timeFormat(QLocale::ShortFormat);
    return withDay ? QStringLiteral("ddd ") + time : time;
}

QString formatCelsius(double celsius) {
    return QStringLiteral("%1 °C").arg(QLocale().toString(celsius, 'f', 0));
}

QString formatAt(int64_t atMs, int64_t nowMs, const core::TimeZone& zone) {
    const core::LocalDateTime at = core::toLocal(atMs, zone);
    const int64_t days =
        at.date.daysSinceEpoch() - core::toLocal(nowMs, zone).date.daysSinceEpoch();
    const QString clock = formatClock(at.minuteOfDay);
    if (days == 0)
        return tr("at %1").arg(clock);
    if (days == 1 && at.minuteOfDay == 0)
        return tr("at midnight");
    if (days == 1)
        return tr("tomorrow at %1").arg(clock);
    if (days == -1)
        return tr("yesterday at %1").arg(clock);
    if (days > 1 && days < 7)
        return tr("on %1 at %2").arg(dayName(at.date), clock);  // a weekday or a date
    return tr("on %1 at %2").arg(shortDate(at.date), clock);
}

QString formatUntil(int64_t atMs, int64_t nowMs, const core::TimeZone& zone) {
    const core::LocalDateTime at = core::toLocal(atMs, zone);
    const int64_t days =
        at.date.daysSinceEpoch() - core::toLocal(nowMs, zone).date.daysSinceEpoch();
    const QString clock = formatClock(at.minuteOfDay);
    if (days == 0)
        return clock;
    if (days == 1 && at.minuteOfDay == 0)
        return tr("midnight");
    if (days == 1)
        return tr("tomorrow %1").arg(clock);
    if (days > 1 && days < 7)
        return QStringLiteral("%1 %2").arg(dayName(at.date), clock);
    return QStringLiteral("%1 %2").arg(shortDate(at.date), clock);
}

QString holdReason(const core::Hold& h, int64_t nowMs, const core::TimeZone& zone) {
    using core::Rule;
    switch (h.rule) {
        case Rule::OnBattery:
            return tr("on battery");
        case Rule::OutsideTimeWindow:
            if (h.noTimeWindow)
                return tr("“Only at these times” is on, but no time is chosen");
            if (h.mayChangeAtMs)
                return tr("outside the chosen times (resumes %1)")
                    .arg(formatAt(*h.mayChangeAtMs, nowMs, zone));
            return tr("outside the chosen times");
        case Rule::UserActive:
            return tr("the computer is in use (resumes after %1 min idle)")
                .arg((h.idleThresholdSeconds + 59) / 60);
        case Rule::IdleUnknown:
            return tr("Tandem cannot tell whether the computer is in use");
        case Rule::TooHot:
            if (h.coolingDown)
                return tr("the device is cooling down (%1, resumes at %2)")
                    .arg(formatCelsius(h.temperatureC), formatCelsius(h.limitC));
            return tr("the device is too hot (%1, limit %2)")
                .arg(formatCelsius(h.temperatureC), formatCelsius(h.limitC));
        case Rule::UploadCap:
        case Rule::DownloadCap:
            return capReason(
                h, h.mayChangeAtMs ? formatAt(*h.mayChangeAtMs, nowMs, zone) : tr("at midnight"));
    }
    return {};
}

QString holdText(const core::Hold& hold, int64_t nowMs, const core::TimeZone& zone) {
    return tr("Waiting: %1").arg(holdReason(hold, nowMs, zone));
}

QString nextActionText(const core::NextAction& n, int64_t nowMs, const core::TimeZone& zone) {
    using core::NextStep;
    const QString at = n.atMs ? formatAt(*n.atMs, nowMs, zone) : tr("soon");
    const QString unit = QString::fromStdString(n.workUnitId);
    switch (n.step) {
        case NextStep::None:
            return {};
        case NextStep::Register:
            return tr("register with the training server");
        case NextStep::RequestWork:
            return tr("ask for a work unit");
        case NextStep::Train:
            return tr("train work unit %1").arg(unit);
        case NextStep::Upload:
            return tr("send work unit %1 after step %2").arg(unit).arg(n.afterStep);
        case NextStep::StopAfterUploads:
            return tr("stop once the results are sent");
        case NextStep::NextUnitAfterUpload:
            return tr("the next work unit once the results are sent");
        case NextStep::ResumeByHand:
            return tr("resume to continue");
        case NextStep::ResumeAt:
            return tr("resumes %1").arg(at);
        case NextStep::CheckRulesAt:
            return tr("check again %1").arg(at);
        case NextStep::CheckRulesOnChange:
            return tr("check again when that changes");
        case NextStep::TryAgainAt:
            return tr("try again %1").arg(at);
        case NextStep::UploadWaits:
            return n.hold ? tr("sending work unit %1 waits: %2")
                                .arg(unit, holdReason(*n.hold, nowMs, zone))
                          : tr("sending work unit %1 waits").arg(unit);
        case NextStep::RetryUploadAt:
            return tr("send work unit %1 again %2").arg(unit, at);
    }
    return {};
}

}  // namespace tandem::ui
