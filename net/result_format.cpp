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
    if (h.formatVersion != kResultFormatVersion && h.formatVersion != kResultFormatPieces)
        return makeError("result format version " + std::to_string(h.formatVersion) +
                         " is not supported, expected " + std::to_string(kResultFormatVersion) +
                         " or " + std::to_string(kResultFormatPieces));
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

// ---- pieces

namespace {

std::string rangeText(PieceRange r) {
    return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
}

// A half as the exact double it stands for; NaN/Inf as themselves.
double halfToDouble(uint16_t h) {
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    double v;
    if (exponent == 0)
        v = std::ldexp(static_cast<double>(mantissa), -24);
    else if (exponent == 31)
        v = mantissa == 0 ? HUGE_VAL : std::nan("");
    else
        v = std::ldexp(static_cast<double>(mantissa | 0x400), exponent - 25);
    return (h & 0x8000) ? -v : v;
}

}  // namespace

std::vector<PieceRange> pieceRanges(int64_t parameterCount, int shards) {
    const int64_t blocks = (parameterCount + kInt8ResultBlock - 1) / kInt8ResultBlock;
    if (parameterCount <= 0 || shards < 1 || shards > kMaxShards || shards > blocks)
        return {};
    std::vector<PieceRange> out;
    out.reserve(static_cast<size_t>(shards));
    for (int k = 0; k < shards; ++k) {
        const int64_t begin = kInt8ResultBlock * (k * blocks / shards);
        const int64_t end =
            std::min(parameterCount, kInt8ResultBlock * ((k + 1) * blocks / shards));
        out.push_back({begin, end});
    }
    return out;
}

std::vector<uint8_t> serializePieceTable(std::span<const PieceEntry> entries) {
    std::vector<uint8_t> out(entries.size() * kPieceEntryBytes, 0);
    for (size_t i = 0; i < entries.size(); ++i) {
        uint8_t* at = out.data() + i * kPieceEntryBytes;
        put(at, 0, entries[i].range.begin);
        put(at, 8, entries[i].range.end);
        std::memcpy(at + 16, entries[i].sha256.data(), 32);
        put(at, 48, entries[i].sumSquares);
    }
    return out;
}

Expected<std::vector<PieceEntry>> parsePieceTable(std::span<const uint8_t> bytes,
                                                  int64_t parameterCount) {
    if (bytes.empty() || bytes.size() % kPieceEntryBytes != 0 ||
        bytes.size() > kPieceEntryBytes * kMaxShards)
        return makeError("piece table: " + std::to_string(bytes.size()) + " bytes, expected 1 to " +
                         std::to_string(kMaxShards) + " entries of " +
                         std::to_string(kPieceEntryBytes) + " bytes");
    const int count = static_cast<int>(bytes.size() / kPieceEntryBytes);
    const auto expected = pieceRanges(parameterCount, count);
    if (expected.empty())
        return makeError("piece table: " + std::to_string(count) + " pieces of " +
                         std::to_string(parameterCount) + " parameters, expected at most one per " +
                         std::to_string(kInt8ResultBlock) + "-value block");
    std::vector<PieceEntry> out(static_cast<size_t>(count));
    for (size_t i = 0; i < out.size(); ++i) {
        const uint8_t* at = bytes.data() + i * kPieceEntryBytes;
        PieceEntry& e = out[i];
        e.range = {get<int64_t>(at, 0), get<int64_t>(at, 8)};
        std::memcpy(e.sha256.data(), at + 16, 32);
        e.sumSquares = get<double>(at, 48);
        const std::string which = "piece table entry " + std::to_string(i) + ": ";
        if (e.range != expected[i])
            return makeError(which + "range " + rangeText(e.range) + ", expected " +
                             rangeText(expected[i]) + " (piece " + std::to_string(i) + " of " +
                             std::to_string(count) + " of " + std::to_string(parameterCount) +
                             " parameters)");
        if (!std::isfinite(e.sumSquares) || e.sumSquares < 0)
            return makeError(which + "sum of squares " + std::to_string(e.sumSquares) +
                             ", expected a finite number >= 0");
        for (size_t b = 56; b < kPieceEntryBytes; ++b)
            if (at[b] != 0)
                return makeError(which + "reserved byte " + std::to_string(b) +
                                 " is not zero (a newer format?)");
    }
    return out;
}

int64_t piecePayloadBytes(uint32_t encoding, PieceRange range) {
    if (range.end <= range.begin)
        return 0;
    return resultPayloadBytes(encoding, range.end - range.begin);
}

