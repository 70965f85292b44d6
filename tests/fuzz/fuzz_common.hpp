// What the fuzz targets share: a check that aborts (libFuzzer then saves the input as a crash),
// the input read as typed fields, and scratch files for the parsers that take a path.
#pragma once

#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

// Not assert(): the targets are built RelWithDebInfo, and a check must hold in every build.
#define FUZZ_CHECK(cond)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            std::abort();                                                                       \
        }                                                                                       \
    } while (0)

namespace tandem::fuzz {

// The fuzzer's bytes, consumed from the front: a selector byte, then the rest.
class Input {
  public:
    Input(const uint8_t* data, size_t size) : m_data(data), m_size(size) {}

    uint8_t byte() {
        if (m_pos >= m_size)
            return 0;
        return m_data[m_pos++];
    }
    std::span<const uint8_t> rest() const { return {m_data + m_pos, m_size - m_pos}; }
    std::string_view restText() const {
        return {reinterpret_cast<const char*>(m_data + m_pos), m_size - m_pos};
    }

  private:
    const uint8_t* m_data;
    size_t m_size;
    size_t m_pos = 0;
};

// A file holding `bytes`, in a directory of this process (tmpfs when there is one), rewritten on
// every call: for loaders that only take a path.
inline std::filesystem::path scratchFile(std::span<const uint8_t> bytes) {
    namespace fs = std::filesystem;
    // Removed when the process exits normally (a crash leaves it, beside the crash's input).
    struct ScratchDir {
        fs::path path;
        ~ScratchDir() {
            std::error_code ec;
            fs::remove_all(path, ec);
        }
    };
    static const ScratchDir dir = [] {
        std::error_code ec;
        fs::path base =
            fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
        fs::path d = base / ("tandem-fuzz-" + std::to_string(::getpid()));
        fs::create_directories(d);
        return ScratchDir{d};
    }();
    const fs::path file = dir.path / "input";
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    FUZZ_CHECK(out.good());
    return file;
}

// Well-formed UTF-8 by RFC 3629 (no overlongs, no surrogates, at most U+10FFFF), written from
// the RFC's table rather than taken from the project's text.hpp, so that it can disagree.
inline bool isUtf8(std::string_view s) {
    size_t i = 0;
    auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
    auto cont = [&](size_t k) { return k < s.size() && (at(k) & 0xC0) == 0x80; };
    while (i < s.size()) {
        const uint8_t b = at(i);
        if (b < 0x80) {
            i += 1;
        } else if (b >= 0xC2 && b <= 0xDF) {
            if (!cont(i + 1))
                return false;
            i += 2;
        } else if (b >= 0xE0 && b <= 0xEF) {
            if (!cont(i + 1) || !cont(i + 2))
                return false;
            if (b == 0xE0 && at(i + 1) < 0xA0)
                return false;  // overlong
            if (b == 0xED && at(i + 1) >= 0xA0)
                return false;  // surrogate
            i += 3;
        } else if (b >= 0xF0 && b <= 0xF4) {
            if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3))
                return false;
            if (b == 0xF0 && at(i + 1) < 0x90)
                return false;  // overlong
            if (b == 0xF4 && at(i + 1) >= 0x90)
                return false;  // above U+10FFFF
            i += 4;
        } else {
            return false;
        }
    }
    return true;
}

}  // namespace tandem::fuzz
