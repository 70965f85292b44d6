// Training text as bytes, and random training windows over it.
//
// Dimensions: B batch, T sequence.
#include "corpus.hpp"

#include "file_io.hpp"

#include <algorithm>
#include <cassert>
#include <string>
#include <system_error>

namespace tandem {
namespace fs = std::filesystem;

namespace {

// Regular files below a directory, sorted by path; fortune's .dat indexes and symlinks skipped.
Expected<std::vector<fs::path>> filesBelow(const fs::path& directory) {
    std::vector<fs::path> files;
    std::error_code ec;
    fs::recursive_directory_iterator it(directory, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const fs::file_status status = it->symlink_status(ec);
        if (ec)
            break;
        if (!fs::is_regular_file(status) || it->path().extension() == ".dat")
            continue;
        files.push_back(it->path());
    }
    if (ec)
        return makeError("cannot list corpus directory '" + directory.string() +
                         "': " + ec.message());
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace

Expected<std::vector<uint8_t>> loadTextCorpus(std::span<const fs::path> paths) {
    std::vector<uint8_t> corpus;
    std::string names;
    for (const fs::path& path : paths) {
        names += (names.empty() ? "'" : ", '") + path.string() + "'";
        std::error_code ec;
        const fs::file_status status = fs::status(path, ec);
        if (ec && ec != std::errc::no_such_file_or_directory) {
            return makeError("cannot access corpus path '" + path.string() + "': " + ec.message());
        }
        if (!fs::exists(status)) {
            return makeError("corpus path '" + path.string() +
                             "' does not exist; expected a text file or a directory of them");
        }
        std::vector<fs::path> files;
        if (fs::is_directory(status)) {
            auto below = filesBelow(path);
            if (!below)
                return below.error();
            files = std::move(*below);
        } else {
            files.push_back(path);  // named explicitly: read it whatever its name
        }
        for (const fs::path& file : files) {
            auto bytes = readFile(file);
            if (!bytes)
                return makeError("corpus: " + bytes.error().message);
            corpus.insert(corpus.end(), bytes->begin(), bytes->end());
        }
    }
    if (corpus.empty()) {
        return makeError("corpus is empty: no text found in " +
                         (names.empty() ? std::string("(no paths given)") : names) +
                         "; expected at least one non-empty text file");
    }
    return corpus;
}

BatchSampler::BatchSampler(TokenView tokens, uint64_t seed) : m_tokens(tokens), m_rng(seed) {}

void BatchSampler::next(int B, int T, std::span<int32_t> inputs, std::span<int32_t> targets) {
    assert(m_tokens.count > T);
    assert(inputs.size() >= static_cast<size_t>(B) * T &&
           targets.size() >= static_cast<size_t>(B) * T);
    // A window is T + 1 tokens, so the last start is count - T - 1.
    const uint64_t starts = static_cast<uint64_t>(m_tokens.count - T);
    for (int b = 0; b < B; ++b) {
        const TokenView window = m_tokens.slice(static_cast<int64_t>(m_rng.below(starts)), T + 1);
        int32_t* in = inputs.data() + static_cast<size_t>(b) * T;
        int32_t* out = targets.data() + static_cast<size_t>(b) * T;
        for (int t = 0; t < T; ++t) {
            in[t] = window[t];
            out[t] = window[t + 1];
        }
    }
}

}  // namespace tandem