int64_t piecePayloadOffset(uint32_t encoding, PieceRange range) {
    if (encoding == kEncodingFp16)
        return 2 * range.begin;
    if (encoding == kEncodingInt8 && range.begin % kInt8ResultBlock == 0)
        return range.begin + 4 * (range.begin / kInt8ResultBlock);
    return -1;
}

Expected<double> payloadSumSquares(uint32_t encoding, std::span<const uint8_t> payload,
                                   int64_t values) {
    const int64_t expected = resultPayloadBytes(encoding, values);
    if (expected <= 0 || static_cast<int64_t>(payload.size()) != expected)
        return makeError("payload of " + std::to_string(values) + " values in encoding " +
                         encodingName(encoding) + ": " + std::to_string(payload.size()) +
                         " bytes, expected " + std::to_string(expected));
    double sum = 0;
    if (encoding == kEncodingFp16) {
        for (int64_t i = 0; i < values; ++i) {
            const double v =
                halfToDouble(get<uint16_t>(payload.data(), static_cast<size_t>(2 * i)));
            if (!std::isfinite(v))
                return makeError("payload value " + std::to_string(i) + " is not finite");
            sum += v * v;
        }
        return sum;
    }
    const uint8_t* at = payload.data();
    for (int64_t lo = 0; lo < values; lo += kInt8ResultBlock) {
        const int64_t len = std::min<int64_t>(kInt8ResultBlock, values - lo);
        const float scale = get<float>(at, 0);
        if (!std::isfinite(scale) || scale < 0)
            return makeError("payload block " + std::to_string(lo / kInt8ResultBlock) + ": scale " +
                             std::to_string(scale) + " is not a finite number >= 0");
        for (int64_t i = 0; i < len; ++i) {
            const double v = static_cast<double>(static_cast<int8_t>(at[4 + i])) * scale;
            sum += v * v;
        }
        at += 4 + len;
    }
    return sum;
}

Expected<PiecedResult> buildPiecedResult(ResultHeader header, std::span<const uint8_t> payload,
                                         std::span<const PieceRange> ranges) {
    const int64_t expectedBytes = header.payloadBytes();
    if (expectedBytes <= 0 || static_cast<int64_t>(payload.size()) != expectedBytes)
        return makeError("result payload: " + std::to_string(payload.size()) + " bytes, expected " +
                         std::to_string(expectedBytes) + " for " +
                         std::to_string(header.parameterCount) + " values in encoding " +
                         encodingName(header.encoding));
    const auto expected = pieceRanges(header.parameterCount, static_cast<int>(ranges.size()));
    if (expected.empty() ||
        !std::equal(ranges.begin(), ranges.end(), expected.begin(), expected.end()))
        return makeError("result pieces: the " + std::to_string(ranges.size()) +
                         " ranges are not the pieces of " + std::to_string(header.parameterCount) +
                         " parameters in " + std::to_string(ranges.size()) + " shards");
    PiecedResult out;
    out.entries.reserve(ranges.size());
    for (const PieceRange& r : ranges) {
        const auto offset = static_cast<size_t>(piecePayloadOffset(header.encoding, r));
        const auto bytes = static_cast<size_t>(piecePayloadBytes(header.encoding, r));
        const auto piece = payload.subspan(offset, bytes);
        auto squares = payloadSumSquares(header.encoding, piece, r.end - r.begin);
        if (!squares)
            return makeError("result piece " + rangeText(r) + ": " + squares.error().message);
        out.entries.push_back({r, sha256(piece), *squares});
    }
    out.table = serializePieceTable(out.entries);
    header.formatVersion = kResultFormatPieces;
    header.payloadSha256 = sha256(std::span<const uint8_t>(out.table));
    out.header = header;
    return out;
}

std::vector<uint8_t> pieceBody(const PiecedResult& result, std::span<const uint8_t> payload,
                               size_t k) {
    const PieceRange r = result.entries.at(k).range;
    const auto head = serializeResultHeader(result.header);
    const auto piece =
        payload.subspan(static_cast<size_t>(piecePayloadOffset(result.header.encoding, r)),
                        static_cast<size_t>(piecePayloadBytes(result.header.encoding, r)));
    std::vector<uint8_t> out(head.size() + result.table.size() + piece.size());
    std::memcpy(out.data(), head.data(), head.size());
    if (!result.table.empty())
        std::memcpy(out.data() + head.size(), result.table.data(), result.table.size());
    if (!piece.empty())
        std::memcpy(out.data() + head.size() + result.table.size(), piece.data(), piece.size());
    return out;
}

}  // namespace tandem::net
