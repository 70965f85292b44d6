// Token files, memory-mapped; llm.c's shard header checked by the rules of llm.c's own reader
// (llmc/dataloader.h): magic, version, and file size = 1024 + 2 x token count.
#include "token_shard.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace tandem {
namespace fs = std::filesystem;

Expected<MappedFile> MappedFile::open(const fs::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return makeError("cannot open '" + path.string() + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        return makeError("cannot read the size of '" + path.string() + "': " + why);
    }
    MappedFile f;
    f.m_size = static_cast<size_t>(st.st_size);
    if (f.m_size > 0) {
        void* p = ::mmap(nullptr, f.m_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            const std::string why = std::strerror(errno);
            ::close(fd);
            return makeError("cannot map '" + path.string() + "': " + why);
        }
        f.m_data = static_cast<const uint8_t*>(p);
    }
    ::close(fd);  // the mapping keeps the file
    return f;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : m_data(std::exchange(other.m_data, nullptr)), m_size(std::exchange(other.m_size, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (m_data)
            ::munmap(const_cast<uint8_t*>(m_data), m_size);
        m_data = std::exchange(other.m_data, nullptr);
        m_size = std::exchange(other.m_size, 0);
    }
    return *this;
}

MappedFile::~MappedFile() {
    if (m_data)
        ::munmap(const_cast<uint8_t*>(m_data), m_size);
}

TokenView TokenShard::tokens() const {
    const auto bytes = m_file.bytes();
    return {bytes.data() + m_header, (static_cast<int64_t>(bytes.size()) - m_header) / m_width,
            m_width};
}

Expected<TokenShard> TokenShard::openBytes(const fs::path& path) {
    auto file = MappedFile::open(path);
    if (!file)
        return file.error();
    TokenShard s;
    s.m_path = path;
    s.m_file = std::move(*file);
    return s;
}

Expected<TokenShard> TokenShard::openLlmc(const fs::path& path) {
    auto file = MappedFile::open(path);
    if (!file)
        return file.error();
    const auto bytes = file->bytes();
    const std::string name = "token shard '" + path.string() + "'";
    if (static_cast<int64_t>(bytes.size()) < kLlmcHeaderBytes)
        return makeError(name + " has " + std::to_string(bytes.size()) +
                         " bytes, fewer than llm.c's 1024-byte header (256 x int32)");
    int32_t header[3];
    std::memcpy(header, bytes.data(), sizeof header);  // little-endian, as written by numpy
    if (header[0] == kLlmcLlama3Magic)
        return makeError(name +
                         " is llm.c's llama-3 format (magic 20240801, uint32 tokens); "
                         "only the uint16 format (magic 20240520) is supported");
    if (header[0] != kLlmcShardMagic)
        return makeError(name + " has magic " + std::to_string(header[0]) + "; expected " +
                         std::to_string(kLlmcShardMagic) + " (llm.c's uint16 token shards)");
    if (header[1] != kLlmcShardVersion)
        return makeError(name + " has version " + std::to_string(header[1]) + "; expected " +
                         std::to_string(kLlmcShardVersion));
    const int64_t count = header[2];
    const int64_t expected = kLlmcHeaderBytes + 2 * count;
    if (count <= 0 || static_cast<int64_t>(bytes.size()) != expected)
        return makeError(name + " says it holds " + std::to_string(count) + " tokens, which is " +
                         std::to_string(expected) + " bytes, but it has " +
                         std::to_string(bytes.size()) + " bytes (truncated or not a shard)");
    TokenShard s;
    s.m_path = path;
    s.m_file = std::move(*file);
    s.m_header = kLlmcHeaderBytes;
    s.m_width = 2;
    return s;
}

std::vector<uint8_t> llmcShardBytes(std::span<const uint16_t> tokens) {
    std::vector<uint8_t> out(static_cast<size_t>(kLlmcHeaderBytes) + 2 * tokens.size(), 0);
    const int32_t header[3] = {kLlmcShardMagic, kLlmcShardVersion,
                               static_cast<int32_t>(tokens.size())};
    std::memcpy(out.data(), header, sizeof header);
    uint8_t* p = out.data() + kLlmcHeaderBytes;
    for (uint16_t t : tokens) {
        *p++ = static_cast<uint8_t>(t & 0xff);
        *p++ = static_cast<uint8_t>(t >> 8);
    }
    return out;
}

int64_t firstTokenAtOrAbove(TokenView tokens, int64_t limit) {
    for (int64_t i = 0; i < tokens.count; ++i)
        if (tokens[i] >= limit)
            return i;
    return -1;
}

}  // namespace tandem
