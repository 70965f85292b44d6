// The one decode path of result payloads (net/result_format.hpp) for either encoding: which
// bytes hold which values, the checks made before a payload may touch a sum (NaN/Inf, the sum of
// squares for the norm), and the decode into floats. The upload stream (upload_stream.hpp) and
// the stored payloads (payload_file.hpp) both go through it, so a value decodes to the same float
// wherever it is read.
//
// Pieces start at a value index that is a multiple of kInt8ResultBlock and hold whole int8
// blocks (the last piece may end at P inside one).
//
// Dimensions: P parameters, N values of one piece.
#pragma once

#include "result_format.hpp"

#include <cstdint>
#include <span>

namespace tandem::coord {

struct PayloadLayout {
    uint32_t encoding = net::kEncodingFp16;
    int64_t parameterCount = 0;  // P

    int64_t bytes() const { return net::resultPayloadBytes(encoding, parameterCount); }
    // Bytes of n values of a piece (it starts on a block boundary, so the layout repeats).
    int64_t bytesOf(int64_t n) const;
};

struct PieceScan {
    // fp16: NaN or Inf values; int8: NaN, Inf or negative scales (no encoder makes one).
    int64_t nonFinite = 0;
    // Of the decoded values: for fp16 as scanFp16 sums them; for int8 the sum over blocks of
    // scale^2 x the (exact) sum of q^2.
    double sumSquares = 0;
};

// The checks of a piece of N values held in bytes (layout.bytesOf(N) of them; fp16 pieces from
// uint16_t storage, so that they are aligned).
PieceScan scanPayload(const PayloadLayout& layout, std::span<const uint8_t> bytes, int64_t n);

// out (N) = the piece's values decoded from bytes, exactly as accumulateFp16 or accumulateInt8
// into zeros with weight 1 gives them.
void decodePayload(const PayloadLayout& layout, std::span<const uint8_t> bytes,
                   std::span<float> out);

}  // namespace tandem::coord
