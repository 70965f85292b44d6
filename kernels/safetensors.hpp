// The safetensors file format (Hugging Face): an 8-byte little-endian header length N, N bytes
// of a JSON object {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {string: string}}, then the byte buffer that the offsets index (relative to its start).
// The reader checks the format's rules: header at most 100 MB and starting with '{', every
// entry's byte size equal to its shape times its dtype's size, the ranges covering the buffer
// exactly with no overlap and no hole. Only F32 data is converted to floats.
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace tandem {

inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

struct SafetensorsEntry {
    std::string name;
    std::string dtype;  // "F32", "F16", "BF16", "I64", ...
    std::vector<int64_t> shape;
    int64_t begin = 0, end = 0;  // byte range in the buffer
};

struct SafetensorsHeader {
    std::vector<SafetensorsEntry> entries;  // in buffer order
    std::map<std::string, std::string> metadata;
    int64_t bufferStart = 0;  // file offset of the byte buffer: 8 + N

    const SafetensorsEntry* find(const std::string& name) const;
};

// One tensor to write: fp32, row-major.
struct SafetensorsTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::span<const float> data;
};

// True when the bytes begin like a safetensors file (a plausible length, then '{').
bool looksLikeSafetensors(std::span<const uint8_t> bytes);
// Errors say which rule the file breaks, naming the tensor where there is one.
Expected<SafetensorsHeader> parseSafetensorsHeader(std::span<const uint8_t> file);
// The entry's values; refuses a dtype other than F32.
Expected<std::vector<float>> safetensorsFloats(std::span<const uint8_t> file,
                                               const SafetensorsHeader& header,
                                               const SafetensorsEntry& entry);
// Tensors in the given order, the header padded with spaces to a multiple of 8 bytes (as the
// reference writer does, so the buffer stays aligned).
std::vector<uint8_t> serializeSafetensors(const std::vector<SafetensorsTensor>& tensors,
                                          const std::map<std::string, std::string>& metadata);

}  // namespace tandem
