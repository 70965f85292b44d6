// A stored payload (P values in the run's result encoding: a staged upload, a round's accepted
// result, a held one) read back in chunks and decoded exactly as an upload is
// (payload_encoding.hpp), so that
// whatever is computed from the file (the round sum, a twin's distance, the direction check)
// is bit-identical to what the same values in memory would give. Memory: one chunk.
//
// Dimensions: P parameters, N values of one chunk (at most kDecodeChunkHalves).
#pragma once

#include "crypto.hpp"
#include "expected.hpp"
#include "payload_encoding.hpp"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace tandem {
class ThreadPool;
}

namespace tandem::coord {

// Payload values read and decoded per step (1 MiB of an fp16 file; a multiple of the int8 block).
inline constexpr size_t kDecodeChunkHalves = size_t{1} << 19;

class PayloadReader {
  public:
    // expected: when given, the file's SHA-256 is checked as it is read (the last next() fails
    // on a mismatch).
    static Expected<PayloadReader> open(const std::filesystem::path& path, PayloadLayout layout,
                                        std::optional<net::Sha256Digest> expected = std::nullopt);
    PayloadReader(PayloadReader&& other) noexcept;
    PayloadReader& operator=(PayloadReader&&) = delete;
    PayloadReader(const PayloadReader&) = delete;
    ~PayloadReader();

    // The next chunk (N values, decoded); empty after the last. An error for a short or
    // damaged file.
    Expected<std::span<const float>> next();
    int64_t offset() const { return m_pos; }  // index of the first value of the latest chunk

  private:
    PayloadReader() = default;

    std::filesystem::path m_path;
    std::FILE* m_file = nullptr;
    PayloadLayout m_layout;
    int64_t m_pos = 0, m_next = 0;
    std::optional<net::Sha256Digest> m_expected;
    std::unique_ptr<net::Sha256> m_hash;
    std::vector<uint16_t> m_raw;  // one chunk's bytes (uint16_t: aligned for fp16)
    std::vector<float> m_decoded;
};

// sum (P) += weight * decode(file), chunk by chunk: rounds exactly like decoding the whole
// payload into zeros followed by addScaled (aggregate.hpp). P is the size of sum.
Status accumulatePayload(std::span<float> sum, const std::filesystem::path& path, uint32_t encoding,
                         float weight, std::optional<net::Sha256Digest> expected, ThreadPool* pool);

}  // namespace tandem::coord
