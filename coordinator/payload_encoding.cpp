#include "payload_encoding.hpp"

#include "codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tandem::coord {

namespace {

constexpr int64_t kBlock = net::kInt8ResultBlock;

// fp16 pieces come from uint16_t buffers (the stream's block, the reader's chunk).
std::span<const uint16_t> halvesOf(std::span<const uint8_t> bytes, int64_t n) {
    return {reinterpret_cast<const uint16_t*>(bytes.data()), static_cast<size_t>(n)};
}

// Calls fn(scale, values, firstOut, len) for each int8 block of the piece.
template <class Fn>
void forInt8Blocks(std::span<const uint8_t> bytes, int64_t n, Fn&& fn) {
    const uint8_t* at = bytes.data();
    for (int64_t lo = 0; lo < n; lo += kBlock) {
        const int64_t len = std::min(kBlock, n - lo);
        float scale;
        std::memcpy(&scale, at, 4);
        fn(scale, reinterpret_cast<const int8_t*>(at + 4), lo, len);
        at += 4 + len;
    }
}

}  // namespace

int64_t PayloadLayout::bytesOf(int64_t n) const {
    if (encoding == net::kEncodingInt8)
        return n + 4 * ((n + kBlock - 1) / kBlock);
    return 2 * n;
}

PieceScan scanPayload(const PayloadLayout& layout, std::span<const uint8_t> bytes, int64_t n) {
    PieceScan out;
    if (layout.encoding != net::kEncodingInt8) {
        const Fp16Scan s = scanFp16(halvesOf(bytes, n));
        out.nonFinite = s.nonFinite;
        out.sumSquares = s.sumSquares;
        return out;
    }
    forInt8Blocks(bytes, n, [&](float scale, const int8_t* q, int64_t, int64_t len) {
        if (!std::isfinite(scale) || scale < 0) {
            ++out.nonFinite;
            return;
        }
        int64_t squares = 0;  // at most 256 x 128^2: exact
        for (int64_t i = 0; i < len; ++i)
            squares += int64_t{q[i]} * q[i];
        out.sumSquares += static_cast<double>(scale) * scale * static_cast<double>(squares);
    });
    return out;
}

void decodePayload(const PayloadLayout& layout, std::span<const uint8_t> bytes,
                   std::span<float> out) {
    const int64_t n = static_cast<int64_t>(out.size());
    std::fill(out.begin(), out.end(), 0.0f);
    if (layout.encoding != net::kEncodingInt8) {
        accumulateFp16(out, halvesOf(bytes, n), 1.0f);
        return;
    }
    // accumulateInt8's arithmetic with weight 1: q x scale, one rounding.
    forInt8Blocks(bytes, n, [&](float scale, const int8_t* q, int64_t lo, int64_t len) {
        float* o = out.data() + lo;
        for (int64_t i = 0; i < len; ++i)
            o[i] = static_cast<float>(q[i]) * scale;
    });
}

}  // namespace tandem::coord
