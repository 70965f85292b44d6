// Weight-delta files (layout in weight_delta_file.hpp) and the rebuild of a version from a chain
// of them.
//
// Dimensions: P parameters, NB blocks.
#include "weight_delta_file.hpp"

#include <bit>
#include <cstring>
#include <string>

namespace tandem {
namespace {

static_assert(std::endian::native == std::endian::little, "weight deltas are little endian");

constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'W', 'D', 'L', 'T'};
// magic, version, codec, block size, reserved, P, from, to
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 4 + 4 + 8 + 8 + 8;
constexpr size_t kCrcBytes = 4;
constexpr uint32_t kCodecInt8 = 1, kCodecFp16 = 2;

template <class T>
void put(std::vector<uint8_t>& out, T value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    out.insert(out.end(), p, p + sizeof(T));
}
template <class T>
void putAll(std::vector<uint8_t>& out, const std::vector<T>& values) {
    const auto* p = reinterpret_cast<const uint8_t*>(values.data());
    out.insert(out.end(), p, p + values.size() * sizeof(T));
}
template <class T>
T get(std::span<const uint8_t> bytes, size_t at) {
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof(T));
    return v;
}
template <class T>
void getAll(std::span<const uint8_t> bytes, size_t at, std::vector<T>& out, size_t n) {
    out.resize(n);
    std::memcpy(out.data(), bytes.data() + at, n * sizeof(T));
}

int64_t payloadBytes(uint32_t codec, int64_t P, int blockSize) {
    return codec == kCodecFp16 ? 2 * P : int8EncodedBytes(P, blockSize);
}

}  // namespace

int64_t weightDeltaFileBytes(WeightDeltaCodec codec, int64_t P, int blockSize) {
    return static_cast<int64_t>(kHeaderBytes + kCrcBytes) +
           payloadBytes(codec == WeightDeltaCodec::Fp16 ? kCodecFp16 : kCodecInt8, P, blockSize);
}

std::vector<uint8_t> serializeWeightDelta(const WeightDeltaFile& file) {
    const QuantizedDelta& q = file.delta;
    const bool fp16 = q.codec == WeightDeltaCodec::Fp16;
    const int64_t P = q.parameterCount();
    std::vector<uint8_t> out;
    out.reserve(static_cast<size_t>(weightDeltaFileBytes(q.codec, P, q.blockSize)));
    for (char c : kMagic)
        out.push_back(static_cast<uint8_t>(c));
    put(out, kWeightDeltaFileVersion);
    put(out, fp16 ? kCodecFp16 : kCodecInt8);
    put(out, static_cast<int32_t>(fp16 ? 0 : q.blockSize));
    put(out, uint32_t{0});
    put(out, P);
    put(out, file.fromVersion);
    put(out, file.toVersion);
    if (fp16) {
        putAll(out, q.halves);
    } else {
        putAll(out, q.scales);
        putAll(out, q.values);
    }
    put(out, crc32(out));
    return out;
}

Expected<WeightDeltaFile> parseWeightDelta(std::span<const uint8_t> bytes) {
    const size_t size = bytes.size();
    if (size < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
        return makeError("not a Tandem weight delta: " + std::to_string(size) +
                         " bytes without the magic 'TNDMWDLT'");
    if (size < kHeaderBytes + kCrcBytes)
        return makeError("weight delta truncated: " + std::to_string(size) +
                         " bytes, expected at least " + std::to_string(kHeaderBytes + kCrcBytes));
    const auto version = get<uint32_t>(bytes, 8);
    if (version != kWeightDeltaFileVersion)
        return makeError("weight delta format version is " + std::to_string(version) +
                         ", expected " + std::to_string(kWeightDeltaFileVersion));
    const auto codec = get<uint32_t>(bytes, 12);
    const auto blockSize = get<int32_t>(bytes, 16);
    const auto P = get<int64_t>(bytes, 24);
    WeightDeltaFile f;
    f.fromVersion = get<int64_t>(bytes, 32);
    f.toVersion = get<int64_t>(bytes, 40);
    if (codec != kCodecInt8 && codec != kCodecFp16)
        return makeError("weight delta codec is " + std::to_string(codec) +
                         ", expected 1 (int8) or 2 (fp16)");
    if ((codec == kCodecInt8 && blockSize < 1) || (codec == kCodecFp16 && blockSize != 0) ||
        get<uint32_t>(bytes, 20) != 0)
        return makeError("weight delta header is inconsistent (block size " +
                         std::to_string(blockSize) + " for codec " + std::to_string(codec) + ")");
    if (P < 1 || P > (int64_t{1} << 40) || f.fromVersion < 0 || f.toVersion <= f.fromVersion)
        return makeError("weight delta header is invalid: " + std::to_string(P) +
                         " parameters, versions " + std::to_string(f.fromVersion) + " -> " +
                         std::to_string(f.toVersion));
    const int64_t expected =
        static_cast<int64_t>(kHeaderBytes + kCrcBytes) + payloadBytes(codec, P, blockSize);
    if (static_cast<int64_t>(size) != expected)
        return makeError("weight delta of " + std::to_string(P) + " parameters has " +
                         std::to_string(size) + " bytes, expected " + std::to_string(expected) +
                         (static_cast<int64_t>(size) < expected ? " (truncated)" : ""));
    const uint32_t stored = get<uint32_t>(bytes, size - kCrcBytes);
    if (crc32(bytes.first(size - kCrcBytes)) != stored)
        return makeError("weight delta checksum does not match (damaged file)");
    QuantizedDelta& q = f.delta;
    if (codec == kCodecFp16) {
        q.codec = WeightDeltaCodec::Fp16;
        getAll(bytes, kHeaderBytes, q.halves, static_cast<size_t>(P));
    } else {
        q.codec = WeightDeltaCodec::Int8;
        q.blockSize = blockSize;
        const auto blocks = static_cast<size_t>(int8BlockCount(P, blockSize));
        getAll(bytes, kHeaderBytes, q.scales, blocks);
        getAll(bytes, kHeaderBytes + 4 * blocks, q.values, static_cast<size_t>(P));
    }
    return f;
}

Status applyWeightDeltaChain(std::vector<float>& weights, int64_t fromVersion,
                             std::span<const WeightDeltaFile> deltas, ThreadPool* pool) {
    int64_t at = fromVersion;
    for (const WeightDeltaFile& d : deltas) {
        if (d.fromVersion != at)
            return makeError("weight deltas do not chain: a delta from version " +
                             std::to_string(d.fromVersion) + " follows version " +
                             std::to_string(at));
        if (d.delta.parameterCount() != static_cast<int64_t>(weights.size()))
            return makeError("a weight delta has " + std::to_string(d.delta.parameterCount()) +
                             " parameters, expected " + std::to_string(weights.size()));
        at = d.toVersion;
    }
    std::vector<float> next = weights;  // untouched on error
    for (const WeightDeltaFile& d : deltas)
        if (auto st = applyWeightDelta(next, d.delta, pool); !st)
            return st;
    weights.swap(next);
    return {};
}

}  // namespace tandem
