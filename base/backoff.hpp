// The wait before retrying something that failed: capped exponential backoff with jitter, and a
// server's Retry-After in place of it when there is one. The worker engine and the HTTPS client
// use the same formula with their own settings.
#pragma once

#include <cstdint>
#include <optional>

namespace tandem {

// Each caller sets its own numbers (the engine: EngineConfig; the HTTPS client: RetryPolicy).
struct BackoffPolicy {
    int64_t initialMs = 0;  // the wait before the first retry
    int64_t maxMs = 0;      // the cap of the doubling
    // The wait is reduced by up to this fraction of itself (0: exact, 0.5: uniform in [b/2, b]),
    // so that many clients that failed together do not retry together.
    double jitter = 0;
    int64_t maxRetryAfterMs = 0;  // the cap of a server's Retry-After
};

// The wait before retry `attempt` (1-based): b = min(maxMs, initialMs * 2^(attempt - 1)), minus
// jitter * u * b, with u in [0, 1] (clamped) drawn by the caller. A Retry-After, when given,
// replaces it, clamped to [0, maxRetryAfterMs].
int64_t backoffDelayMs(const BackoffPolicy& policy, int attempt, double u,
                       std::optional<int64_t> retryAfterMs = std::nullopt);

}  // namespace tandem
