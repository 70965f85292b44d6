// What kind of trouble holds the engine back after an error, as a code: the UI words it and
// decides how it looks. Transient trouble (the server unreachable or busy) is waited out; the
// rest needs the donor (a wrong pin, an untrusted certificate, a refused registration, versions
// that do not match, a full disk) and the UI offers the settings page that fixes it.
#pragma once

#include <string_view>

namespace tandem::core {

enum class Problem {
    None,
    Unreachable,       // no connection (refused, name not resolved, timeout, cut): retrying
    ServerBusy,        // 429 / 5xx: retrying
    WrongPin,          // the server's public key is not the pinned one
    Certificate,       // the certificate is not trusted (CA, host name, TLS)
    Unauthorized,      // 401/403 of the registration or token
    ProtocolMismatch,  // this worker and the coordinator speak different protocol versions
    DiskFull,          // no space left in the data directory
    Other,             // anything else: retrying, the log has its words
};

const char* toString(Problem problem);  // "unreachable", "wrong_pin", ...
// Problems the engine cannot get past by waiting: the donor has to change something.
bool needsAttention(Problem problem);
// The problem of a failure the transport did not classify (a local error, a fake in tests):
// from its HTTP status and its words ("No space left on device", "protocol version ... is not
// supported").
Problem problemFromFailure(long httpStatus, std::string_view message);

}  // namespace tandem::core
