#include "result_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace tandem::net {

namespace {

template <class T>
void put(uint8_t* out, size_t offset, T value) {
    std::memcpy(out + offset, &value, sizeof(T));  // little endian hosts only (x86-64, arm64)
}

template <class T>
T get(const uint8_t* in, size_t offset) {
    T value;
    std::memcpy(&value, in + offset, sizeof(T));
    return value;
}

}  // namespace

int64_t resultPayloadBytes(uint32_t encoding, int64_t parameterCount) {
    if (encoding == kEncodingFp16)
        return 2 * parameterCount;
    if (encoding == kEncodingInt8)
        return parameterCount + 4 * ((parameterCount + kInt8ResultBlock - 1) / kInt8ResultBlock);
    return 0;
}

const char* encodingName(uint32_t encoding) {
    return encoding == kEncodingFp16 ? "fp16" : encoding == kEncodingInt8 ? "int8" : "unknown";
}

std::optional<uint32_t> encodingFromName(std::string_view name) {
    if (name == "fp16")
        return kEncodingFp16;
    if (name == "int8")
        return kEncodingInt8;
    return std::nullopt;
}

std::array<uint8_t, kResultHeaderBytes> serializeResultHeader(const ResultHeader& h) {
    std::array<uint8_t, kResultHeaderBytes> out{};
    std::memcpy(out.data(), kResultMagic.data(), kResultMagic.size());
    put(out.data(), 8, h.formatVersion);
    put(out.data(), 12, h.encoding);
    put(out.data(), 16, h.workUnitId);
    put(out.data(), 24, h.parameterCount);
    put(out.data(), 32, h.tokens);
    put(out.data(), 40, h.steps);
    put(out.data(), 44, h.lossFirst);
    put(out.data(), 48, h.lossLast);
    put(out.data(), 52, h.lossMean);
    put(out.data(), 56, h.saturated);
    std::memcpy(out.data() + 64, h.payloadSha256.data(), 32);
    return out;
}

Expected<ResultHeader> parseResultHeader(std::span<const uint8_t> bytes) {
    if (bytes.size() < kResultHeaderBytes)
        return makeError("result header truncated: " + std::to_string(bytes.size()) +
                         " bytes, expected " + std::to_string(kResultHeaderBytes));
    const uint8_t* p = bytes.data();
    if (std::memcmp(p, kResultMagic.data(), kResultMagic.size()) != 0)
        return makeError("not a Tandem result: the first 8 bytes are not the magic \"TNDMRSLT\"");
    ResultHeader h;
    h.formatVersion = get<uint32_t>(p, 8);
    if (h.formatVersion != kResultFormatVersion)
        return makeError("result format version " + std::to_string(h.formatVersion) +
                         " is not supported, expected " + std::to_string(kResultFormatVersion));
    h.encoding = get<uint32_t>(p, 12);
    if (h.encoding != kEncodingFp16 && h.encoding != kEncodingInt8)
        return makeError("result encoding " + std::to_string(h.encoding) +
                         " is not supported, expected 1 (fp16) or 2 (int8)");
    h.workUnitId = get<int64_t>(p, 16);
    h.parameterCount = get<int64_t>(p, 24);
    h.tokens = get<int64_t>(p, 32);
    h.steps = get<int32_t>(p, 40);
    h.lossFirst = get<float>(p, 44);
    h.lossLast = get<float>(p, 48);
    h.lossMean = get<float>(p, 52);
    h.saturated = get<int64_t>(p, 56);
    std::memcpy(h.payloadSha256.data(), p + 64, 32);
    if (h.workUnitId <= 0)
        return makeError("result header: work unit id " + std::to_string(h.workUnitId) +
                         " must be positive");
    if (h.parameterCount <= 0 || h.parameterCount > (int64_t{1} << 36))
        return makeError("result header: parameter count " + std::to_string(h.parameterCount) +
                         " is out of range");
    if (h.tokens <= 0)
        return makeError("result header: tokens " + std::to_string(h.tokens) + " must be positive");
    if (h.steps <= 0)
        return makeError("result header: steps " + std::to_string(h.steps) + " must be positive");
    if (h.saturated < 0 || h.saturated > h.parameterCount)
        return makeError("result header: saturated count " + std::to_string(h.saturated) +
                         " is outside [0, parameter count]");
    if (h.encoding == kEncodingInt8 && h.saturated != 0)
        return makeError("result header: an int8 result saturates nothing, but its header counts " +
                         std::to_string(h.saturated) + " saturated values");
    if (!std::isfinite(h.lossFirst) || !std::isfinite(h.lossLast) || !std::isfinite(h.lossMean))
        return makeError("result header: a loss statistic is not finite");
    for (size_t i = 96; i < kResultHeaderBytes; ++i)
        if (p[i] != 0)
            return makeError("result header: reserved byte " + std::to_string(i) +
                             " is not zero (a newer format?)");
    return h;
}

Sha256Digest resultDigest(const ResultHeader& header) {
    auto bytes = serializeResultHeader(header);
    return sha256(std::span<const uint8_t>(bytes));
}

namespace {

std::vector<uint8_t> headerThenPayload(ResultHeader header, std::span<const uint8_t> payload) {
    header.payloadSha256 = sha256(payload);
    auto head = serializeResultHeader(header);
    std::vector<uint8_t> out(head.size() + payload.size());
    std::memcpy(out.data(), head.data(), head.size());
    if (!payload.empty())
        std::memcpy(out.data() + head.size(), payload.data(), payload.size());
    return out;
}

}  // namespace

std::vector<uint8_t> buildResult(ResultHeader header, std::span<const uint16_t> payload) {
    header.encoding = kEncodingFp16;
    header.parameterCount = static_cast<int64_t>(payload.size());
    return headerThenPayload(
        header, std::span(reinterpret_cast<const uint8_t*>(payload.data()), payload.size() * 2));
}

Expected<std::vector<uint8_t>> buildResult(ResultHeader header, std::span<const uint8_t> payload) {
    const int64_t expected = header.payloadBytes();
    if (expected <= 0 || static_cast<int64_t>(payload.size()) != expected)
        return makeError("result payload: " + std::to_string(payload.size()) + " bytes, expected " +
                         std::to_string(expected) + " for " +
                         std::to_string(header.parameterCount) + " values in encoding " +
                         encodingName(header.encoding));
    return headerThenPayload(header, payload);
}

Expected<std::vector<uint8_t>> int8Payload(std::span<const int8_t> values,
                                           std::span<const float> scales) {
    const int64_t n = static_cast<int64_t>(values.size());
    const int64_t blocks = (n + kInt8ResultBlock - 1) / kInt8ResultBlock;
    if (static_cast<int64_t>(scales.size()) != blocks)
        return makeError("int8 payload: " + std::to_string(scales.size()) + " scales for " +
                         std::to_string(n) + " values, expected " + std::to_string(blocks));
    std::vector<uint8_t> out(static_cast<size_t>(resultPayloadBytes(kEncodingInt8, n)));
    uint8_t* at = out.data();
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t lo = b * kInt8ResultBlock;
        const int64_t len = std::min<int64_t>(kInt8ResultBlock, n - lo);
        std::memcpy(at, &scales[static_cast<size_t>(b)], 4);
        std::memcpy(at + 4, values.data() + lo, static_cast<size_t>(len));
        at += 4 + len;
    }
    return out;
}

}  // namespace tandem::net
