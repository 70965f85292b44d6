#include "round_clock.hpp"

#include "postgres.hpp"

namespace tandem::coord {

bool RoundClock::held() {
    if (m_url.empty())
        return true;
    if (!m_db) {
        storage::OpenOptions options;
        options.errorPrefix = "round clock";
        auto db = storage::openPostgres(m_url, options);
        if (!db) {
            m_held = false;
            m_why = db.error().message;
            return false;
        }
        m_db = std::make_unique<Database>(std::move(*db));
    }
    // Held: one round trip shows the session (and with it the lock) is alive. Not held: try.
    auto q = m_held ? m_db->prepareCached("SELECT 1", "checking the round clock's connection")
                    : m_db->prepareCached(
                          "SELECT pg_try_advisory_lock(CAST(? AS INTEGER), CAST(? AS INTEGER))",
                          "taking the round clock");
    if (!q) {
        m_held = false;
        m_why = q.error().message;
        return false;
    }
    if (!m_held)
        q->bind(1, int64_t{kRoundClockLockKey}).bind(2, m_runId);
    const bool answered = q->step();
    if (!answered) {
        m_held = false;
        m_why = q->status() ? "no answer" : q->status().error().message;
        return false;
    }
    m_held = q->integer(0) == 1;
    m_why = m_held ? "" : "another process runs the round clock of this run";
    return m_held;
}

Expected<ServeLock> ServeLock::take(const std::string& databaseUrl) {
    ServeLock lock;
    if (databaseUrl.empty())
        return lock;
    storage::OpenOptions options;
    options.errorPrefix = "coordinator lock";
    auto db = storage::openPostgres(databaseUrl, options);
    if (!db)
        return db.error();
    lock.m_db = std::make_unique<Database>(std::move(*db));
    auto q = lock.m_db->prepare("SELECT pg_try_advisory_lock(CAST(? AS INTEGER), 0)",
                                "taking the coordinator's lock on the database");
    if (!q)
        return q.error();
    q->bind(1, int64_t{kServeLockKey});
    if (!q->step())
        return q->status() ? makeError("taking the coordinator's lock: no answer")
                           : q->status().error();
    if (q->integer(0) != 1) {
        lock.m_db.reset();
        return makeError(
            "another tandem-coordinator process serves this database; one process "
            "per database for now (docs/operations.md): stop the other one first");
    }
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
