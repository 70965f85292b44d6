// Small text helpers that more than one folder needs.
#pragma once

#include <string>
#include <string_view>

namespace tandem {

// text without the white space (std::isspace) at its start and end.
std::string trimWhitespace(std::string_view text);

}  // namespace tandem
