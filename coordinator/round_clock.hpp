// Who runs the round clock (issue 16, item 2): closing rounds at their quorum or deadline and
// timing out work units, which exactly one process may do at a time. With SQLite that is always
// this process (the state directory's lock makes it the only one). With PostgreSQL it is the
// process that holds a session advisory lock on (kRoundClockLockKey, run id) in the run's
// database, through a connection of its own: when the process dies, or its connection does, the
// server releases the lock and another process takes it at its next try (every tick, 1 s).
#pragma once

#include "sqlite.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace tandem::coord {

// pg_try_advisory_lock's first key ("TR" + "CL"): the second is the run id.
inline constexpr int32_t kRoundClockLockKey = 0x5452434c;

class RoundClock {
  public:
    // The SQLite default: always held.
    RoundClock() = default;
    // databaseUrl empty: the SQLite default; else a PostgreSQL URL. Connects lazily, on the first
    // held(), so that a database that is down now only delays the clock.
    RoundClock(std::string databaseUrl, int64_t runId)
        : m_url(std::move(databaseUrl)), m_runId(runId) {}

    // Whether this process runs the clock now: takes the lock when it is free, and checks that
    // the connection that holds it is still there. A lost connection loses the clock (the server
    // has released the lock, so another process may have it), until a later try takes it again.
    bool held();
    // Why the last held() was false, for the log; empty when held.
    const std::string& why() const { return m_why; }

  private:
    std::string m_url;
    int64_t m_runId = 0;
    std::unique_ptr<Database> m_db;  // (Database cannot be move-assigned)
    bool m_held = false;
    std::string m_why;
};

// pg_try_advisory_lock's key ("TR" + "SV") for the one coordinator process a database has.
inline constexpr int32_t kServeLockKey = 0x54525356;

// One aggregating process (--role all) per PostgreSQL database, beside any number of front ends,
// which take no lock (issue 16, K = 1): a second one would accept results into a round sum that
// no process closes. A session advisory
// lock on a connection of its own, taken when the coordinator opens and given back (at once,
// not when the server notices the connection gone) when it closes. With SQLite it holds nothing:
// the state directory's lock is the one.
class ServeLock {
  public:
    // shard: a sharded run's shard k (docs/protocol.md, "Sharded runs"), one process each.
    static Expected<ServeLock> take(const std::string& databaseUrl, int shard = 0);
    ServeLock() = default;
    ServeLock(ServeLock&&) = default;
    ServeLock& operator=(ServeLock&& other) noexcept;
    ~ServeLock();

  private:
    void release();
    std::unique_ptr<Database> m_db;
};

}  // namespace tandem::coord
