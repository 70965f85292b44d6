// fp16 pseudo-gradient codec in portable code. The per-element conversions are branchless so the
// compiler vectorizes the loops (this file is built with -ftree-vectorize); rounding is round to
// nearest even, identical to the F16C instructions for every finite input that fits in a half.
// The loops are compiled for AVX2 and for baseline x86-64 (target_clones, picked at load time);
// both copies do the same integer work and the same IEEE float operations, so the same bits.
//
// Dimensions: N elements.
#include "codec.hpp"

#include "codec_pieces.hpp"
#include "thread_pool.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <string>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TANDEM_CODEC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TANDEM_CODEC_CLONES
#endif

namespace tandem {
namespace {

constexpr uint32_t kF32Inf = 0x7f800000u;
constexpr uint32_t kF32HalfMax = 0x477fe000u;        // 65504.0f
constexpr uint32_t kF32HalfMinNormal = 0x38800000u;  // 2^-14
constexpr uint32_t kF32Half = 0x3f000000u;           // 0.5f

// Elements per piece of work: large enough that handing a piece to a thread costs nothing.
constexpr int64_t kMinChunk = 1 << 16;
// scanFp16 sums squares in fixed blocks, then adds the block sums in order, so the result does
// not depend on the thread count.
constexpr int64_t kScanBlock = 1 << 16;

// |x| as float bits (sign cleared) -> half bits without sign. Branchless.
inline uint32_t magnitudeToHalf(uint32_t a) {
    // Finite values beyond the largest half saturate to it (0x7bff).
    const uint32_t clamped = a < kF32HalfMax ? a : kF32HalfMax;
    // Normal halves: drop 13 mantissa bits with round to nearest even, rebias the exponent.
    const uint32_t normal = (clamped + 0xfffu + ((clamped >> 13) & 1u) - (112u << 23)) >> 13;
    // Subnormal halves: adding 0.5f aligns the unit 2^-24 with the last mantissa bit, and the
    // FPU's round to nearest even does the rounding; the low bits are then the half's bits.
    const float small = std::bit_cast<float>(clamped) + 0.5f;
    const uint32_t subnormal = std::bit_cast<uint32_t>(small) - kF32Half;
    // Inf stays Inf; NaN becomes a quiet NaN keeping the top payload bits (as F16C does).
    const uint32_t special = a > kF32Inf ? (0x7e00u | ((a >> 13) & 0x3ffu)) : 0x7c00u;
    const uint32_t finite = clamped < kF32HalfMinNormal ? subnormal : normal;
    return a >= kF32Inf ? special : finite;
}

inline float decodeHalf(uint32_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t shifted = (h & 0x7fffu) << 13;  // exponent and mantissa in float position
    const uint32_t exponent = shifted & 0x0f800000u;
    // Normal: rebias by 127 - 15. Inf/NaN: exponent all ones; NaN gets the quiet bit (as F16C).
    const uint32_t normal = shifted + (112u << 23);
    const uint32_t special = (shifted + (224u << 23)) | ((h & 0x3ffu) != 0 ? 0x00400000u : 0u);
    // Subnormal (and zero): m * 2^-24 = (2^-14 * (1 + m/1024)) - 2^-14, exact.
    const float subnormal =
        std::bit_cast<float>(shifted + (113u << 23)) - std::bit_cast<float>(113u << 23);
    const uint32_t bits = exponent == 0x0f800000u
                              ? special
                              : (exponent == 0 ? std::bit_cast<uint32_t>(subnormal) : normal);
    return std::bit_cast<float>(bits | sign);
}

using detail::forPieces;
using detail::PieceStats;

// out (n), start (n), end (n)
TANDEM_CODEC_CLONES PieceStats encodeRange(uint16_t* out, const float* start, const float* end,
                                           int64_t n) {
    // Count in 32-bit lanes (vectorizes); n per call stays far below 2^32 in blocks.
    PieceStats stats;
    constexpr int64_t kBlock = 1 << 20;
    for (int64_t b = 0; b < n; b += kBlock) {
        const int64_t e = std::min(n, b + kBlock);
        uint32_t saturated = 0, nonFinite = 0;
        for (int64_t i = b; i < e; ++i) {
            const uint32_t x = std::bit_cast<uint32_t>(start[i] - end[i]);
            const uint32_t a = x & 0x7fffffffu;
            saturated += (a > kF32HalfMax) & (a < kF32Inf);
            nonFinite += a >= kF32Inf;
            out[i] = static_cast<uint16_t>(((x >> 16) & 0x8000u) | magnitudeToHalf(a));
        }
        stats.saturated += saturated;
        if (nonFinite != 0 && stats.nonFinite == 0) {
            for (int64_t i = b; i < e; ++i) {
                if ((std::bit_cast<uint32_t>(start[i] - end[i]) & 0x7fffffffu) >= kF32Inf) {
                    stats.firstNonFinite = i;
                    break;
                }
            }
        }
        stats.nonFinite += nonFinite;
    }
    return stats;
}

// sum (n) += weight * decode(delta (n))
TANDEM_CODEC_CLONES void accumulateRange(float* sum, const uint16_t* delta, float weight,
                                         int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        sum[i] += weight * decodeHalf(delta[i]);
}

// Sum of squares of the finite halves of delta (n); counts the others. The square of a half is
// exact in float; sixteen float lanes each add 16 of them (relative error below 1e-6), then the
// lanes go into a double in a fixed order, so the sum does not depend on threads.
TANDEM_CODEC_CLONES double scanBlock(const uint16_t* delta, int64_t n, int64_t* nonFinite) {
    constexpr int kLanes = 16, kGroup = 16 * kLanes;
    double total = 0.0;
    uint32_t bad = 0;
    int64_t i = 0;
    for (; i + kGroup <= n; i += kGroup) {
        float lanes[kLanes] = {};
        for (int k = 0; k < kGroup; k += kLanes) {
            for (int j = 0; j < kLanes; ++j) {
                const uint32_t h = delta[i + k + j];
                const bool special = (h & 0x7c00u) == 0x7c00u;
                bad += special;
                const float v = special ? 0.0f : decodeHalf(h);
                lanes[j] += v * v;
            }
        }
        double group = 0.0;
        for (int j = 0; j < kLanes; ++j)
            group += lanes[j];
        total += group;
    }
    for (; i < n; ++i) {
        const uint32_t h = delta[i];
        const bool special = (h & 0x7c00u) == 0x7c00u;
        bad += special;
        const float v = special ? 0.0f : decodeHalf(h);
        total += static_cast<double>(v * v);
    }
    *nonFinite = bad;
    return total;
}

}  // namespace

uint16_t floatToHalf(float value, bool* saturated) {
    const uint32_t x = std::bit_cast<uint32_t>(value);
    const uint32_t a = x & 0x7fffffffu;
    if (saturated != nullptr)
        *saturated = a > kF32HalfMax && a < kF32Inf;
    return static_cast<uint16_t>(((x >> 16) & 0x8000u) | magnitudeToHalf(a));
}

float halfToFloat(uint16_t half) {
    return decodeHalf(half);
}

Expected<EncodeStats> encodeDeltaFp16(std::span<const float> start, std::span<const float> end,
                                      std::span<uint16_t> out, ThreadPool* pool) {
    if (start.size() != end.size() || start.size() != out.size()) {
        return makeError("fp16 encode: sizes differ (start " + std::to_string(start.size()) +
                         ", end " + std::to_string(end.size()) + ", out " +
                         std::to_string(out.size()) + "); expected equal sizes");
    }
    const int64_t n = static_cast<int64_t>(start.size());
    PieceStats pieces[64];
    forPieces(pool, n, kMinChunk, 64, [&](int piece, int64_t begin, int64_t stop) {
        PieceStats s =
            encodeRange(out.data() + begin, start.data() + begin, end.data() + begin, stop - begin);
        if (s.firstNonFinite >= 0)
            s.firstNonFinite += begin;
        pieces[piece] = s;
    });
    return detail::mergePieces(pieces, start, end);
}

void accumulateFp16(std::span<float> sum, std::span<const uint16_t> delta, float weight,
                    ThreadPool* pool) {
    assert(sum.size() == delta.size());
    const int64_t n = static_cast<int64_t>(std::min(sum.size(), delta.size()));
    forPieces(pool, n, kMinChunk, 1 << 30, [&](int, int64_t begin, int64_t stop) {
        accumulateRange(sum.data() + begin, delta.data() + begin, weight, stop - begin);
    });
}

Fp16Scan scanFp16(std::span<const uint16_t> delta, ThreadPool* pool) {
    const int64_t n = static_cast<int64_t>(delta.size());
    const int64_t blocks = (n + kScanBlock - 1) / kScanBlock;
    std::vector<double> blockSums(static_cast<size_t>(blocks));
    std::vector<int64_t> blockNonFinite(static_cast<size_t>(blocks));
    forPieces(pool, blocks, 1, 1 << 30, [&](int, int64_t begin, int64_t stop) {
        for (int64_t b = begin; b < stop; ++b) {
            const int64_t lo = b * kScanBlock, hi = std::min(n, lo + kScanBlock);
            blockSums[b] = scanBlock(delta.data() + lo, hi - lo, &blockNonFinite[b]);
        }
    });
    Fp16Scan scan;
    for (int64_t b = 0; b < blocks; ++b) {
        scan.sumSquares += blockSums[b];
        scan.nonFinite += blockNonFinite[b];
    }
    return scan;
}

}  // namespace tandem
