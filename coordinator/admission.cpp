#include "admission.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tandem::coord {

namespace {

// Above this many buckets, full ones (that would be created full again anyway) are dropped, so
// that addresses seen once do not pile up.
constexpr size_t kPruneAbove = 10000;

}  // namespace

RegistrationLimiter::RegistrationLimiter(double perHour, int burst, std::function<double()> clock)
    : m_perSecond(perHour / 3600.0), m_burst(std::max(1, burst)), m_clock(std::move(clock)) {
    if (!m_clock)
        m_clock = [] {
            return std::chrono::duration<double>(
                       std::chrono::steady_clock::now().time_since_epoch())
                .count();
        };
}

std::optional<Refusal> RegistrationLimiter::admit(const std::string& source) {
    if (m_perSecond <= 0)
        return std::nullopt;
    std::lock_guard lock(m_mutex);
    const double now = m_clock();
    if (m_buckets.size() > kPruneAbove)
        std::erase_if(m_buckets, [&](const auto& kv) {
            return kv.second.tokens + (now - kv.second.updated) * m_perSecond >= m_burst;
        });
    auto [it, fresh] = m_buckets.try_emplace(source, Bucket{m_burst, now});
    Bucket& b = it->second;
    if (!fresh) {
        b.tokens = std::min(m_burst, b.tokens + std::max(0.0, now - b.updated) * m_perSecond);
        b.updated = now;
    }
    if (b.tokens >= 1) {
        b.tokens -= 1;
        return std::nullopt;
    }
    const int wait = static_cast<int>(std::ceil((1 - b.tokens) / m_perSecond));
    return Refusal{429, "too_many_registrations",
                   "this address registered " + std::to_string(static_cast<int>(m_burst)) +
                       " clients recently; the coordinator allows " +
                       std::to_string(static_cast<int>(std::lround(m_perSecond * 3600))) +
                       " an hour per address; retry in " + std::to_string(wait) + " s",
                   std::max(1, wait)};
}

size_t RegistrationLimiter::trackedSources() {
    std::lock_guard lock(m_mutex);
    return m_buckets.size();
}

std::optional<Refusal> checkRegistrationSecret(std::string_view configured,
                                               std::string_view given) {
    if (configured.empty())
        return std::nullopt;
    if (given.empty())
        return Refusal{401, "registration_secret_required",
                       "this coordinator needs a registration secret: give the worker "
                       "--register-secret (registerSecret in settings.json)",
                       0};
    if (given.size() != configured.size() ||
        CRYPTO_memcmp(given.data(), configured.data(), given.size()) != 0)
        return Refusal{403, "bad_registration_secret",
                       "the registration secret is wrong; ask the coordinator's operator for it",
                       0};
    return std::nullopt;
}

}  // namespace tandem::coord
