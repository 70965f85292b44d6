// Pseudo-gradient codecs: fp16 encode of delta = start - end, and decode-and-accumulate into an
// fp32 sum. The worker encodes, the coordinator accumulates while an upload streams in, so both
// work on any sub-range of the parameter span.
//
// Dimensions: N elements (a whole parameter span P, or a chunk of it).
#pragma once

#include "expected.hpp"
#include "ops.hpp"  // EncodeStats

#include <cstdint>
#include <span>

namespace tandem {

class ThreadPool;

inline constexpr float kHalfMax = 65504.0f;

// Round to nearest even; finite values beyond +-65504 saturate to +-65504 (and set *saturated);
// NaN stays NaN, Inf stays Inf.
uint16_t floatToHalf(float value, bool* saturated = nullptr);
float halfToFloat(uint16_t half);

// out (N) = fp16(start (N) - end (N)). Stats count saturated and non-finite values; when any value
// is non-finite the result is an error and out must not be used.
Expected<EncodeStats> encodeDeltaFp16(std::span<const float> start, std::span<const float> end,
                                      std::span<uint16_t> out, ThreadPool* pool = nullptr);

// sum (N) += weight * decode(delta (N))
void accumulateFp16(std::span<float> sum, std::span<const uint16_t> delta, float weight,
                    ThreadPool* pool = nullptr);

// What the coordinator checks before a delta touches the sum.
struct Fp16Scan {
    int64_t nonFinite = 0;    // NaN or Inf halves
    double sumSquares = 0.0;  // of the finite values, for the norm bound
};
Fp16Scan scanFp16(std::span<const uint16_t> delta, ThreadPool* pool = nullptr);

}  // namespace tandem
