// What the coordinator answers and logs: refusals (HTTP status, stable code, a message a person
// can act on) and numbers in messages.
#pragma once

#include "coordinator.hpp"

#include <sstream>
#include <string>

namespace tandem::coord {

inline Refusal refuse(int status, std::string code, std::string message, int retryAfter = 0) {
    return Refusal{status, std::move(code), std::move(message), retryAfter};
}

inline Refusal internalError(const std::string& what) {
    return refuse(500, "internal", "the coordinator failed: " + what);
}

// 507: the state directory's disk has no room for what an upload must store; nothing was
// counted, and a worker retries after Retry-After as after any 5xx.
inline Refusal diskFull(const std::string& what) {
    return refuse(507, "insufficient_storage",
                  "the coordinator's disk is full: it cannot store " + what +
                      " now; nothing was counted, retry later",
                  60);
}

// x with `digits` significant digits.
inline std::string fmt(double x, int digits = 4) {
    std::ostringstream s;
    s.precision(digits);
    s << x;
    return s.str();
}

}  // namespace tandem::coord
