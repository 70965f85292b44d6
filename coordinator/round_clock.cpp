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

}  // namespace tandem::coord
