// The binary result a worker uploads with PUT /v1/results/{id}: a fixed 128-byte header, then the
// payload (P fp16 values of delta = theta_start - theta_end).
//
// Header (little endian):
//   0  char[8] magic "TNDMRSLT"      8 u32 format version (1)     12 u32 encoding (1 = fp16)
//   16 i64 work unit id              24 i64 parameter count P     32 i64 tokens trained
//   40 i32 inner steps               44 f32 first loss            48 f32 last loss
//   52 f32 mean loss                 56 i64 values saturated to +-65504 by the encoder
//   64 u8[32] SHA-256 of the payload                96 u8[32] reserved, zero
//
// The result digest is SHA-256 of the 128 header bytes (which include the payload's SHA-256); the
// client signs it with its Ed25519 key and sends the signature in the X-Tandem-Signature header.
// So the signature can be checked as soon as the header has arrived, and the payload digest at
// the end.
#pragma once

#include "crypto.hpp"
#include "expected.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace tandem::net {

inline constexpr std::array<char, 8> kResultMagic = {'T', 'N', 'D', 'M', 'R', 'S', 'L', 'T'};
inline constexpr uint32_t kResultFormatVersion = 1;
inline constexpr uint32_t kEncodingFp16 = 1;
inline constexpr size_t kResultHeaderBytes = 128;

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

    int64_t payloadBytes() const { return parameterCount * 2; }
    int64_t totalBytes() const { return static_cast<int64_t>(kResultHeaderBytes) + payloadBytes(); }
    bool operator==(const ResultHeader&) const = default;
};

std::array<uint8_t, kResultHeaderBytes> serializeResultHeader(const ResultHeader& header);
// Errors say what was found and what was expected (magic, version, encoding, sizes, reserved
// bytes, non-finite losses).
Expected<ResultHeader> parseResultHeader(std::span<const uint8_t> bytes);

// SHA-256 of the serialized header: what the client signs.
Sha256Digest resultDigest(const ResultHeader& header);

// A whole result: header with payloadSha256 filled in, then the payload.
std::vector<uint8_t> buildResult(ResultHeader header, std::span<const uint16_t> payload);

}  // namespace tandem::net
