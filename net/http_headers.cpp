#include "http_headers.hpp"

#include "text.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>

namespace tandem::net {

using std::chrono::milliseconds;

std::string asciiLower(std::string s) {
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool startsWithNoCase(const std::string& s, const std::string& prefixLowerCase) {
    return s.size() >= prefixLowerCase.size() &&
           asciiLower(s.substr(0, prefixLowerCase.size())) == prefixLowerCase;
}

std::optional<milliseconds> parseRetryAfter(const std::string& value,
                                            std::chrono::system_clock::time_point now) {
    const std::string v = trimWhitespace(value);
    if (v.empty())
        return std::nullopt;
    if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        if (v.size() > 9)
            return milliseconds(std::chrono::hours(24 * 365));
        return milliseconds(std::stoll(v) * 1000);
    }
    const time_t at = curl_getdate(v.c_str(), nullptr);
    if (at < 0)
        return std::nullopt;
    // A date centuries ahead overflows system_clock's nanoseconds (found by fuzz_http_text):
    // capped at a year, as a long number of seconds is above.
    constexpr time_t kYearSeconds = 365 * 24 * 3600;
    if (at - std::chrono::system_clock::to_time_t(now) > kYearSeconds)
        return milliseconds(std::chrono::hours(24 * 365));
    const auto when = std::chrono::system_clock::from_time_t(at);
    if (when <= now)
        return milliseconds(0);
    return std::chrono::duration_cast<milliseconds>(when - now);
}

std::optional<ContentRange> parseContentRange(const std::string& value) {
    const std::string v = trimWhitespace(value);
    if (!startsWithNoCase(v, "bytes "))
        return std::nullopt;
    const std::string rest = trimWhitespace(v.substr(6));
    const size_t slash = rest.find('/');
    if (slash == std::string::npos)
        return std::nullopt;
    auto number = [](const std::string& s, int64_t& out) {
        if (s.empty() || s.size() > 18 ||
            !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return false;
        out = std::stoll(s);
        return true;
    };
    ContentRange r;
    const std::string range = rest.substr(0, slash), total = rest.substr(slash + 1);
    if (total != "*" && !number(total, r.total))
        return std::nullopt;
    if (range == "*")
        return r;
    const size_t dash = range.find('-');
    if (dash == std::string::npos || !number(range.substr(0, dash), r.first) ||
        !number(range.substr(dash + 1), r.last) || r.last < r.first)
        return std::nullopt;
    return r;
}

}  // namespace tandem::net
