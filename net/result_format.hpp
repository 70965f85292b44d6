// The binary result a worker uploads with PUT /v1/results/{id}: a fixed 128-byte header, then the
// payload, delta = theta_start - theta_end (P values) in one of two encodings:
//   1 fp16: P halves (2P bytes).
//   2 int8: NB = ceil(P / 256) blocks of 256 values (the last one may be shorter), each an f32
//     scale followed by its int8 values, q = round(x / scale) (kernels/codec_int8.hpp); P + 4 NB
//     bytes. Scale and values side by side, so a block can be decoded as soon as it has arrived.
//
// Header (little endian):
//   0  char[8] magic "TNDMRSLT"      8 u32 format version (1, 2)    12 u32 encoding (1 fp16, 2
//   int8) 16 i64 work unit id              24 i64 parameter count P     32 i64 tokens trained 40
//   i32 inner steps               44 f32 first loss            48 f32 last loss 52 f32 mean loss 56
//   i64 values saturated to +-65504 by the encoder (fp16;
//                                            always 0 for int8, whose absmax scale cannot overflow)
//   64 u8[32] SHA-256 of the payload                96 u8[32] reserved, zero
//
// The result digest is SHA-256 of the 128 header bytes (which include the payload's SHA-256); the
// client signs it with its Ed25519 key and sends the signature in the X-Tandem-Signature header.
// So the signature can be checked as soon as the header has arrived, and the payload digest at
// the end.
//
// Format version 2 (protocol v6, a run aggregated by K > 1 shards; docs/protocol.md "Sharded
// runs"): the header's payload SHA-256 field holds the SHA-256 of a piece table of K entries of
// 64 bytes (i64 begin, i64 end, u8[32] SHA-256 of the piece's payload bytes, f64 sum of squares of
// the piece's decoded values, u8[8] zero). Shard k owns values [begin_k, end_k) (pieceRanges, whole
// 256-value blocks) and receives the header, the whole table and its piece's payload bytes: one
// signature over the header covers every piece.
#pragma once

#include "crypto.hpp"
#include "expected.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tandem::net {

inline constexpr std::array<char, 8> kResultMagic = {'T', 'N', 'D', 'M', 'R', 'S', 'L', 'T'};
inline constexpr uint32_t kResultFormatVersion = 1;
// Format version 2: a piece table follows the header (a result of a sharded run, protocol v6).
inline constexpr uint32_t kResultFormatPieces = 2;
inline constexpr uint32_t kEncodingFp16 = 1;
inline constexpr uint32_t kEncodingInt8 = 2;
// Values per scale of an int8 result: fixed by the format (a manifest states it as
// "result_block", and a worker refuses any other).
inline constexpr int kInt8ResultBlock = 256;
inline constexpr size_t kResultHeaderBytes = 128;

// Payload bytes of P values in an encoding; 0 for an unknown encoding.
int64_t resultPayloadBytes(uint32_t encoding, int64_t parameterCount);
// "fp16", "int8"; "unknown" for any other.
const char* encodingName(uint32_t encoding);
// The encoding of a name ("fp16", "int8"); none for any other.
std::optional<uint32_t> encodingFromName(std::string_view name);

struct ResultHeader {
    uint32_t formatVersion = kResultFormatVersion;
    uint32_t encoding = kEncodingFp16;
    int64_t workUnitId = 0;
    int64_t parameterCount = 0;
    int64_t tokens = 0;
    int32_t steps = 0;
    float lossFirst = 0, lossLast = 0, lossMean = 0;
    int64_t saturated = 0;
    Sha256Digest payloadSha256{};

    int64_t payloadBytes() const { return resultPayloadBytes(encoding, parameterCount); }
    int64_t totalBytes() const { return static_cast<int64_t>(kResultHeaderBytes) + payloadBytes(); }
    bool operator==(const ResultHeader&) const = default;
};

std::array<uint8_t, kResultHeaderBytes> serializeResultHeader(const ResultHeader& header);
// Accepts format versions 1 (header + payload) and 2 (header + piece table); which one a body
// must have is the caller's check. Errors say what was found and what was expected (magic,
// version, encoding, sizes, reserved bytes, non-finite losses, a saturated count in an int8
// result).
Expected<ResultHeader> parseResultHeader(std::span<const uint8_t> bytes);

// SHA-256 of the serialized header: what the client signs.
Sha256Digest resultDigest(const ResultHeader& header);

