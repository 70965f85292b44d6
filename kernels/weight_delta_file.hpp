// Weight-delta files: the quantized update q of one version to the next (weight_delta.hpp) as
// the coordinator publishes it (a content-addressed blob) and a worker downloads it, and the
// worker's rebuild of a weights file from the one it holds and one or more deltas.
//
// Layout (little endian): magic "TNDMWDLT", u32 format version (1), u32 codec (1 int8, 2 fp16),
// i32 block size S (int8; 0 for fp16), u32 reserved (0), i64 parameter count P, i64 from
// version, i64 to version; then int8: NB fp32 scales and P int8 values, fp16: P u16 halves;
// then u32 CRC-32 of everything before it.
//
// Dimensions: P parameters, S block size, NB = ceil(P / S) blocks.
#pragma once

#include "checkpoint.hpp"
#include "expected.hpp"
#include "weight_delta.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace tandem {

inline constexpr uint32_t kWeightDeltaFileVersion = 1;

struct WeightDeltaFile {
    int64_t fromVersion = 0, toVersion = 0;
    QuantizedDelta delta;
};

std::vector<uint8_t> serializeWeightDelta(const WeightDeltaFile& file);
// Errors name what was found and what was expected: magic, format version, codec, truncation,
// sizes, checksum.
Expected<WeightDeltaFile> parseWeightDelta(std::span<const uint8_t> bytes);
// The file size of a delta of P parameters (what a worker compares with the full weights).
int64_t weightDeltaFileBytes(WeightDeltaCodec codec, int64_t P, int blockSize = kInt8DefaultBlock);

// weights (P) of fromVersion += each delta in turn (applyWeightDelta), which must chain:
// deltas[0].fromVersion == fromVersion, deltas[i + 1].fromVersion == deltas[i].toVersion, and
// fit P. On error the weights are unchanged.
Status applyWeightDeltaChain(std::vector<float>& weights, int64_t fromVersion,
                             std::span<const WeightDeltaFile> deltas, ThreadPool* pool = nullptr);

}  // namespace tandem
