// The engine's backoff after errors: capped exponential with jitter; Retry-After wins.
#include "engine_impl.hpp"

#include <algorithm>

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

int64_t backoffDelayMs(const EngineConfig& config, int attempt, double u,
                       std::optional<int64_t> retryAfterMs) {
    if (retryAfterMs)
        return std::clamp<int64_t>(*retryAfterMs, 0, config.maxRetryAfterMs);
    double b = static_cast<double>(config.backoffInitialMs);
    for (int i = 1; i < attempt && b < static_cast<double>(config.backoffMaxMs); ++i)
        b *= 2;
    b = std::min(b, static_cast<double>(config.backoffMaxMs));
    const double jitter = std::clamp(config.backoffJitter, 0.0, 1.0);
    return static_cast<int64_t>(b - b * jitter * std::clamp(u, 0.0, 1.0));
}

void Engine::Impl::backoff(const std::string& what, const ApiFailure& failure) {
    ++backoffAttempt;
    const double u = jitterUnit();
    const int64_t delay = backoffDelayMs(cfg, backoffAttempt, u, failure.retryAfterMs);
    notBeforeMs = now() + delay;
    notBeforeState = EngineState::Backoff;
    notBeforeReason = what + ": " + failure.message;
    log(EventLevel::Warning,
        notBeforeReason + " (retry in " + std::to_string(delay / 1000) + " s)");
}

void Engine::Impl::backoffLocal(const std::string& message) {
    ApiFailure f;
    f.message = message;
    backoff("error", f);
}

}  // namespace tandem::core
