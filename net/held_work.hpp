// The work units a client holds (GET /v1/work) and the request id that makes POST /v1/work
// idempotent (docs/protocol.md, "Held work units"). Parsers name the field that is wrong.
#pragma once

#include "expected.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::net {

// The header of POST /v1/work that carries the worker's request id (its idempotency key).
inline constexpr const char* kRequestIdHeader = "Idempotency-Key";
inline constexpr size_t kMaxRequestIdChars = 64;
inline constexpr size_t kMaxHeldWorkUnits = 1000;  // a list longer than this is refused

// 1 to kMaxRequestIdChars letters, digits, '-' or '_'.
bool isRequestId(std::string_view id);
// A fresh request id: 128 bits of the OpenSSL CSPRNG as 32 hex digits.
std::string newRequestId();

// One unit the coordinator counts as the client's (state assigned: not yet accepted or
// abandoned).
struct HeldWorkUnit {
    int64_t workUnitId = 0;
    std::string requestId;  // the request id it was assigned for; empty when none was sent
    int64_t baseVersion = 0;
    int64_t lastStep = 0;       // the step of its last heartbeat
    int64_t heartbeatUnix = 0;  // its last sign of life
    int64_t deadlineUnix = 0;

    bool operator==(const HeldWorkUnit&) const = default;
};

// {"work_units": [{"work_unit_id": ..., "request_id": ..., ...}, ...]}, ordered by id.
struct HeldWorkUnits {
    std::vector<HeldWorkUnit> units;
    std::string toJson() const;
    static Expected<HeldWorkUnits> fromJson(std::string_view text);
};

}  // namespace tandem::net
