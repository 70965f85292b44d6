// Donors' public names and teams, and the leaderboard (docs/protocol.md, "Names, teams and the
// leaderboard"). Totals per donor and per team live in donor_totals and team_totals (schema 5),
// added to in the transaction that accepts a result, so they are never summed from the results.
// The top lists are cached until the totals or a name change. Not thread-safe: the coordinator
// holds its lock around every call.
#pragma once

#include "coordinator.hpp"
#include "donor_profile.hpp"
#include "sqlite.hpp"

#include <cstdint>
#include <optional>

namespace tandem::coord {

class Leaderboard {
  public:
    // topCount: the donors and the teams the board lists. db must outlive the board.
    explicit Leaderboard(Database& db, int64_t topCount = 50);

    // An accepted result of `clientId` (credit: the receipt's weight); for its donor and, when
    // the donor is in a team, for the team. Called inside the accepting transaction.
    Status addResult(int64_t runId, int64_t clientId, int64_t tokens, double credit);

    // Checks an update (clientId 0: a client not registered yet): names trimmed and checked
    // (400 invalid_name), a display name no other donor has (409 name_taken). The answer holds
    // the values to store; a field left out stays out.
    Outcome<net::DonorProfile> check(const net::DonorProfile& update, int64_t clientId);
    // Stores what check() returned.
    Outcome<void> store(int64_t clientId, const net::DonorProfile& checked);
    // The client's display name and team ("" for none).
    Outcome<net::DonorProfile> profile(int64_t clientId);

    // The top lists and, for a client, its own and its team's standing.
    Outcome<net::Leaderboard> board(int64_t runId, std::optional<int64_t> clientId);

    // Changes whenever the totals or a name may have changed (for caches built on the board).
    uint64_t generation() const { return m_generation; }
    // Drops the cached lists: a front end's totals change in another process (front_end.cpp).
    void invalidate() {
        m_cache.reset();
        ++m_generation;
    }

  private:
    Outcome<net::Leaderboard> topLists(int64_t runId);
    Outcome<void> addStanding(net::Leaderboard& out, int64_t runId, int64_t clientId);

    Database& m_db;
    int64_t m_topCount;
    uint64_t m_generation = 1;
    std::optional<net::Leaderboard> m_cache;  // the top lists; cleared when anything changes
};

}  // namespace tandem::coord
