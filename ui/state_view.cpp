#include "state_view.hpp"

#include "engine_words.hpp"
#include "unit_end.hpp"

#include <QCoreApplication>
#include <QLocale>
#include <QtGlobal>
#include <algorithm>

// The resources of the static library (icons) are registered once, before the first use.
static void initTandemUiResources() {
    Q_INIT_RESOURCE(tandem_ui);
}
namespace {
struct ResourceInit {
    ResourceInit() { initTandemUiResources(); }
} g_resourceInit;
}  // namespace

namespace tandem::ui {

namespace {
// The context lupdate gives these calls (the enclosing namespace or class); see ui/translations.
QString tr(const char* text) {
    return QCoreApplication::translate("tandem::ui", text);
}
QString fromStd(const std::string& s) {
    return QString::fromStdString(s);
}
}  // namespace

// A Backoff as the donor should see it: transient trouble is a wait with its retry time, a
// problem only the donor can fix says so in one line and names the settings page.
static void describeProblem(const core::EngineSnapshot& s, int64_t nowMs,
                            const core::TimeZone& zone, StateView& v) {
    using core::Problem;
    const QString at = s.nextActionAtMs ? formatAt(*s.nextActionAtMs, nowMs, zone) : tr("soon");
    v.problemDetail = fromStd(s.problemDetail.empty() ? s.reason : s.problemDetail);
    v.needsAttention = core::needsAttention(s.problem);
    v.kind = v.needsAttention ? StateKind::Error : StateKind::Waiting;
    switch (s.problem) {
        case Problem::Unreachable:
            v.headline = tr("Can't reach the training server; retrying %1").arg(at);
            return;
        case Problem::ServerBusy:
            v.headline = tr("The training server is busy; retrying %1").arg(at);
            return;
        case Problem::WrongPin:
            v.headline = tr("Needs attention: the server's key does not match the pin in Settings");
            v.fixIn = SettingsTab::Coordinator;
            return;
        case Problem::Certificate:
            v.headline = tr("Needs attention: the server's certificate is not trusted");
            v.fixIn = SettingsTab::Coordinator;
            return;
        case Problem::Unauthorized:
            v.headline = tr("Needs attention: the training server refused this computer");
            v.fixIn = SettingsTab::Coordinator;
            return;
        case Problem::ProtocolMismatch:
            v.headline =
                tr("Needs attention: this Tandem and the server's do not match; update "
                   "Tandem");
            return;
        case Problem::DiskFull:
            v.headline = tr("Needs attention: the disk with Tandem's data is full");
            v.fixIn = SettingsTab::General;
            return;
        case Problem::None:
        case Problem::Other:
            break;
    }
    v.kind = StateKind::Error;
    v.headline = tr("Something went wrong; retrying %1").arg(at);
}

StateView describeState(const core::EngineSnapshot& s, bool attached, int64_t nowMs,
                        const core::TimeZone& zone) {
    using core::EngineState;
    StateView v;
    if (!attached) {
        v.kind = StateKind::Waiting;
        v.headline = tr("Not connected");
        v.detail = tr("Choose a coordinator in Settings to start contributing.");
    } else {
        switch (s.state) {
            case EngineState::Fetching:
                v.kind = StateKind::Working;
                v.headline =
                    s.registered ? tr("Working: asking for work") : tr("Working: registering");
                break;
            case EngineState::Downloading:
                v.kind = StateKind::Working;
                v.headline = tr("Working: downloading a work unit");
                break;
            case EngineState::Training:
                v.kind = StateKind::Working;
                v.headline = tr("Working: training");
                break;
            case EngineState::Uploading:
                v.kind = StateKind::Working;
                v.headline = tr("Working: uploading results");
                break;
            case EngineState::Paused:
                v.kind = StateKind::Paused;
                v.headline = tr("Paused");
                break;
            case EngineState::Snoozed:
                v.kind = StateKind::Paused;
                v.headline =
                    s.snoozedUntilMs
                        ? tr("Snoozed until %1").arg(formatUntil(*s.snoozedUntilMs, nowMs, zone))
                        : tr("Snoozed");
                break;
            case EngineState::Waiting:
                v.kind = StateKind::Waiting;
                v.headline = s.hold ? holdText(*s.hold, nowMs, zone) : tr("Waiting");
                break;
            case EngineState::Idle:  // the coordinator offered no work
                v.kind = StateKind::Waiting;
                v.headline = tr("Waiting: no work available right now");
                break;
            case EngineState::Backoff:
                describeProblem(s, nowMs, zone, v);
                break;
            case EngineState::Stopped:
                v.kind = StateKind::Paused;
                v.headline = tr("Stopped");
                break;
        }
        QStringList parts;
        if (s.current && (s.state == EngineState::Training || s.state == EngineState::Paused ||
                          s.state == EngineState::Snoozed || s.state == EngineState::Waiting)) {
            const auto& c = *s.current;
            if (c.innerSteps > 0)
                parts << tr("Work unit %1: step %2 of %3")
                             .arg(fromStd(c.id))
                             .arg(c.step)
                             .arg(c.innerSteps);
        } else if (s.current && s.state == EngineState::Downloading &&
                   s.current->downloadBytesTotal > 0) {
            parts << tr("Work unit %1: %2 of %3")
                         .arg(fromStd(s.current->id), formatBytes(s.current->downloadBytesDone),
                              formatBytes(s.current->downloadBytesTotal));
        }
        if (s.upload && s.upload->bytesTotal > 0)
            parts << tr("uploading result %1 (%2%)")
                         .arg(fromStd(s.upload->id))
                         .arg(100 * s.upload->bytesDone / s.upload->bytesTotal);
        if (s.finishThenPause && v.kind == StateKind::Working)
            parts << tr("pauses after this unit");
        // A backoff's headline already says when it retries.
        const QString next = nextActionText(s.next, nowMs, zone);
        if (!next.isEmpty() && v.kind != StateKind::Working && s.state != EngineState::Backoff)
            parts << tr("next: %1").arg(next);
        v.detail = parts.join(QStringLiteral("; "));
    }
    v.tooltip = elideChars(tr("Tandem: %1").arg(v.headline), kTooltipChars);
    return v;
}

QString elideChars(const QString& text, int maxChars) {
    if (text.size() <= maxChars)
        return text;
    return text.left(std::max(0, maxChars - 1)).trimmed() + QChar(0x2026);
}

QString breakableText(const QString& text) {
    QString out;
    out.reserve(text.size() + text.size() / 24);
    int run = 0;
    for (const QChar c : text) {
        run = c.isSpace() ? 0 : run + 1;
        if (run > 24) {
            out += QChar(0x200B);
            run = 1;
        }
        out += c;
    }
    return out;
}

QString idleUnknownNotice(const QString& reason) {
    return QCoreApplication::translate(
               "tandem::ui::StateView",
               "“Only when idle” cannot be followed: Tandem cannot tell how long this "
               "computer has been idle (%1), so it does not work. Switch the rule off, or use "
               "“Only at these times” instead.")
        .arg(reason);
}

QString temperatureUnknownNotice() {
    return QCoreApplication::translate(
        "tandem::ui::StateView",
        "The temperature limit cannot be applied: the device Tandem trains on reports no "
        "temperature (a CPU, or a GPU without a sensor), so Tandem works without watching it.");
}

QString stateIconPath(StateKind kind) {
    switch (kind) {
        case StateKind::Working:
            return QStringLiteral(":/icons/tray-working.svg");
        case StateKind::Paused:
            return QStringLiteral(":/icons/tray-paused.svg");
        case StateKind::Waiting:
            return QStringLiteral(":/icons/tray-waiting.svg");
        case StateKind::Error:
            return QStringLiteral(":/icons/tray-error.svg");
    }
    return {};
}

QIcon stateIcon(StateKind kind) {
    return QIcon(stateIconPath(kind));
}

QString stateKindName(StateKind kind) {
    switch (kind) {
        case StateKind::Working:
            return QStringLiteral("working");
        case StateKind::Paused:
            return QStringLiteral("paused");
        case StateKind::Waiting:
            return QStringLiteral("waiting");
        case StateKind::Error:
            return QStringLiteral("error");
    }
    return {};
}

QString workUnitStateText(core::WorkUnitState state) {
    using S = core::WorkUnitState;
    switch (state) {
        case S::Assigned:
            return tr("Assigned");
        case S::Downloading:
            return tr("Downloading");
        case S::Training:
            return tr("Training");
        case S::Trained:
            return tr("Trained, waiting to upload");
        case S::Uploading:
            return tr("Uploading");
        case S::Uploaded:
            return tr("Uploaded, waiting for its receipt");
        case S::Accepted:
            return tr("Accepted");
        case S::Rejected:
            return tr("Refused by the coordinator");
        case S::Failed:
            return tr("Failed here (nothing sent)");
        case S::Abandoned:
            return tr("Abandoned");
    }
    return {};
}

QString unitEndText(const std::string& detail) {
    using R = core::UnitEndReason;
    const auto reason = core::unitEndReasonFromCode(detail);
    if (!reason)
        return fromStd(detail);
    switch (*reason) {
        case R::HeldTooLong:
            return tr(
                "This computer was paused, asleep or offline for longer than the training "
                "server keeps a work unit, before enough of it was trained to send.");
        case R::RunMovedOn:
            return tr(
                "The training moved on while this work unit waited, so its result would "
                "no longer count.");
        case R::Stalled:
            return tr("The training server saw no progress on this work unit for too long.");
        case R::Released:
            return tr("Given back to the training server: this computer could not continue it.");
        case R::NotHeld:
            return tr("The training server no longer kept this work unit for this computer.");
        case R::AlreadyAccepted:
            return tr("Its result had already been counted.");
        case R::Other:
            break;
    }
    return tr("The training server gave this work unit up (the log says why).");
}

QString formatBytes(int64_t bytes) {
    return fromStd(core::formatBytes(bytes));
}

QString formatDuration(int64_t ms) {
    if (ms < 1000)
        return tr("under 1 s");
    const int64_t s = (ms + 500) / 1000;
    if (s < 60)
        return tr("%1 s").arg(s);
    const int64_t m = (s + 30) / 60;
    if (m < 60)
        return tr("%1 min").arg(m);
    return tr("%1 h %2 min").arg(m / 60).arg(m % 60, 2, 10, QLatin1Char('0'));
}

QString formatTokens(int64_t tokens) {
    const QLocale loc;
    if (tokens >= 10'000'000)
        return tr("%1 M").arg(loc.toString(static_cast<double>(tokens) / 1e6, 'f', 1));
    return loc.toString(static_cast<qlonglong>(tokens));
}

QString formatDateTime(int64_t atMs, const core::TimeZone& zone) {
    const auto local = core::toLocal(atMs, zone);
    return QStringLiteral("%1 %2").arg(fromStd(local.date.toString()),
                                       fromStd(core::formatMinuteOfDay(local.minuteOfDay)));
}

}  // namespace tandem::ui
