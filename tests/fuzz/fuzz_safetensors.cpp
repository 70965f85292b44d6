// safetensors files (kernels/safetensors.hpp) as the coordinator imports and the worker reads
// them. Checks: every accepted entry lies inside the file, the entries tile the buffer in order,
// F32 data converts to the right number of floats, and a file of F32 tensors written back by
// serializeSafetensors parses to the same names, shapes, values and metadata.
#include "fuzz_common.hpp"
#include "safetensors.hpp"

#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> file(data, size);
    tandem::looksLikeSafetensors(file);
    auto header = tandem::parseSafetensorsHeader(file);
    if (!header)
        return 0;
    const int64_t bufferBytes = static_cast<int64_t>(size) - header->bufferStart;
    FUZZ_CHECK(header->bufferStart >= 8 && bufferBytes >= 0);
    int64_t next = 0;
    bool allF32 = true;
    std::vector<std::vector<float>> values;
    for (const auto& e : header->entries) {
        FUZZ_CHECK(e.begin == next && e.begin <= e.end && e.end <= bufferBytes);
        next = e.end;
        FUZZ_CHECK(header->find(e.name) != nullptr);
        auto floats = tandem::safetensorsFloats(file, *header, e);
        FUZZ_CHECK(floats.ok() == (e.dtype == "F32"));
        if (!floats) {
            allF32 = false;
            continue;
        }
        FUZZ_CHECK(static_cast<int64_t>(floats->size()) * 4 == e.end - e.begin);
        values.push_back(std::move(*floats));
    }
    FUZZ_CHECK(next == bufferBytes);
    if (!allF32)
        return 0;
    std::vector<tandem::SafetensorsTensor> tensors;
    for (size_t i = 0; i < header->entries.size(); ++i)
        tensors.push_back({header->entries[i].name, header->entries[i].shape, values[i]});
    const auto written = tandem::serializeSafetensors(tensors, header->metadata);
    auto again = tandem::parseSafetensorsHeader(written);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->entries.size() == header->entries.size());
    FUZZ_CHECK(again->metadata == header->metadata);
    for (size_t i = 0; i < header->entries.size(); ++i) {
        const auto* e = again->find(header->entries[i].name);
        FUZZ_CHECK(e != nullptr && e->shape == header->entries[i].shape);
        auto floats = tandem::safetensorsFloats(written, *again, *e);
        FUZZ_CHECK(floats.ok() && floats->size() == values[i].size());
        FUZZ_CHECK(values[i].empty() ||
                   std::memcmp(floats->data(), values[i].data(), values[i].size() * 4) == 0);
    }
    return 0;
}
