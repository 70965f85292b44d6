#include "safe_text.hpp"

#include <cstdint>

namespace tandem::net {
namespace {

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF), or 0 when the byte there does not start one.
size_t utf8Length(std::string_view s, size_t i) {
    const auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
    const uint8_t b = at(i);
    size_t n = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF) {
        n = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0)
            lo = 0xA0;
        if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0)
            lo = 0x90;
        if (b == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi)
        return 0;
    for (size_t k = 2; k < n; ++k)
        if (at(i + k) < 0x80 || at(i + k) > 0xBF)
            return 0;
    return n;
}

std::string hexEscape(uint8_t b) {
    static const char* kDigits = "0123456789abcdef";
    return {'\\', 'x', kDigits[b >> 4], kDigits[b & 15]};
}

}  // namespace

std::string quotable(std::string_view text, size_t maxBytes) {
    std::string out;
    out.reserve(std::min(text.size(), maxBytes) + 4);
    for (size_t i = 0; i < text.size();) {
        const size_t n = utf8Length(text, i);
        std::string piece;
        const auto b = static_cast<uint8_t>(text[i]);
        if (n == 0) {
            piece = hexEscape(b);
        } else if (n == 1 && (b < 0x20 || b == 0x7F || b == '\\')) {
            piece = b == '\n'   ? "\\n"
                    : b == '\r' ? "\\r"
                    : b == '\t' ? "\\t"
                    : b == '\\' ? "\\\\"
                                : hexEscape(b);
        } else if (n == 2 && b == 0xC2 && static_cast<uint8_t>(text[i + 1]) < 0xA0) {
            piece = "\\u00" + hexEscape(static_cast<uint8_t>(text[i + 1])).substr(2);  // C1 (NEL)
        } else {
            piece.assign(text.substr(i, n));
        }
        if (out.size() + piece.size() > maxBytes)
            return out + "...";
        out += piece;
        i += n == 0 ? 1 : n;
    }
    return out;
}

std::string loggable(std::string_view text) {
    return quotable(text, 2000);
}

}  // namespace tandem::net
