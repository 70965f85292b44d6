#include "payload_file.hpp"

#include "aggregate.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tandem::coord {

Expected<PayloadReader> PayloadReader::open(const std::filesystem::path& path, PayloadLayout layout,
                                            std::optional<net::Sha256Digest> expected) {
    PayloadReader r;
    r.m_file = std::fopen(path.c_str(), "rbe");
    if (!r.m_file)
        return makeError("cannot open the payload " + path.string() + ": " + std::strerror(errno));
    r.m_path = path;
    r.m_layout = layout;
    r.m_expected = expected;
    if (expected)
        r.m_hash = std::make_unique<net::Sha256>();
    const int64_t chunk = std::min<int64_t>(layout.parameterCount, kDecodeChunkHalves);
    r.m_raw.resize(static_cast<size_t>((layout.bytesOf(chunk) + 1) / 2));
    r.m_decoded.resize(static_cast<size_t>(chunk));
    return r;
}

PayloadReader::PayloadReader(PayloadReader&& o) noexcept
    : m_path(std::move(o.m_path)),
      m_file(o.m_file),
      m_layout(o.m_layout),
      m_pos(o.m_pos),
      m_next(o.m_next),
      m_expected(o.m_expected),
      m_hash(std::move(o.m_hash)),
      m_raw(std::move(o.m_raw)),
      m_decoded(std::move(o.m_decoded)) {
    o.m_file = nullptr;
}

PayloadReader::~PayloadReader() {
    if (m_file)
        std::fclose(m_file);
}

Expected<std::span<const float>> PayloadReader::next() {
    m_pos = m_next;
    const int64_t P = m_layout.parameterCount;
    if (m_next >= P) {
        if (m_file && std::fgetc(m_file) != EOF)
            return makeError("the payload " + m_path.string() + " is longer than " +
                             std::to_string(m_layout.bytes()) + " bytes");
        if (m_hash) {
            const bool same = m_hash->finish() == *m_expected;
            m_hash.reset();
            if (!same)
                return makeError("the payload " + m_path.string() + " does not match its SHA-256");
        }
        return std::span<const float>();
    }
    const int64_t n = std::min<int64_t>(kDecodeChunkHalves, P - m_next);
    const size_t bytes = static_cast<size_t>(m_layout.bytesOf(n));
    auto* raw = reinterpret_cast<uint8_t*>(m_raw.data());
    const size_t got = std::fread(raw, 1, bytes, m_file);
    if (got != bytes)
        return makeError("the payload " + m_path.string() + " ends after " +
                         std::to_string(m_layout.bytesOf(m_next) + static_cast<int64_t>(got)) +
                         " of " + std::to_string(m_layout.bytes()) + " bytes" +
                         (std::ferror(m_file) ? std::string(": ") + std::strerror(errno) : ""));
    const std::span<const uint8_t> piece(raw, bytes);
    if (m_hash)
        m_hash->update(piece);
    // Decoded into zeros, as a live upload once was.
    const auto out = std::span(m_decoded).first(static_cast<size_t>(n));
    decodePayload(m_layout, piece, out);
    m_next += n;
    return std::span<const float>(out);
}

Status accumulatePayload(std::span<float> sum, const std::filesystem::path& path, uint32_t encoding,
                         float weight, std::optional<net::Sha256Digest> expected,
                         ThreadPool* pool) {
    auto reader = PayloadReader::open(path, {encoding, static_cast<int64_t>(sum.size())}, expected);
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
