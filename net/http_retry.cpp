#include "http_retry.hpp"

#include "backoff.hpp"

namespace tandem::net {

std::chrono::milliseconds retryBackoff(int retryNumber, const RetryPolicy& p, double uniform01) {
    const BackoffPolicy policy{p.initialBackoff.count(), p.maxBackoff.count(), p.jitter, 0};
    return std::chrono::milliseconds(backoffDelayMs(policy, retryNumber, uniform01));
}

}  // namespace tandem::net
