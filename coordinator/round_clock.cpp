#include "round_clock.hpp"

#include "postgres.hpp"

namespace tandem::coord {

namespace {

// A connection of a lock's own: the server releases a session lock when its session ends.
Expected<std::unique_ptr<Database>> openLockConnection(const std::string& url,
                                                       std::string errorPrefix) {
    storage::OpenOptions options;
    options.errorPrefix = std::move(errorPrefix);
    auto db = storage::openPostgres(url, options);
    if (!db)
        return db.error();
    return std::make_unique<Database>(std::move(*db));
}

// pg_try_advisory_lock(key, id): whether this session holds the lock now.
Expected<bool> tryAdvisoryLock(Database& db, int32_t key, int64_t id, std::string_view what) {
    auto q = db.prepareCached("SELECT pg_try_advisory_lock(CAST(? AS INTEGER), CAST(? AS INTEGER))",
                              what);
    if (!q)
        return q.error();
    q->bind(1, int64_t{key}).bind(2, id);
    if (!q->step())
        return q->status() ? makeError(std::string(what) + ": no answer") : q->status().error();
    return q->integer(0) == 1;
}

}  // namespace

bool RoundClock::held() {
    if (m_url.empty())
        return true;
    if (!m_db) {
        auto db = openLockConnection(m_url, "round clock");
        if (!db) {
            m_held = false;
            m_why = db.error().message;
            return false;
        }
        m_db = std::move(*db);
    }
    // Held: one round trip shows the session (and with it the lock) is alive. Not held: try.
    if (m_held) {
        auto q = m_db->prepareCached("SELECT 1", "checking the round clock's connection");
        if (q && q->step())
            return true;
        m_held = false;
        m_why = !q ? q.error().message : q->status() ? "no answer" : q->status().error().message;
        return false;
    }
    auto taken = tryAdvisoryLock(*m_db, kRoundClockLockKey, m_runId, "taking the round clock");
    m_held = taken && *taken;
    m_why = !taken   ? taken.error().message
            : m_held ? ""
                     : "another process runs the round clock of this run";
    return m_held;
}

Expected<ServeLock> ServeLock::take(const std::string& databaseUrl, int shard) {
    ServeLock lock;
    if (databaseUrl.empty())
        return lock;
    auto db = openLockConnection(databaseUrl, "coordinator lock");
    if (!db)
        return db.error();
    auto taken = tryAdvisoryLock(**db, kServeLockKey, shard,
                                 "taking the coordinator's lock on the database");
    if (!taken)
        return taken.error();
    if (!*taken) {
        return makeError(
            "another tandem-coordinator process serves this database as its aggregating "
            "process" +
            (shard > 0 ? " of shard " + std::to_string(shard) : std::string()) +
            "; one per database (per shard of a sharded run), beside any number of --role "
            "front (docs/operations.md): stop the other one first");
    }
    lock.m_db = std::move(*db);
    return lock;
}

ServeLock& ServeLock::operator=(ServeLock&& other) noexcept {
    if (this != &other) {
        release();
        m_db = std::move(other.m_db);
    }
    return *this;
}

ServeLock::~ServeLock() {
    release();
}

void ServeLock::release() {
    if (m_db)
        (void)m_db->exec("SELECT pg_advisory_unlock_all()", "giving back the coordinator's lock");
    m_db.reset();
}

}  // namespace tandem::coord
