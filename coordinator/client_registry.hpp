// The client registry: registration and bearer tokens. The database keeps only a token's
// SHA-256; the token itself is returned once, at registration. When a client was last seen is
// kept in memory and written with the coordinator's batch of heartbeats (writeLastSeen), so that
// a request costs no database write. Not thread-safe: the coordinator holds its lock around
// every call.
#pragma once

#include "coordinator.hpp"
#include "sqlite.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string_view>

namespace tandem::coord {

class ClientRegistry {
  public:
    // clock: unix seconds. db must outlive the registry.
    ClientRegistry(Database& db, std::function<int64_t()> clock, Logger log);

    // Registers a client under a fresh random token; coordinatorKey goes into the answer.
    Outcome<net::RegisterResponse> add(const net::RegisterRequest& request,
                                       const net::PublicKey& coordinatorKey);
    // "Bearer <token>" -> client id; 401 for a missing, malformed or unknown token.
    Outcome<int64_t> authenticate(std::string_view authorization);

    // Last-seen times not yet written: the caller writes them (in its transaction) and, once
    // committed, marks them written.
    bool lastSeenChanged() const { return !m_lastSeen.empty(); }
    Status writeLastSeen();
    void markLastSeenWritten() { m_lastSeen.clear(); }

  private:
    Database& m_db;
    std::function<int64_t()> m_clock;
    Logger m_log;
    std::map<int64_t, int64_t> m_lastSeen;  // client id -> unix seconds, not yet written
};

}  // namespace tandem::coord
