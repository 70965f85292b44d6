// Durable file writes and whole-file reads, with errors that name the path and the reason.
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace tandem {

// Writes to "<path>.tmp", fsyncs it, renames it over path and fsyncs the directory, so after a
// crash path holds either the old or the new content, never a mix.
Status writeFileAtomically(const std::filesystem::path& path, std::span<const uint8_t> bytes);
// Same for secrets (keys): path and its temporary have mode 0600 from the start, also when a
// file with a wider mode was there, so the bytes are never readable by others.
Status writePrivateFileAtomically(const std::filesystem::path& path,
                                  std::span<const uint8_t> bytes);
Expected<std::vector<uint8_t>> readFile(const std::filesystem::path& path);

}  // namespace tandem
