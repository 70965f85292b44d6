// Registration with the coordinator: the client id, the bearer token and the coordinator key
// pinned at registration, kept in registration.json (0600) for the coordinator URL it belongs
// to. Manifests and receipts must verify against that key. Internal to core/.
#pragma once

#include "engine_backoff.hpp"
#include "engine_shared.hpp"
#include "registration_file.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace tandem::core {

class Registrar {
  public:
    Registrar(EngineShared& shared, EngineBackoff& backoff)
        : m_shared(shared), m_backoff(backoff) {}

    // Before the threads start: the registration on disk, when it is for this coordinator.
    void load();
    // Engine thread.
    bool registered() const { return m_registration.has_value(); }
    // Registers and keeps the answer; on failure, backs off and returns false.
    bool registerNow();
    // The coordinator no longer knows the token: register again at the next chance.
    void drop(const std::string& why);

    // Any thread: the pinned coordinator key; none while not registered.
    std::optional<net::PublicKey> coordinatorKey() const;

  private:
    void keep(const Registration& registration);

    EngineShared& m_shared;
    EngineBackoff& m_backoff;
    std::optional<Registration> m_registration;  // written by the engine thread under the mutex
};

}  // namespace tandem::core
