// The engine thread's wait before its next call after an error (capped exponential with jitter,
// backoffDelayMs in engine.hpp; the server's Retry-After wins) or after "no work" (the
// coordinator's Retry-After), shown as the engine's state until it is over. Internal to core/.
#pragma once

#include "coordinator_api.hpp"
#include "engine_shared.hpp"

#include <cstdint>
#include <string>

namespace tandem::core {

class EngineBackoff {
  public:
    explicit EngineBackoff(EngineShared& shared) : m_shared(shared) {}

    // After a failed call: waits longer each time; logs what failed and when it is tried again.
    void fail(const std::string& what, const ApiFailure& failure);
    // After a local error (a file, a refused manifest), as fail("error", message).
    void failLocal(const std::string& message);
    // A call went through: the next failure waits the initial delay again.
    void succeeded() { m_attempt = 0; }
    // No work offered: Idle until atMs, for reason.
    void idleUntil(int64_t atMs, std::string reason);
    // While the wait is not over: shows it, waits one poll interval (less when a command comes
    // or the wait ends) and returns true.
    bool waitIfEarly();

    int64_t notBeforeMs() const { return m_notBeforeMs; }

  private:
    EngineShared& m_shared;
    int m_attempt = 0;  // failures in a row
    int64_t m_notBeforeMs = 0;
    EngineState m_state = EngineState::Backoff;
    std::string m_reason;
    Problem m_problem = Problem::None;
};

}  // namespace tandem::core
