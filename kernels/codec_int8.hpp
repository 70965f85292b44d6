// int8 pseudo-gradient codec with per-block absmax scaling: delta = start - end is cut into blocks
// of S consecutive elements; each block stores one fp32 scale = absmax / 127 and one int8 per
// element, q = round_to_nearest(x / scale) in [-127, 127] (-128 is never produced). Decoding gives
// q * scale, within absmax / 254 of x (half a step), plus a few fp32 roundings of the scale. About
// 1 + 4 / S bytes per parameter instead of 2 for fp16. Like the fp16 codec, any NaN/Inf refuses the
// whole encode.
//
// Dimensions: N elements, S block size (elements per scale), NB = ceil(N / S) blocks.
#pragma once

#include "expected.hpp"
#include "ops.hpp"  // EncodeStats

#include <cstdint>
#include <span>

namespace tandem {

class ThreadPool;

inline constexpr int kInt8DefaultBlock = 256;

inline int64_t int8BlockCount(int64_t n, int blockSize) {
    return blockSize <= 0 ? 0 : (n + blockSize - 1) / blockSize;
}
// Bytes on the wire: N int8 values and NB fp32 scales.
inline int64_t int8EncodedBytes(int64_t n, int blockSize) {
    return n + 4 * int8BlockCount(n, blockSize);
}

// values (N) and scales (NB) = int8(start (N) - end (N)). The last block may be partial. Any
// NaN/Inf makes the result an error (stats.nonFinite counted, message with the first index) and
// values/scales must not be used. saturated is always 0: absmax scaling cannot overflow.
Expected<EncodeStats> encodeDeltaInt8(std::span<const float> start, std::span<const float> end,
                                      int blockSize, std::span<int8_t> values,
                                      std::span<float> scales, ThreadPool* pool = nullptr);

// sum (N) += weight * (values (N) * scales (NB) per block). Sizes must agree with blockSize; the
// result is the same for any pool (each element is touched once, in one fixed order of ops).
Status accumulateInt8(std::span<float> sum, std::span<const int8_t> values,
                      std::span<const float> scales, int blockSize, float weight,
                      ThreadPool* pool = nullptr);

}  // namespace tandem
