// int8 pseudo-gradient codec with per-block absmax scaling. Each block is independent, so threads
// take whole blocks and the bytes do not depend on the thread count. The rounding uses the
// 1.5 * 2^23 trick (round to nearest even in the FPU's default mode), which vectorizes without
// SSE4.1; the file is built with -ffp-contract=off so every build rounds the same way.
//
// Dimensions: N elements, S block size, NB = ceil(N / S) blocks.
#include "codec_int8.hpp"

#include "codec_pieces.hpp"
#include "thread_pool.hpp"

#include <algorithm>
#include <bit>
#include <string>

namespace tandem {
namespace {

constexpr uint32_t kF32Inf = 0x7f800000u;
// Elements per piece of work: large enough that handing a piece to a thread costs nothing.
constexpr int64_t kMinChunk = 1 << 16;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23

// Calls fn(piece, firstBlock, endBlock) over contiguous block ranges; one piece without a pool.
template <class Fn>
void forBlockPieces(ThreadPool* pool, int64_t blocks, int blockSize, int maxPieces, Fn&& fn) {
    detail::forPieces(pool, blocks, std::max<int64_t>(1, kMinChunk / blockSize), maxPieces, fn);
}

using detail::PieceStats;

// One block: values (n), *scale; start (n), end (n). Returns the number of non-finite deltas.
int64_t encodeBlock(int8_t* values, float* scale, const float* start, const float* end, int64_t n) {
    // absmax through the magnitude bits: integer order is float order for non-negative floats,
    // and NaN/Inf sort above every finite value.
    uint32_t maxBits = 0;
    for (int64_t i = 0; i < n; ++i) {
        const uint32_t a = std::bit_cast<uint32_t>(start[i] - end[i]) & 0x7fffffffu;
        maxBits = std::max(maxBits, a);
    }
    if (maxBits >= kF32Inf) {
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i)
            bad += (std::bit_cast<uint32_t>(start[i] - end[i]) & 0x7fffffffu) >= kF32Inf;
        return bad;
    }
    const float s = std::bit_cast<float>(maxBits) / 127.0f;
    *scale = s;
    if (s == 0.0f) {  // all zeros (or below 127 x the smallest subnormal)
        std::fill(values, values + n, int8_t{0});
        return 0;
    }
    for (int64_t i = 0; i < n; ++i) {
        const float y = (start[i] - end[i]) / s;  // |y| <= 127 up to rounding
        const float r = (y + kRoundMagic) - kRoundMagic;
        values[i] = static_cast<int8_t>(std::clamp(static_cast<int32_t>(r), -127, 127));
    }
    return 0;
}

}  // namespace

Expected<EncodeStats> encodeDeltaInt8(std::span<const float> start, std::span<const float> end,
                                      int blockSize, std::span<int8_t> values,
                                      std::span<float> scales, ThreadPool* pool) {
    const int64_t n = static_cast<int64_t>(start.size());
    if (blockSize < 1)
        return makeError("int8 encode: block size " + std::to_string(blockSize) +
                         "; expected at least 1");
    const int64_t blocks = int8BlockCount(n, blockSize);
    if (end.size() != start.size() || values.size() != start.size() ||
        static_cast<int64_t>(scales.size()) != blocks) {
        return makeError(
            "int8 encode: sizes differ (start " + std::to_string(start.size()) + ", end " +
            std::to_string(end.size()) + ", values " + std::to_string(values.size()) + ", scales " +
            std::to_string(scales.size()) + "); expected equal sizes and " +
            std::to_string(blocks) + " scales for blocks of " + std::to_string(blockSize));
    }
    PieceStats pieces[64];
    forBlockPieces(pool, blocks, blockSize, 64, [&](int piece, int64_t first, int64_t stop) {
        PieceStats s;
        for (int64_t b = first; b < stop; ++b) {
            const int64_t lo = b * blockSize, hi = std::min(n, lo + blockSize);
            const int64_t bad = encodeBlock(values.data() + lo, scales.data() + b,
                                            start.data() + lo, end.data() + lo, hi - lo);
            if (bad > 0 && s.firstNonFinite < 0) {
                for (int64_t i = lo; i < hi; ++i) {
                    if ((std::bit_cast<uint32_t>(start[i] - end[i]) & 0x7fffffffu) >= kF32Inf) {
                        s.firstNonFinite = i;
                        break;
                    }
                }
            }
            s.nonFinite += bad;
        }
        pieces[piece] = s;
    });
    return detail::mergePieces(pieces, start, end);
}

Status accumulateInt8(std::span<float> sum, std::span<const int8_t> values,
                      std::span<const float> scales, int blockSize, float weight,
                      ThreadPool* pool) {
    const int64_t n = static_cast<int64_t>(sum.size());
    if (blockSize < 1)
        return makeError("int8 accumulate: block size " + std::to_string(blockSize) +
                         "; expected at least 1");
    const int64_t blocks = int8BlockCount(n, blockSize);
    if (values.size() != sum.size() || static_cast<int64_t>(scales.size()) != blocks) {
        return makeError("int8 accumulate: sum has " + std::to_string(sum.size()) +
                         " elements, values " + std::to_string(values.size()) + ", scales " +
                         std::to_string(scales.size()) + "; expected " + std::to_string(n) +
                         " values and " + std::to_string(blocks) + " scales");
    }
    forBlockPieces(pool, blocks, blockSize, 1 << 30, [&](int, int64_t first, int64_t stop) {
        for (int64_t b = first; b < stop; ++b) {
            const int64_t lo = b * blockSize, hi = std::min(n, lo + blockSize);
            const float s = scales[b];
            float* out = sum.data();
            const int8_t* q = values.data();
            for (int64_t i = lo; i < hi; ++i)
                out[i] += weight * (static_cast<float>(q[i]) * s);
        }
    });
    return {};
}

}  // namespace tandem
