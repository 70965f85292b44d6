// hold.json: the donor's pause or snooze across restarts.
#include "hold_file.hpp"

#include "unit_files.hpp"

namespace tandem::core {

namespace fs = std::filesystem;

Status writeHold(const fs::path& path, const HoldState& hold) {
    nlohmann::json j = {{"paused", hold.paused}};
    j["snooze_until_ms"] =
        hold.snoozeUntilMs ? nlohmann::json(*hold.snoozeUntilMs) : nlohmann::json(nullptr);
    return writeTextAtomically(path, j.dump());
}

Expected<HoldState> readHold(const fs::path& path) {
    std::error_code ec;
    if (!fs::exists(path, ec))
        return HoldState{};
    auto j = readJson(path);
    if (!j)
        return j.error();
    HoldState h;
    const auto paused = j->find("paused");
    const auto until = j->find("snooze_until_ms");
    if (paused == j->end() || !paused->is_boolean() || until == j->end() ||
        !(until->is_null() || until->is_number_integer()))
        return makeError(path.string() +
                         ": expected {\"paused\": true|false, \"snooze_until_ms\": ms|null}");
    h.paused = paused->get<bool>();
    if (until->is_number_integer())
        h.snoozeUntilMs = until->get<int64_t>();
    return h;
}

}  // namespace tandem::core
