// What the fp16 and int8 codecs share (internal to kernels/): splitting N elements into pieces
// for the thread pool, and merging the pieces' counts into EncodeStats or the non-finite error.
//
// Dimensions: N elements.
#pragma once

#include "expected.hpp"
#include "ops.hpp"  // EncodeStats
#include "thread_pool.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

namespace tandem::detail {

// Calls fn(piece, begin, end) over at most maxPieces contiguous pieces of [0, n), each at least
// minChunk long where possible; one piece without a pool.
template <class Fn>
void forPieces(ThreadPool* pool, int64_t n, int64_t minChunk, int maxPieces, Fn&& fn) {
    int pieces = 1;
    if (pool != nullptr) {
        pieces = static_cast<int>(
            std::clamp<int64_t>((n + minChunk - 1) / minChunk, 1, pool->threads()));
    }
    pieces = std::min(pieces, maxPieces);
    if (pieces <= 1) {
        fn(0, int64_t{0}, n);
        return;
    }
    pool->run(pieces, [&](int piece) { fn(piece, n * piece / pieces, n * (piece + 1) / pieces); });
}

struct PieceStats {
    int64_t saturated = 0;
    int64_t nonFinite = 0;
    int64_t firstNonFinite = -1;  // element index, -1: none
};

// Sums the pieces (in piece order); any non-finite delta is an error naming the first one.
// start (N), end (N)
inline Expected<EncodeStats> mergePieces(std::span<const PieceStats> pieces,
                                         std::span<const float> start, std::span<const float> end) {
    EncodeStats stats;
    int64_t firstNonFinite = -1;
    for (const PieceStats& s : pieces) {
        stats.saturated += s.saturated;
        stats.nonFinite += s.nonFinite;
        if (firstNonFinite < 0)
            firstNonFinite = s.firstNonFinite;
    }
    if (stats.nonFinite > 0) {
        const auto i = static_cast<size_t>(firstNonFinite);
        const float d = start[i] - end[i];
        return makeError("pseudo-gradient has " + std::to_string(stats.nonFinite) +
                         " non-finite value(s) (first at parameter " +
                         std::to_string(firstNonFinite) + ": " + std::to_string(d) +
                         "); expected all finite, nothing was encoded");
    }
    return stats;
}

}  // namespace tandem::detail
