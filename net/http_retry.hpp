// Retries of the HTTPS client: the capped exponential backoff with jitter, and the loop that runs
// attempts until one succeeds, one fails for good (not transient) or the policy's attempts are
// used up, waiting the server's Retry-After (capped) or the backoff in between.
#pragma once

#include "http_client.hpp"

#include <algorithm>
#include <chrono>
#include <string>

namespace tandem::net {

// The wait before retry `retryNumber` (1-based): min(max, initial * 2^(n-1)) reduced by
// uniform01 * jitter of it.
std::chrono::milliseconds retryBackoff(int retryNumber, const RetryPolicy& policy,
                                       double uniform01);

// attempt(n) makes try n (1-based) and returns an HttpResult<T>; the error returned in the end
// says how many attempts were made.
template <class T, class Attempt>
HttpResult<T> withRetries(const RetryPolicy& policy, HttpClient& client, Attempt attempt) {
    for (int n = 1;; ++n) {
        HttpResult<T> r = attempt(n);
        if (r.ok())
            return r;
        HttpError e = r.error();
        e.attempts = n;
        if (!e.transient() || n >= policy.maxAttempts) {
            if (n > 1)
                e.message += " (after " + std::to_string(n) + " attempts)";
            return e;
        }
        const std::chrono::milliseconds wait = e.retryAfter
                                                   ? std::min(*e.retryAfter, policy.maxRetryAfter)
                                                   : client.backoffDelay(n, policy);
        client.config().sleep(wait);
    }
}

}  // namespace tandem::net
