// A donor's public face (docs/protocol.md, "Names, teams and the leaderboard"): the display name
// and team a donor chose, their checks (shared by the coordinator, the worker and the desktop
// app, so that all refuse the same names with the same words), and the leaderboard's JSON.
// The client's `name` (its device name) is something else and is never shown publicly.
#pragma once

#include "expected.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::net {

inline constexpr size_t kMaxPublicNameChars = 32;  // code points, after trimming
// What the leaderboard shows for a donor without a display name; no donor may take it.
inline constexpr std::string_view kAnonymousName = "anonymous";

// A display name or team as it will be stored: `raw` with white space trimmed at both ends.
// "" stays "" (no name: anonymous, or no team). Refused, with a message that names `field` and
// what was found: invalid UTF-8, control or bidirectional-override characters, white space
// only, or more than kMaxPublicNameChars code points.
Expected<std::string> checkPublicName(std::string_view raw, std::string_view field);

// The key two names are the same under (display names are unique by it, teams are grouped by
// it): letters folded to lower case (ASCII, Latin-1, Greek and Cyrillic capitals).
std::string publicNameKey(std::string_view name);

// PUT /v1/clients/self and the optional fields of POST /v1/clients. A field left out is left as
// it is; "" (or JSON null) clears it. Values are as sent: checkPublicName() checks them.
struct DonorProfile {
    std::optional<std::string> displayName;
    std::optional<std::string> team;
    std::string toJson() const;
    static Expected<DonorProfile> fromJson(std::string_view text);
    bool operator==(const DonorProfile&) const = default;
};

// One donor's line: rank 1 is the most credit; equal credit shares a rank.
struct DonorStanding {
    int64_t rank = 0;
    std::string displayName;  // kAnonymousName when the donor chose none
    bool anonymous = false;
    std::string team;  // "" when none
    int64_t tokens = 0;
    int64_t units = 0;  // accepted work units
    double credit = 0;  // the sum of the receipts' weights
    bool operator==(const DonorStanding&) const = default;
};

struct TeamStanding {
    int64_t rank = 0;
    std::string team;
    int64_t members = 0;  // donors in the team now
    int64_t tokens = 0;
    int64_t units = 0;
    double credit = 0;  // earned by members while in the team
    bool operator==(const TeamStanding&) const = default;
};

// GET /v1/runs/{run}/leaderboard. `you` and `yourTeam` only for an authenticated caller (and
// yourTeam only when the caller is in a team).
struct Leaderboard {
    int64_t runId = 0;
    int64_t donorCount = 0;  // donors with an accepted result
    int64_t teamCount = 0;
    std::vector<DonorStanding> donors;  // best first
    std::vector<TeamStanding> teams;
    std::optional<DonorStanding> you;
    std::optional<TeamStanding> yourTeam;
    std::string toJson() const;
    static Expected<Leaderboard> fromJson(std::string_view text);
    bool operator==(const Leaderboard&) const = default;
};

}  // namespace tandem::net
