// The kinds of trouble behind a backoff.
#include "problem.hpp"

namespace tandem::core {

const char* toString(Problem problem) {
    switch (problem) {
        case Problem::None:
            return "none";
        case Problem::Unreachable:
            return "unreachable";
        case Problem::ServerBusy:
            return "server_busy";
        case Problem::WrongPin:
            return "wrong_pin";
        case Problem::Certificate:
            return "certificate";
        case Problem::Unauthorized:
            return "unauthorized";
        case Problem::ProtocolMismatch:
            return "protocol_mismatch";
        case Problem::DiskFull:
            return "disk_full";
        case Problem::Other:
            return "other";
    }
    return "other";
}

bool needsAttention(Problem problem) {
    switch (problem) {
        case Problem::WrongPin:
        case Problem::Certificate:
        case Problem::Unauthorized:
        case Problem::ProtocolMismatch:
        case Problem::DiskFull:
            return true;
        default:
            return false;
    }
}

Problem problemFromFailure(long httpStatus, std::string_view message) {
    if (message.find("No space left on device") != std::string_view::npos)
        return Problem::DiskFull;
    if (message.find("protocol version") != std::string_view::npos &&
        message.find("is not supported") != std::string_view::npos)
        return Problem::ProtocolMismatch;
    if (httpStatus == 401 || httpStatus == 403)
        return Problem::Unauthorized;
    if (httpStatus == 429 || httpStatus >= 500)
        return Problem::ServerBusy;
    return Problem::Other;
}

}  // namespace tandem::core
