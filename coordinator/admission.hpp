// Who may join a run (Sybil limits, docs/protocol.md "Register"): registrations per source address
// through a token bucket, and the optional registration secret. The server asks the limiter
// before a registration, then checks the secret (header kRegistrationSecretHeader).
#pragma once

#include "coordinator.hpp"  // Refusal

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::coord {

inline constexpr const char* kRegistrationSecretHeader = "X-Tandem-Registration-Secret";

// A token bucket per source address: `burst` registrations at once, then `perHour` an hour.
// perHour 0: unlimited.
class RegistrationLimiter {
  public:
    // clock: seconds (a steady clock by default).
    RegistrationLimiter(double perHour, int burst, std::function<double()> clock = {});

    // Takes a token for source, or a 429 refusal with Retry-After (whole seconds until the next
    // token). Thread-safe.
    std::optional<Refusal> admit(const std::string& source);

    size_t trackedSources();  // tests: how many buckets are held

  private:
    struct Bucket {
        double tokens = 0;
        double updated = 0;
    };
    double m_perSecond;
    double m_burst;
    std::function<double()> m_clock;
    std::mutex m_mutex;
    std::map<std::string, Bucket> m_buckets;
};

// nullopt when no secret is configured or `given` matches it (compared in constant time);
// otherwise 401 registration_secret_required (none given) or 403 bad_registration_secret.
std::optional<Refusal> checkRegistrationSecret(std::string_view configured, std::string_view given);

}  // namespace tandem::coord
