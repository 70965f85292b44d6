// HTTP header values the client reads: the header map, Retry-After and Content-Range.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tandem::net {

// Header names are stored lower case.
using HttpHeaders = std::multimap<std::string, std::string>;

// "120" or an HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT") relative to `now`; nullopt when
// neither. Dates in the past give 0.
std::optional<std::chrono::milliseconds> parseRetryAfter(const std::string& value,
                                                         std::chrono::system_clock::time_point now);

// "bytes 100-199/1000" -> {100, 199, 1000} (total -1 for "*").
struct ContentRange {
    int64_t first = -1, last = -1, total = -1;
};
std::optional<ContentRange> parseContentRange(const std::string& value);

// Small text helpers of the header parsing, shared by the client's parts.
std::string asciiLower(std::string s);
bool startsWithNoCase(const std::string& s, const std::string& prefixLowerCase);

}  // namespace tandem::net
