// Request text the coordinator quotes and the header values the client reads: safe_text's
// quotable()/loggable() (every output valid UTF-8, free of control characters, bounded, and
// accepted by the JSON encoder), Retry-After, Content-Range and the idempotency key.
#include "fuzz_common.hpp"
#include "held_work.hpp"
#include "http_headers.hpp"
#include "safe_text.hpp"

#include <nlohmann/json.hpp>

#include <chrono>

namespace {

using tandem::fuzz::isUtf8;

// No C0 control, DEL or C1 control (U+0080..U+009F, encoded C2 80..C2 9F) in the output.
bool hasNoControls(std::string_view s) {
    for (size_t i = 0; i < s.size(); ++i) {
        const auto b = static_cast<uint8_t>(s[i]);
        if (b < 0x20 || b == 0x7F)
            return false;
        if (b == 0xC2 && i + 1 < s.size() && static_cast<uint8_t>(s[i + 1]) < 0xA0)
            return false;
    }
    return true;
}

void checkQuoted(std::string_view in, const std::string& out, size_t maxBytes) {
    FUZZ_CHECK(isUtf8(out));
    FUZZ_CHECK(hasNoControls(out));
    FUZZ_CHECK(out.size() <= maxBytes + 3);  // + "..."
    // What the coordinator does with it: the JSON encoder must not throw (issue 19).
    const std::string dumped = nlohmann::json{{"message", out}}.dump();
    FUZZ_CHECK(!dumped.empty());
    // Printable ASCII without a backslash, short enough, comes through unchanged.
    bool plain = in.size() <= maxBytes;
    for (char c : in)
        plain = plain && c >= 0x20 && c < 0x7F && c != '\\';
    if (plain)
        FUZZ_CHECK(out == in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tandem::fuzz::Input in(data, size);
    const uint8_t selector = in.byte();
    const std::string text(in.restText());
    switch (selector % 4) {
        case 0: {
            const size_t maxBytes = in.byte() % 64;  // small bounds: cuts inside characters
            checkQuoted(text, tandem::net::quotable(text, maxBytes), maxBytes);
            checkQuoted(text, tandem::net::quotable(text), 120);
            checkQuoted(text, tandem::net::loggable(text), 2000);
            break;
        }
        case 1: {
            const auto now = std::chrono::system_clock::from_time_t(1'800'000'000);
            auto after = tandem::net::parseRetryAfter(text, now);
            if (after)
                FUZZ_CHECK(after->count() >= 0);
            break;
        }
        case 2: {
            auto range = tandem::net::parseContentRange(text);
            if (range) {
                FUZZ_CHECK(range->total >= -1);
                if (range->first >= 0)
                    FUZZ_CHECK(range->first <= range->last);
            }
            break;
        }
        default: {
            bool expected = !text.empty() && text.size() <= tandem::net::kMaxRequestIdChars;
            for (char c : text)
                expected = expected && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                        (c >= '0' && c <= '9') || c == '-' || c == '_');
            FUZZ_CHECK(tandem::net::isRequestId(text) == expected);
            break;
        }
    }
    return 0;
}
