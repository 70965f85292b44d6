// The one state of Tandem as people see it: the window's headline, the tray icon and the tray
// tooltip are all made from describeState(), so they can never disagree.
#pragma once

#include "engine.hpp"

#include <QIcon>
#include <QString>

namespace tandem::ui {

// The four looks of the tray icon.
enum class StateKind { Working, Paused, Waiting, Error };

// The settings page that fixes a problem that needs the donor (SettingsDialog's tabs).
enum class SettingsTab { None = -1, General = 0, Rules = 1, Network = 2, Coordinator = 3 };

struct StateView {
    StateKind kind = StateKind::Waiting;
    // One short line each: "Working: training", "Paused", "Can't reach the training server;
    // retrying at 14:06", "Needs attention: ..."; shown elided where space is short.
    QString headline;
    QString detail;   // progress and the next action, may be empty
    QString tooltip;  // one short line: "Tandem: <headline>" (elided)
    // A problem the donor must fix: Error kind, the headline says it, fixIn opens the page.
    bool needsAttention = false;
    SettingsTab fixIn = SettingsTab::None;
    QString problemDetail;  // the failure's own words, for a details view (also in the log)
};

// The one-line tooltip of the tray: "Tandem: " + headline, at most kTooltipChars characters.
inline constexpr int kTooltipChars = 64;
// text cut to at most maxChars characters, ending in "…" when cut.
QString elideChars(const QString& text, int maxChars);
// text with a break opportunity (U+200B) inside every run of 24 characters without a space, so
// that a word-wrapped label can wrap a long key, URL or path instead of widening its window.
QString breakableText(const QString& text);

// attached: an engine runs (false before a coordinator is chosen).
StateView describeState(const core::EngineSnapshot& snapshot, bool attached, int64_t nowMs,
                        const core::TimeZone& zone);
// "Only when idle" is on but the idle time is unknown (reason from DesktopIdleSource): what the
// Overview and the settings dialog say about it (the rule then holds all work).
QString idleUnknownNotice(const QString& reason);
// A temperature limit is set but the device in use reports no temperature
// (EngineSnapshot::temperatureUnknown): what the Overview and the settings dialog say.
QString temperatureUnknownNotice();
QString stateIconPath(StateKind kind);  // ":/icons/tray-working.svg", ...
QIcon stateIcon(StateKind kind);
QString stateKindName(StateKind kind);
// A work unit's ledger state in words: "Training", "Waiting for its receipt", "Accepted", ...
QString workUnitStateText(
    core::WorkUnitState state);  // "working", "paused", "waiting", "error" (tests, a11y)

// Why a unit ended without counting, in plain words: the ledger's detail is a code of
// core/unit_end.hpp ("held_too_long", ...) or, for older rows and local errors, text as it is.
QString unitEndText(const std::string& detail);

// Small formatting helpers shared by the pages.
QString formatBytes(int64_t bytes);                                // core::formatBytes: "1.5 GB"
QString formatDuration(int64_t milliseconds);                      // "4 min", "1 h 05 min", "35 s"
QString formatTokens(int64_t tokens);                              // "1.2 M", "12 345"
QString formatDateTime(int64_t atMs, const core::TimeZone& zone);  // "2026-11-22 14:05"

}  // namespace tandem::ui
