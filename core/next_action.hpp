// What the engine will do next, as a code with its figures: the UI words and translates it
// (ui/engine_words.hpp); describeNextAction() is the English for the log and tandem-worker's
// status. No sentence here is shown in the desktop app.
#pragma once

#include "clock.hpp"
#include "rules.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace tandem::core {

enum class NextStep {
    None,
    Register,             // register with the coordinator
    RequestWork,          // ask for a work unit
    Train,                // train workUnitId once it is downloaded
    Upload,               // upload workUnitId after step afterStep
    StopAfterUploads,     // the last units are trained: stop once their results are sent
    NextUnitAfterUpload,  // results wait to upload: the next unit comes after them
    ResumeByHand,         // paused: the donor resumes
    ResumeAt,             // snoozed until atMs
    CheckRulesAt,         // a rule holds: look again at atMs
    CheckRulesOnChange,   // a rule holds: look again when the machine changes
    TryAgainAt,           // after trouble or with no work offered: at atMs
    UploadWaits,          // the upload of workUnitId waits for a rule (hold)
    RetryUploadAt,        // the upload of workUnitId failed: again at atMs
};

struct NextAction {
    NextAction() = default;
    explicit NextAction(NextStep s, std::optional<int64_t> at = std::nullopt, std::string unit = {},
                        int64_t after = 0)
        : step(s), atMs(at), workUnitId(std::move(unit)), afterStep(after) {}

    NextStep step = NextStep::None;
    std::optional<int64_t> atMs;  // ResumeAt, CheckRulesAt, TryAgainAt, RetryUploadAt
    std::string workUnitId;       // Train, Upload, UploadWaits, RetryUploadAt
    int64_t afterStep = 0;        // Upload
    std::optional<Hold> hold;     // UploadWaits

    bool operator==(const NextAction&) const = default;
};

// "retry the upload of work unit 17 at 14:05", "check again tomorrow at 08:00", ...
std::string describeNextAction(const NextAction& next, int64_t nowMs, const TimeZone& zone);

}  // namespace tandem::core
