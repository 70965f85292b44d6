// A shard's part of a version (sharded runs, docs/protocol.md "Sharded runs"): the values of one
// parameter range, [begin, end) of P. A shard writes two per version it steps: the weights of
// its range, which it publishes as a blob for the other shards to assemble the whole weights
// from, and its range of the outer momentum, which only it reads.
//
// Layout (little endian): magic "TNDMPART", u32 format version 1, u32 kind (1 weights, 2
// momentum), i64 version, i64 P, i64 begin, i64 end, (end - begin) f32 values, u32 CRC-32 of
// everything before it.
//
// Dimensions: P parameters, N = end - begin values of the part.
#pragma once

#include "expected.hpp"
#include "result_format.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace tandem::coord {

inline constexpr uint32_t kPartFormatVersion = 1;

enum class PartKind : uint32_t { Weights = 1, Momentum = 2 };

struct PartFile {
    PartKind kind = PartKind::Weights;
    int64_t version = 0;
    int64_t parameterCount = 0;  // P of the whole model
    net::PieceRange range;
    std::vector<float> values;  // (N)
};

std::vector<uint8_t> serializePart(const PartFile& part);
// Errors say what was found and what was expected (magic, version, kind, sizes, checksum).
Expected<PartFile> parsePart(std::span<const uint8_t> bytes);
// parsePart, and refuses a part of another kind, version, P or range than expected.
Expected<PartFile> parsePartOf(std::span<const uint8_t> bytes, PartKind kind, int64_t version,
                               int64_t parameterCount, net::PieceRange range);
Expected<PartFile> loadPart(const std::filesystem::path& path, PartKind kind, int64_t version,
                            int64_t parameterCount, net::PieceRange range);

}  // namespace tandem::coord
