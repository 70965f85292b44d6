// Codes for the ways a work unit ends without counting.
#include "unit_end.hpp"

#include <array>
#include <utility>

namespace tandem::core {

namespace {
constexpr std::array<std::pair<UnitEndReason, const char*>, 7> kCodes{{
    {UnitEndReason::HeldTooLong, "held_too_long"},
    {UnitEndReason::RunMovedOn, "run_moved_on"},
    {UnitEndReason::Stalled, "stalled"},
    {UnitEndReason::Released, "released"},
    {UnitEndReason::NotHeld, "not_held"},
    {UnitEndReason::AlreadyAccepted, "already_accepted"},
    {UnitEndReason::Other, "other"},
}};

bool has(std::string_view text, std::string_view part) {
    return text.find(part) != std::string_view::npos;
}
}  // namespace

const char* unitEndCode(UnitEndReason reason) {
    for (const auto& [r, code] : kCodes)
        if (r == reason)
            return code;
    return "other";
}

std::optional<UnitEndReason> unitEndReasonFromCode(std::string_view code) {
    for (const auto& [r, c] : kCodes)
        if (code == c)
            return r;
    return std::nullopt;
}

UnitEndReason classifyAbandonReason(std::string_view text) {
    if (has(text, "no heartbeat") || has(text, "deadline passed"))
        return UnitEndReason::HeldTooLong;
    if (has(text, "staleness") || has(text, "moved on") || has(text, "no longer accepted"))
        return UnitEndReason::RunMovedOn;
    if (has(text, "without progress"))
        return UnitEndReason::Stalled;
    if (has(text, "released"))
        return UnitEndReason::Released;
    if (has(text, "already accepted"))
        return UnitEndReason::AlreadyAccepted;
    return UnitEndReason::Other;
}

std::string refusalDetail(const ApiFailure& failure) {
    if (failure.code == "stale")
        return unitEndCode(UnitEndReason::RunMovedOn);
    if (failure.code == "work_unit_abandoned") {
        const UnitEndReason r = classifyAbandonReason(failure.message);
        if (r != UnitEndReason::Other)
            return unitEndCode(r);
    }
    return failure.message;
}

}  // namespace tandem::core
