#include "http_retry.hpp"

namespace tandem::net {

std::chrono::milliseconds retryBackoff(int retryNumber, const RetryPolicy& p, double uniform01) {
    double base = static_cast<double>(p.initialBackoff.count());
    for (int i = 1; i < retryNumber && base < static_cast<double>(p.maxBackoff.count()); ++i)
        base *= 2;
    base = std::min(base, static_cast<double>(p.maxBackoff.count()));
    const double jitter = std::clamp(p.jitter, 0.0, 1.0);
    return std::chrono::milliseconds(static_cast<int64_t>(base * (1.0 - jitter * uniform01)));
}

}  // namespace tandem::net
