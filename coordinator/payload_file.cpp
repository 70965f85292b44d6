#include "payload_file.hpp"

#include "aggregate.hpp"
#include "codec.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tandem::coord {

Expected<PayloadReader> PayloadReader::open(const std::filesystem::path& path, int64_t P,
                                            std::optional<net::Sha256Digest> expected) {
    PayloadReader r;
    r.m_file = std::fopen(path.c_str(), "rbe");
    if (!r.m_file)
        return makeError("cannot open the payload " + path.string() + ": " + std::strerror(errno));
    r.m_path = path;
    r.m_P = P;
    r.m_expected = expected;
    if (expected)
        r.m_hash = std::make_unique<net::Sha256>();
    const size_t chunk = static_cast<size_t>(std::min<int64_t>(P, kDecodeChunkHalves));
    r.m_halves.resize(chunk);
    r.m_decoded.resize(chunk);
    return r;
}

PayloadReader::PayloadReader(PayloadReader&& o) noexcept
    : m_path(std::move(o.m_path)),
      m_file(o.m_file),
      m_P(o.m_P),
      m_pos(o.m_pos),
      m_next(o.m_next),
      m_expected(o.m_expected),
      m_hash(std::move(o.m_hash)),
      m_halves(std::move(o.m_halves)),
      m_decoded(std::move(o.m_decoded)) {
    o.m_file = nullptr;
}

PayloadReader::~PayloadReader() {
    if (m_file)
        std::fclose(m_file);
}

Expected<std::span<const float>> PayloadReader::next() {
    m_pos = m_next;
    if (m_next >= m_P) {
        if (m_file && std::fgetc(m_file) != EOF)
            return makeError("the payload " + m_path.string() + " is longer than " +
                             std::to_string(2 * m_P) + " bytes");
        if (m_hash) {
            const bool same = m_hash->finish() == *m_expected;
            m_hash.reset();
            if (!same)
                return makeError("the payload " + m_path.string() + " does not match its SHA-256");
        }
        return std::span<const float>();
    }
    const size_t n = static_cast<size_t>(std::min<int64_t>(kDecodeChunkHalves, m_P - m_next));
    const size_t got = std::fread(m_halves.data(), 2, n, m_file);
    if (got != n)
        return makeError("the payload " + m_path.string() + " ends after " +
                         std::to_string(2 * (m_next + static_cast<int64_t>(got))) + " of " +
                         std::to_string(2 * m_P) + " bytes" +
                         (std::ferror(m_file) ? std::string(": ") + std::strerror(errno) : ""));
    const std::span<const uint16_t> halves(m_halves.data(), n);
    if (m_hash)
        m_hash->update(std::span(reinterpret_cast<const uint8_t*>(halves.data()), 2 * n));
    // Decoded into zeros, as a live upload once was: the values are the halves' exact floats.
    std::fill_n(m_decoded.begin(), n, 0.0f);
    accumulateFp16(std::span(m_decoded).first(n), halves, 1.0f);
    m_next += static_cast<int64_t>(n);
    return std::span<const float>(m_decoded.data(), n);
}

Status accumulatePayload(std::span<float> sum, const std::filesystem::path& path, float weight,
                         std::optional<net::Sha256Digest> expected, ThreadPool* pool) {
    auto reader = PayloadReader::open(path, static_cast<int64_t>(sum.size()), expected);
    if (!reader)
        return reader.error();
    for (;;) {
        auto chunk = reader->next();
        if (!chunk)
            return chunk.error();
        if (chunk->empty())
            return {};
        addScaled(sum.subspan(static_cast<size_t>(reader->offset()), chunk->size()), *chunk, weight,
                  pool);
    }
}

}  // namespace tandem::coord
