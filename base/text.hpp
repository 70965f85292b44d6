// Small text helpers that more than one folder needs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tandem {

// text without the white space (std::isspace) at its start and end.
std::string trimWhitespace(std::string_view text);

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF), or 0 when the byte there does not start one. i < s.size().
size_t utf8Length(std::string_view s, size_t i);

// text with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD, as
// a decoder shows bytes a model wrote that do not form characters.
std::string validUtf8(std::string_view text);

}  // namespace tandem
