#include "part_file.hpp"

#include "checkpoint.hpp"  // crc32
#include "file_io.hpp"

#include <cstring>

namespace tandem::coord {

namespace {

constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'P', 'A', 'R', 'T'};
constexpr size_t kHeadBytes = 8 + 4 + 4 + 8 * 4;
constexpr size_t kCrcBytes = 4;

template <class T>
void put(std::vector<uint8_t>& out, size_t at, T v) {
    std::memcpy(out.data() + at, &v, sizeof(T));  // little-endian hosts only, as every file here
}

template <class T>
T get(std::span<const uint8_t> bytes, size_t at) {
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof(T));
    return v;
}

const char* kindName(PartKind kind) {
    return kind == PartKind::Weights ? "weights" : "momentum";
}

}  // namespace

std::vector<uint8_t> serializePart(const PartFile& part) {
    const size_t valueBytes = part.values.size() * sizeof(float);
    std::vector<uint8_t> out(kHeadBytes + valueBytes + kCrcBytes);
    std::memcpy(out.data(), kMagic, 8);
    put(out, 8, kPartFormatVersion);
    put(out, 12, static_cast<uint32_t>(part.kind));
    put(out, 16, part.version);
    put(out, 24, part.parameterCount);
    put(out, 32, part.range.begin);
    put(out, 40, part.range.end);
    if (valueBytes > 0)
        std::memcpy(out.data() + kHeadBytes, part.values.data(), valueBytes);
    put(out, kHeadBytes + valueBytes,
        crc32(std::span<const uint8_t>(out).first(kHeadBytes + valueBytes)));
    return out;
}

Expected<PartFile> parsePart(std::span<const uint8_t> bytes) {
    if (bytes.size() < kHeadBytes + kCrcBytes)
        return makeError("a part file has at least " + std::to_string(kHeadBytes + kCrcBytes) +
                         " bytes; this one has " + std::to_string(bytes.size()));
    if (std::memcmp(bytes.data(), kMagic, 8) != 0)
        return makeError("not a part file (the magic is not TNDMPART)");
    if (const uint32_t v = get<uint32_t>(bytes, 8); v != kPartFormatVersion)
        return makeError("part file format version " + std::to_string(v) + "; expected " +
                         std::to_string(kPartFormatVersion));
    PartFile p;
    const uint32_t kind = get<uint32_t>(bytes, 12);
    if (kind != 1 && kind != 2)
        return makeError("part file of unknown kind " + std::to_string(kind));
    p.kind = static_cast<PartKind>(kind);
    p.version = get<int64_t>(bytes, 16);
    p.parameterCount = get<int64_t>(bytes, 24);
    p.range = {get<int64_t>(bytes, 32), get<int64_t>(bytes, 40)};
    if (p.parameterCount <= 0 || p.range.begin < 0 || p.range.end <= p.range.begin ||
        p.range.end > p.parameterCount)
        return makeError("part file of range [" + std::to_string(p.range.begin) + ", " +
                         std::to_string(p.range.end) + ") of P = " +
                         std::to_string(p.parameterCount) + ": not a range of the model");
    const uint64_t n = static_cast<uint64_t>(p.range.end - p.range.begin);
    if (bytes.size() != kHeadBytes + n * 4 + kCrcBytes)
        return makeError("a part file of " + std::to_string(n) + " values has " +
                         std::to_string(kHeadBytes + n * 4 + kCrcBytes) + " bytes; this one has " +
                         std::to_string(bytes.size()) + " (truncated or damaged)");
    const auto body = bytes.first(bytes.size() - kCrcBytes);
    if (crc32(body) != get<uint32_t>(bytes, body.size()))
        return makeError("the part file's CRC-32 does not match its bytes (damaged)");
    p.values.resize(n);
    std::memcpy(p.values.data(), bytes.data() + kHeadBytes, n * 4);
    return p;
}

Expected<PartFile> parsePartOf(std::span<const uint8_t> bytes, PartKind kind, int64_t version,
                               int64_t parameterCount, net::PieceRange range) {
    auto p = parsePart(bytes);
    if (!p)
        return p;
    const auto describe = [](PartKind k, int64_t v, int64_t n, net::PieceRange r) {
        return std::string(kindName(k)) + " of version " + std::to_string(v) + ", range [" +
               std::to_string(r.begin) + ", " + std::to_string(r.end) +
               ") of P = " + std::to_string(n);
    };
    if (p->kind != kind || p->version != version || p->parameterCount != parameterCount ||
        !(p->range == range))
        return makeError("the part file holds " +
                         describe(p->kind, p->version, p->parameterCount, p->range) +
                         "; expected " + describe(kind, version, parameterCount, range));
    return p;
}

Expected<PartFile> loadPart(const std::filesystem::path& path, PartKind kind, int64_t version,
                            int64_t parameterCount, net::PieceRange range) {
    auto bytes = readFile(path);
    if (!bytes)
        return bytes.error();
    auto p = parsePartOf(*bytes, kind, version, parameterCount, range);
    if (!p)
        return makeError(path.string() + ": " + p.error().message);
    return p;
}

}  // namespace tandem::coord
