#include "backoff.hpp"

#include <algorithm>

namespace tandem {

int64_t backoffDelayMs(const BackoffPolicy& policy, int attempt, double u,
                       std::optional<int64_t> retryAfterMs) {
    if (retryAfterMs)
        return std::clamp<int64_t>(*retryAfterMs, 0, policy.maxRetryAfterMs);
    // Doubling in double and stopping at the cap: no overflow however many attempts failed.
    const double cap = static_cast<double>(policy.maxMs);
    double b = static_cast<double>(policy.initialMs);
    for (int i = 1; i < attempt && b < cap; ++i)
        b *= 2;
    b = std::min(b, cap);
    const double jitter = std::clamp(policy.jitter, 0.0, 1.0);
    return static_cast<int64_t>(b - b * jitter * std::clamp(u, 0.0, 1.0));
}

}  // namespace tandem
