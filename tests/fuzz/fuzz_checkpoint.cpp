// Tandem checkpoints (kernels/checkpoint.hpp): work-unit checkpoints on the worker and the global
// weights the coordinator publishes. Odd selector bytes make the harness write a correct CRC-32
// over the rest, so the fuzzer reaches the size and config checks behind the checksum. Checks:
// what parses serializes back to bytes that parse to the same checkpoint.
#include "checkpoint.hpp"
#include "fuzz_common.hpp"

#include <cstring>
#include <vector>

namespace {

bool sameFloats(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tandem::fuzz::Input in(data, size);
    const uint8_t selector = in.byte();
    std::vector<uint8_t> bytes(in.rest().begin(), in.rest().end());
    if ((selector & 1) && bytes.size() >= 4) {
        const uint32_t crc = tandem::crc32(std::span<const uint8_t>(bytes).first(bytes.size() - 4));
        std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);  // little endian host
    }
    auto parsed = tandem::parseCheckpoint(bytes);
    if (!parsed) {
        FUZZ_CHECK(!parsed.error().message.empty());
        return 0;
    }
    const auto written = tandem::serializeCheckpoint(*parsed);
    auto again = tandem::parseCheckpoint(written);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->config == parsed->config);
    FUZZ_CHECK(sameFloats(again->parameters, parsed->parameters));
    FUZZ_CHECK(again->optimizer.has_value() == parsed->optimizer.has_value());
    if (parsed->optimizer) {
        FUZZ_CHECK(sameFloats(again->optimizer->m, parsed->optimizer->m));
        FUZZ_CHECK(sameFloats(again->optimizer->v, parsed->optimizer->v));
        FUZZ_CHECK(again->optimizer->step == parsed->optimizer->step);
    }
    FUZZ_CHECK(tandem::serializeCheckpoint(*again) == written);
    return 0;
}
