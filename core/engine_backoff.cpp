// The engine's backoff after errors: capped exponential with jitter; Retry-After wins.
#include "engine_backoff.hpp"

#include "backoff.hpp"

#include <algorithm>

namespace tandem::core {

int64_t backoffDelayMs(const EngineConfig& config, int attempt, double u,
                       std::optional<int64_t> retryAfterMs) {
    const BackoffPolicy policy{config.backoffInitialMs, config.backoffMaxMs, config.backoffJitter,
                               config.maxRetryAfterMs};
    return tandem::backoffDelayMs(policy, attempt, u, retryAfterMs);
}

void EngineBackoff::fail(const std::string& what, const ApiFailure& failure) {
    ++m_attempt;
    const double u = m_shared.jitterUnit();
    const int64_t delay = backoffDelayMs(m_shared.cfg, m_attempt, u, failure.retryAfterMs);
    m_notBeforeMs = m_shared.now() + delay;
    m_state = EngineState::Backoff;
    m_reason = what + ": " + failure.message;
    m_problem = failure.problem != Problem::Other
                    ? failure.problem
                    : problemFromFailure(failure.httpStatus, failure.message);
    m_shared.log(EventLevel::Warning,
                 m_reason + " (retry in " + std::to_string(delay / 1000) + " s)");
}

void EngineBackoff::failLocal(const std::string& message) {
    ApiFailure f;
    f.message = message;
    fail("error", f);
}

void EngineBackoff::idleUntil(int64_t atMs, std::string reason) {
    m_attempt = 0;
    m_notBeforeMs = atMs;
    m_state = EngineState::Idle;
    m_reason = std::move(reason);
    m_problem = Problem::None;
}

bool EngineBackoff::waitIfEarly() {
    if (m_shared.now() >= m_notBeforeMs)
        return false;
    if (m_state == EngineState::Backoff)
        m_shared.setProblem(m_problem, m_reason);
    m_shared.setState(m_state, m_reason, NextAction(NextStep::TryAgainAt, m_notBeforeMs));
    m_shared.waitOnce(m_notBeforeMs);
    return true;
}

}  // namespace tandem::core
