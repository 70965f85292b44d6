// hold.json in the data directory: the donor's pause or snooze (with its end time), so that it
// survives a restart and a start at login. Written atomically on every change; a missing file
// holds nothing. Internal to core/.
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>

namespace tandem::core {

struct HoldState {
    bool paused = false;
    std::optional<int64_t> snoozeUntilMs;  // Unix ms; a time in the past holds nothing

    bool operator==(const HoldState&) const = default;
};

Status writeHold(const std::filesystem::path& path, const HoldState& hold);
// None held when the file is missing; an error naming the file when it is damaged.
Expected<HoldState> readHold(const std::filesystem::path& path);

}  // namespace tandem::core
