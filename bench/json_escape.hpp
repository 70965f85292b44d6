// Benchmarks write their JSON by hand (a flat, fixed layout); this makes a string safe inside it.
#pragma once

#include <string>

namespace tandem::bench {

// Quotes and backslashes escaped, control characters dropped.
inline std::string jsonEscape(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '"' || c == '\\')
            out += '\\';
        if (static_cast<unsigned char>(c) >= 0x20)
            out += c;
    }
    return out;
}

}  // namespace tandem::bench
