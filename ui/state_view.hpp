// The one state of Tandem as people see it: the window's headline, the tray icon and the tray
// tooltip are all made from describeState(), so they can never disagree.
#pragma once

#include "engine.hpp"

#include <QIcon>
#include <QString>

namespace tandem::ui {

// The four looks of the tray icon.
enum class StateKind { Working, Paused, Waiting, Error };

struct StateView {
    StateKind kind = StateKind::Waiting;
    QString headline;  // "Working: training", "Paused", "Snoozed until 18:00", "Error: ..."
    QString detail;    // progress and the next action, may be empty
    QString tooltip;   // "Tandem\n<headline>\n<detail>"
};

// attached: an engine runs (false before a coordinator is chosen).
StateView describeState(const core::EngineSnapshot& snapshot, bool attached, int64_t nowMs,
                        const core::TimeZone& zone);
// "Only when idle" is on but the idle time is unknown (reason from DBusIdleSource): what the
// Overview and the settings dialog say about it.
QString idleUnknownNotice(const QString& reason);
QString stateIconPath(StateKind kind);  // ":/icons/tray-working.svg", ...
QIcon stateIcon(StateKind kind);
QString stateKindName(StateKind kind);
// A work unit's ledger state in words: "Training", "Waiting for its receipt", "Accepted", ...
QString workUnitStateText(
    core::WorkUnitState state);  // "working", "paused", "waiting", "error" (tests, a11y)

// Small formatting helpers shared by the pages.
QString formatBytes(int64_t bytes);            // core::formatBytes: "1.5 GB"
QString formatDuration(int64_t milliseconds);  // "4 min", "1 h 05 min", "35 s"
QString formatTokens(int64_t tokens);          // "1.2 M", "12 345"
QString formatLocalTime(int64_t atMs, int64_t nowMs, const core::TimeZone& zone);
QString formatDateTime(int64_t atMs, const core::TimeZone& zone);  // "2026-11-22 14:05"

}  // namespace tandem::ui
