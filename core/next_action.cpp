#include "next_action.hpp"

namespace tandem::core {

std::string describeNextAction(const NextAction& n, int64_t nowMs, const TimeZone& zone) {
    const std::string at = n.atMs ? describeLocalTime(*n.atMs, nowMs, zone) : std::string("soon");
    switch (n.step) {
        case NextStep::None:
            return {};
        case NextStep::Register:
            return "register with the coordinator";
        case NextStep::RequestWork:
            return "request a work unit";
        case NextStep::Train:
            return "train work unit " + n.workUnitId;
        case NextStep::Upload:
            return "upload work unit " + n.workUnitId + " after step " +
                   std::to_string(n.afterStep);
        case NextStep::StopAfterUploads:
            return "stop after the uploads";
        case NextStep::NextUnitAfterUpload:
            return "next work unit after the upload";
        case NextStep::ResumeByHand:
            return "resume to continue";
        case NextStep::ResumeAt:
            return "resume " + at;
        case NextStep::CheckRulesAt:
            return "check again " + at;
        case NextStep::CheckRulesOnChange:
            return "check again when it changes";
        case NextStep::TryAgainAt:
            return "try again " + at;
        case NextStep::UploadWaits:
            return "upload of work unit " + n.workUnitId +
                   " waits: " + (n.hold ? n.hold->reason : std::string("a rule holds it"));
        case NextStep::RetryUploadAt:
            return "retry the upload of work unit " + n.workUnitId + " " + at;
    }
    return {};
}

}  // namespace tandem::core