// A whole fp16 result: header (encoding and P set from the payload, payloadSha256 filled in),
// then the payload.
std::vector<uint8_t> buildResult(ResultHeader header, std::span<const uint16_t> payload);
// A whole result of header.encoding and header.parameterCount: payload must hold
// header.payloadBytes() bytes (an error otherwise); payloadSha256 is filled in.
Expected<std::vector<uint8_t>> buildResult(ResultHeader header, std::span<const uint8_t> payload);

// The int8 payload of values (P) and scales (ceil(P / kInt8ResultBlock)): blocks of a scale and
// its values. Sizes must agree (an error otherwise).
Expected<std::vector<uint8_t>> int8Payload(std::span<const int8_t> values,
                                           std::span<const float> scales);

// ---- Pieces (format version 2, protocol v6)

// Bytes of one piece table entry, and the most shards (entries) a run may have.
inline constexpr size_t kPieceEntryBytes = 64;
inline constexpr int kMaxShards = 64;

// Values [begin, end) of the pseudo-gradient.
struct PieceRange {
    int64_t begin = 0, end = 0;
    bool operator==(const PieceRange&) const = default;
};

// The K ranges of P parameters: NB = ceil(P/256); begin_k = 256*floor(k*NB/K);
// end_k = min(P, 256*floor((k+1)*NB/K)). K in [1, kMaxShards] and K <= NB (else empty vector).
std::vector<PieceRange> pieceRanges(int64_t parameterCount, int shards);

// One entry of the piece table: the range, the SHA-256 of the piece's payload bytes and the sum of
// squares of its decoded values (payloadSumSquares).
struct PieceEntry {
    PieceRange range;
    Sha256Digest sha256{};
    double sumSquares = 0;
    bool operator==(const PieceEntry&) const = default;
};

// 64 bytes per entry, little endian: i64 begin, i64 end, u8[32] SHA-256, f64 sum of squares,
// u8[8] zero.
std::vector<uint8_t> serializePieceTable(std::span<const PieceEntry> entries);
// Checks: size is a multiple of 64 and 1..kMaxShards entries; the ranges are exactly
// pieceRanges(parameterCount, count); sums finite and >= 0; reserved bytes zero. Errors say what
// was found and expected.
Expected<std::vector<PieceEntry>> parsePieceTable(std::span<const uint8_t> bytes,
                                                  int64_t parameterCount);

// Payload bytes of values [begin, end) in an encoding (fp16: 2*(end-begin); int8: (end-begin) +
// 4*ceil((end-begin)/256)); 0 for an unknown encoding or an empty range.
int64_t piecePayloadBytes(uint32_t encoding, PieceRange range);
// The offset of that piece inside the whole payload of P values (fp16: 2*begin; int8: begin +
// 4*begin/256). begin must be a multiple of 256 for int8 (else -1); -1 for an unknown encoding.
int64_t piecePayloadOffset(uint32_t encoding, PieceRange range);

// Sum of squares, in double, of the decoded values of an encoded payload of `values` values
// (fp16 halves; int8 blocks of scale*q), in value order. A decoded value is exact in double
// (a half; q x scale with q and scale widened to double before the product), then squared and
// added in double. Errors: a payload of another size than `values` need, a NaN/Inf half, a
// non-finite or negative int8 scale, an unknown encoding.
Expected<double> payloadSumSquares(uint32_t encoding, std::span<const uint8_t> payload,
                                   int64_t values);

// A result of format version 2, ready to cut into piece bodies (pieceBody).
struct PiecedResult {
    ResultHeader header;         // formatVersion 2; payloadSha256 = SHA-256 of `table`
    std::vector<uint8_t> table;  // serialized piece table
    std::vector<PieceEntry> entries;
};

// From the whole payload (header.payloadBytes() bytes of header.encoding for
// header.parameterCount values) and the run's ranges (must be pieceRanges(P, ranges.size())).
Expected<PiecedResult> buildPiecedResult(ResultHeader header, std::span<const uint8_t> payload,
                                         std::span<const PieceRange> ranges);

// Body of the upload of piece k: the 128 header bytes, the table, piece k's payload bytes.
// payload is the whole payload the result was built from; k < entries.size().
std::vector<uint8_t> pieceBody(const PiecedResult& result, std::span<const uint8_t> payload,
                               size_t k);

}  // namespace tandem::net
