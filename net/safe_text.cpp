#include "safe_text.hpp"

#include "text.hpp"

#include <cstdint>

namespace tandem::net {
namespace {

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
