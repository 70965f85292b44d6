// Reading and writing the files of the data directory.
#include "engine_impl.hpp"

#include <fstream>
#include "file_io.hpp"

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

Status writeTextAtomically(const fs::path& path, const std::string& text) {
    return writeFileAtomically(
        path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

Expected<std::string> readText(const fs::path& path) {
    auto bytes = readFile(path);
    if (!bytes)
        return bytes.error();
    return std::string(bytes->begin(), bytes->end());
}

Expected<json> readJson(const fs::path& path) {
    auto text = readText(path);
    if (!text)
        return text.error();
    auto j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError(path.string() + " is not a JSON object");
    return j;
}

bool fileHasDigest(const fs::path& path, const net::Sha256Digest& digest) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
        return false;
    std::ifstream in(path, std::ios::binary);
    net::Sha256 h;
    std::vector<uint8_t> buf(1 << 16);
    while (in) {
        in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
        const auto n = in.gcount();
        if (n > 0)
            h.update(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
    }
    return h.finish() == digest;
}

std::string wuKey(int64_t id) {
    return std::to_string(id);
}

}  // namespace tandem::core
