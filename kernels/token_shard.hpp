// Token files: the byte text of a byte-level run and llm.c's token shards (a header of 256
// int32 -- magic 20240520, version 1, token count -- then little-endian uint16 tokens, as
// llm.c's dev/data/data_common.py write_datafile writes them), memory-mapped so that a corpus
// may be far larger than RAM, and the view of a run of tokens that samplers read.
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace tandem {

inline constexpr int32_t kLlmcShardMagic = 20240520;
inline constexpr int32_t kLlmcShardVersion = 1;
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;
inline constexpr int32_t kLlmcLlama3Magic = 20240801;  // uint32 tokens; named in the refusal

// `count` tokens of `width` bytes each (1: text bytes, 2: little-endian uint16); not owned.
struct TokenView {
    const uint8_t* data = nullptr;
    int64_t count = 0;
    int width = 1;

    TokenView() = default;
    TokenView(const uint8_t* d, int64_t n, int w) : data(d), count(n), width(w) {}
    // Byte text: one token per byte (implicit, so byte spans read as they always did).
    TokenView(std::span<const uint8_t> bytes)  // NOLINT(google-explicit-constructor)
        : data(bytes.data()), count(static_cast<int64_t>(bytes.size())), width(1) {}
    TokenView(const std::vector<uint8_t>& bytes)  // NOLINT(google-explicit-constructor)
        : TokenView(std::span<const uint8_t>(bytes)) {}

    int32_t operator[](int64_t i) const {
        if (width == 1)
            return data[i];
        const uint8_t* p = data + 2 * i;
        return static_cast<int32_t>(p[0] | (p[1] << 8));
    }
    TokenView slice(int64_t first, int64_t n) const { return {data + first * width, n, width}; }
    std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(count * width)}; }
};

// A whole file mapped read-only; the kernel pages it in as it is read. Move-only.
class MappedFile {
  public:
    static Expected<MappedFile> open(const std::filesystem::path& path);
    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    std::span<const uint8_t> bytes() const { return {m_data, m_size}; }

  private:
    const uint8_t* m_data = nullptr;
    size_t m_size = 0;
};

// An opened token file. Byte text has no header and one byte per token; an llm.c shard is
// checked (magic, version, a token count that matches the file's size) when it is opened.
class TokenShard {
  public:
    static Expected<TokenShard> openBytes(const std::filesystem::path& path);
    static Expected<TokenShard> openLlmc(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return m_path; }
    TokenView tokens() const;
    int width() const { return m_width; }
    int64_t headerBytes() const { return m_header; }
    int64_t fileBytes() const { return static_cast<int64_t>(m_file.bytes().size()); }

  private:
    std::filesystem::path m_path;
    MappedFile m_file;
    int64_t m_header = 0;
    int m_width = 1;
};

// An llm.c shard's bytes: the header, then the tokens.
std::vector<uint8_t> llmcShardBytes(std::span<const uint16_t> tokens);

// The index of the first token >= limit, or -1 when every token is below it.
int64_t firstTokenAtOrAbove(TokenView tokens, int64_t limit);

}  // namespace tandem
