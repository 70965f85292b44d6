// Checkpoint files: the model configuration, the flat parameters and, optionally, the AdamW
// moments and step. Used for work-unit checkpoints on the worker and for the global weights the
// coordinator publishes.
//
// Layout (little endian): magic "TNDMCKPT", u32 format version, u32 flags (bit 0: moments
// present), the config (L, NH, C, T, V as i32), i64 parameter count P, i64 AdamW step, P floats,
// [P floats m, P floats v], u32 CRC-32 of everything before it.
#pragma once

#include "backend.hpp"  // OptimizerState
#include "expected.hpp"
#include "model.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

namespace tandem {

inline constexpr uint32_t kCheckpointVersion = 1;

struct Checkpoint {
    ModelConfig config;
    std::vector<float> parameters;            // (P)
    std::optional<OptimizerState> optimizer;  // moments (P) each, and the step
};

// CRC-32 as in zlib (polynomial 0xEDB88320); pass a previous result to continue over more bytes.
uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc = 0);

std::vector<uint8_t> serializeCheckpoint(const Checkpoint& checkpoint);
// Errors name what was found and what was expected: magic, version, truncation, checksum,
// sizes that contradict the config.
Expected<Checkpoint> parseCheckpoint(std::span<const uint8_t> bytes);

// Written atomically: temp file, fsync, rename, fsync of the directory.
Status saveCheckpoint(const std::filesystem::path& path, const Checkpoint& checkpoint);
Expected<Checkpoint> loadCheckpoint(const std::filesystem::path& path);
// As above, and refuses a checkpoint whose config differs from the expected one.
Expected<Checkpoint> loadCheckpoint(const std::filesystem::path& path, const ModelConfig& expected);

}  // namespace tandem
