// Text that came from a request (a path, a query value, a header), made safe to quote in an
// error message or a log line: valid UTF-8 (a JSON encoder throws on anything else), control
// characters escaped (a "%0a" in a path cannot forge a log line) and a bounded length.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tandem::net {

// `text` with every byte that is not part of a well-formed UTF-8 sequence written as \xHH,
// control characters as \n, \r, \t or \xHH, a backslash as \\, cut at a character boundary
// after at most `maxBytes` bytes of output (then "..." is appended).
std::string quotable(std::string_view text, size_t maxBytes = 120);

// A log line from parts that may hold request text: quotable() with a longer bound.
std::string loggable(std::string_view text);

}  // namespace tandem::net
