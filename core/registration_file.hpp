// registration.json (0600 in the data directory): the client id, the bearer token and the
// coordinator key pinned when this machine registered with the coordinator at coordinatorUrl.
// The engine writes it (registration.hpp); the desktop app reads it to ask the coordinator for
// this donor's standing with the same token.
#pragma once

#include "crypto.hpp"
#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace tandem::core {

struct Registration {
    std::string coordinatorUrl;
    int64_t clientId = 0;
    std::string token;
    net::PublicKey coordinatorKey{};
};

// The file's text (JSON).
std::string registrationJson(const Registration& registration);
// The registration kept in `path`; an error naming the file and what is wrong with it (missing,
// not JSON, a field missing or of the wrong type, a key that is not base64 of 32 bytes).
Expected<Registration> readRegistrationFile(const std::filesystem::path& path);

}  // namespace tandem::core
