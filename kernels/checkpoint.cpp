// Checkpoint files (layout in checkpoint.hpp). Every field is read with a bounds check, and the
// header is checked before the sizes it implies are trusted; the CRC-32 at the end catches
// corruption anywhere else.
//
// Dimensions: P parameters.
#include "checkpoint.hpp"

#include "file_io.hpp"

#include <array>
#include <bit>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <string>

namespace tandem {
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoints are little endian");

constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'C', 'K', 'P', 'T'};
constexpr uint32_t kFlagMoments = 1u;
// magic, version, flags, 5 x i32 config, i64 P, i64 step
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 5 * 4 + 8 + 8;
constexpr size_t kCrcBytes = 4;

// CRC-32 as in zlib (reflected polynomial 0xEDB88320), sliced by 8 bytes for speed.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr CrcTables makeCrcTables() {
    CrcTables t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k)
            c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
        for (int s = 1; s < 8; ++s)
            t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xffu];
    }
    return t;
}

constexpr CrcTables kCrcTables = makeCrcTables();

class Writer {
  public:
    explicit Writer(size_t capacity) { m_bytes.reserve(capacity); }
    template <class T>
    void put(T value) {
        const auto* p = reinterpret_cast<const uint8_t*>(&value);
        m_bytes.insert(m_bytes.end(), p, p + sizeof(T));
    }
    void putFloats(const std::vector<float>& values, size_t count) {
        const size_t n = std::min(values.size(), count);
        const auto* p = reinterpret_cast<const uint8_t*>(values.data());
        m_bytes.insert(m_bytes.end(), p, p + n * sizeof(float));
        m_bytes.resize(m_bytes.size() + (count - n) * sizeof(float), 0);
    }
    std::vector<uint8_t>& bytes() { return m_bytes; }

  private:
    std::vector<uint8_t> m_bytes;
};

template <class T>
T get(std::span<const uint8_t> bytes, size_t offset) {
    T value;
    std::memcpy(&value, bytes.data() + offset, sizeof(T));
    return value;
}

std::vector<float> getFloats(std::span<const uint8_t> bytes, size_t offset, size_t count) {
    std::vector<float> values(count);
    std::memcpy(values.data(), bytes.data() + offset, count * sizeof(float));
    return values;
}

std::string hex32(uint32_t value) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", value);
    return text;
}

std::string printableMagic(std::span<const uint8_t> bytes) {
    std::string text;
    for (size_t i = 0; i < 8 && i < bytes.size(); ++i) {
        const uint8_t c = bytes[i];
        if (c >= 0x20 && c < 0x7f) {
            text += static_cast<char>(c);
        } else {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
            text += escaped;
        }
    }
    return text;
}

Error truncated(size_t size, size_t expected, const char* part) {
    return makeError("checkpoint is truncated at byte " + std::to_string(size) + " of " +
                     std::to_string(expected) + " (" + part + ")");
}

Error withPath(const std::filesystem::path& path, const Error& error) {
    return makeError("checkpoint '" + path.string() + "': " + error.message);
}

}  // namespace

uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc) {
    const auto& t = kCrcTables;
    uint32_t c = ~crc;
    const uint8_t* p = bytes.data();
    size_t n = bytes.size();
    while (n >= 8) {
        uint32_t lo;
        uint32_t hi;
        std::memcpy(&lo, p, 4);
        std::memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^ t[5][(lo >> 16) & 0xffu] ^ t[4][lo >> 24] ^
            t[3][hi & 0xffu] ^ t[2][(hi >> 8) & 0xffu] ^ t[1][(hi >> 16) & 0xffu] ^ t[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        c = t[0][(c ^ *p++) & 0xffu] ^ (c >> 8);
    return ~c;
}

std::vector<uint8_t> serializeCheckpoint(const Checkpoint& checkpoint) {
    const size_t P = checkpoint.parameters.size();
    const bool moments = checkpoint.optimizer.has_value();
    assert(!moments ||
           (checkpoint.optimizer->m.size() == P && checkpoint.optimizer->v.size() == P));
    Writer w(kHeaderBytes + P * sizeof(float) * (moments ? 3 : 1) + kCrcBytes);
    for (char c : kMagic)
        w.put(static_cast<uint8_t>(c));
    w.put(kCheckpointVersion);
    w.put(moments ? kFlagMoments : 0u);
    const ModelConfig& c = checkpoint.config;
    for (int32_t v : {c.layers, c.heads, c.channels, c.maxSeqLen, c.vocabSize})
        w.put(v);
    w.put(static_cast<int64_t>(P));
    w.put(static_cast<int64_t>(moments ? checkpoint.optimizer->step : 0));
    w.putFloats(checkpoint.parameters, P);
    if (moments) {
        w.putFloats(checkpoint.optimizer->m, P);
        w.putFloats(checkpoint.optimizer->v, P);
    }
    w.put(crc32(w.bytes()));
    return std::move(w.bytes());
}

Expected<Checkpoint> parseCheckpoint(std::span<const uint8_t> bytes) {
    const size_t size = bytes.size();
    if (size == 0)
        return makeError("checkpoint is empty: 0 bytes, expected a TNDMCKPT file");
    if (size < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
        if (size < sizeof kMagic && std::memcmp(bytes.data(), kMagic, size) == 0) {
            return truncated(size, kHeaderBytes, "header");
        }
        return makeError("not a Tandem checkpoint: magic is '" + printableMagic(bytes) +
                         "', expected 'TNDMCKPT'");
    }
    if (size < 12)
        return truncated(size, kHeaderBytes, "header");
    const uint32_t version = get<uint32_t>(bytes, 8);
    if (version != kCheckpointVersion) {
        return makeError("checkpoint format version is " + std::to_string(version) + ", expected " +
                         std::to_string(kCheckpointVersion));
    }
    if (size < kHeaderBytes)
        return truncated(size, kHeaderBytes, "header");
    const uint32_t flags = get<uint32_t>(bytes, 12);
    if ((flags & ~kFlagMoments) != 0) {
        return makeError("checkpoint flags are " + hex32(flags) +
                         ", expected only bit 0 (moments)");
    }
    const bool moments = (flags & kFlagMoments) != 0;
    Checkpoint checkpoint;
    ModelConfig& c = checkpoint.config;
    c.layers = get<int32_t>(bytes, 16);
    c.heads = get<int32_t>(bytes, 20);
    c.channels = get<int32_t>(bytes, 24);
    c.maxSeqLen = get<int32_t>(bytes, 28);
    c.vocabSize = get<int32_t>(bytes, 32);
    if (Status s = c.validate(); !s) {
        return makeError("checkpoint holds an invalid model config: " + s.error().message);
    }
    const int64_t P = get<int64_t>(bytes, 36);
    if (P != c.parameterCount()) {
        return makeError("checkpoint holds " + std::to_string(P) + " parameters, expected " +
                         std::to_string(c.parameterCount()) + " for its config " + c.describe());
    }
    const int64_t step = get<int64_t>(bytes, 44);
    const size_t floats = static_cast<size_t>(P) * (moments ? 3 : 1);
    const size_t total = kHeaderBytes + floats * sizeof(float) + kCrcBytes;
    if (size < total) {
        return truncated(size, total, moments ? "parameters and moments" : "parameters");
    }
    if (size > total) {
        return makeError("checkpoint has " + std::to_string(size - total) +
                         " unexpected bytes after its end; expected exactly " +
                         std::to_string(total) + " bytes");
    }
    const uint32_t stored = get<uint32_t>(bytes, total - kCrcBytes);
    const uint32_t computed = crc32(bytes.first(total - kCrcBytes));
    if (stored != computed) {
        return makeError("checkpoint checksum mismatch: stored CRC-32 " + hex32(stored) +
                         ", computed " + hex32(computed) + "; the file is corrupted");
    }
    if (moments && step < 0) {
        return makeError("checkpoint AdamW step is " + std::to_string(step) + ", expected >= 0");
    }
    const size_t p = static_cast<size_t>(P);
    checkpoint.parameters = getFloats(bytes, kHeaderBytes, p);
    if (moments) {
        OptimizerState state;
        state.m = getFloats(bytes, kHeaderBytes + p * sizeof(float), p);
        state.v = getFloats(bytes, kHeaderBytes + 2 * p * sizeof(float), p);
        state.step = step;
        checkpoint.optimizer = std::move(state);
    }
    return checkpoint;
}

Status saveCheckpoint(const std::filesystem::path& path, const Checkpoint& checkpoint) {
    const int64_t expected = checkpoint.config.parameterCount();
    if (static_cast<int64_t>(checkpoint.parameters.size()) != expected) {
        return makeError("cannot save checkpoint '" + path.string() + "': " +
                         std::to_string(checkpoint.parameters.size()) + " parameters, expected " +
                         std::to_string(expected) + " for " + checkpoint.config.describe());
    }
    const auto& optimizer = checkpoint.optimizer;
    if (optimizer && (static_cast<int64_t>(optimizer->m.size()) != expected ||
                      static_cast<int64_t>(optimizer->v.size()) != expected)) {
        return makeError("cannot save checkpoint '" + path.string() + "': AdamW moments hold " +
                         std::to_string(optimizer->m.size()) + " and " +
                         std::to_string(optimizer->v.size()) + " values, expected " +
                         std::to_string(expected) + " each");
    }
    return writeFileAtomically(path, serializeCheckpoint(checkpoint));
}

Expected<Checkpoint> loadCheckpoint(const std::filesystem::path& path) {
    auto bytes = readFile(path);
    if (!bytes)
        return bytes.error();
    auto checkpoint = parseCheckpoint(*bytes);
    if (!checkpoint)
        return withPath(path, checkpoint.error());
    return checkpoint;
}

Expected<Checkpoint> loadCheckpoint(const std::filesystem::path& path,
                                    const ModelConfig& expected) {
    auto checkpoint = loadCheckpoint(path);
    if (checkpoint && checkpoint->config != expected) {
        return makeError("checkpoint '" + path.string() + "' is for model " +
                         checkpoint->config.describe() + ", expected " + expected.describe());
    }
    return checkpoint;
}

}  // namespace tandem
