#include "blob_store.hpp"

#include "safe_text.hpp"
#include "state_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

namespace tandem::coord {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kTempSuffix = ".tmp";

bool isBlobName(std::string_view name) {
    if (name.size() != 64)
        return false;
    for (char c : name)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    return true;
}

}  // namespace

std::string blobUrlPath(const net::Sha256Digest& digest) {
    return std::string(kBlobPath) + net::toHex(digest);
}

Expected<std::vector<std::string>> checkMirrorUrls(std::vector<std::string> mirrors) {
    if (mirrors.size() + 1 > net::kMaxBlobUrls)
        return makeError("at most " + std::to_string(net::kMaxBlobUrls - 1) + " mirrors, found " +
                         std::to_string(mirrors.size()));
    for (std::string& m : mirrors) {
        while (m.size() > 8 && m.back() == '/')
            m.pop_back();
        const auto bad = [&](const std::string& why) {
            return makeError("--mirror '" + net::quotable(m) + "': " + why);
        };
        if (m.rfind("https://", 0) != 0)
            return bad("a mirror is an https:// URL (workers reach mirrors over verified TLS)");
        const std::string rest = m.substr(8);
        if (rest.empty() || rest.front() == '/' || rest.front() == ':')
            return bad("no host name");
        if (m.size() > 1000)
            return bad("longer than 1000 characters");
        for (char c : rest)
            if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f || c == '?' || c == '#' ||
                c == '@' || c == '"' || c == '\\')
                return bad(std::string("the character '") + c +
                           "' does not belong in a mirror's base URL (the blob path is appended "
                           "to it)");
    }
    return mirrors;
}

std::vector<std::string> blobUrls(const net::Sha256Digest& digest,
                                  const std::vector<std::string>& mirrors) {
    std::vector<std::string> urls{blobUrlPath(digest)};
    for (const std::string& m : mirrors)
        urls.push_back(m + blobUrlPath(digest));
    return urls;
}

fs::path BlobStore::path(const net::Sha256Digest& digest) const {
    return m_dir / net::toHex(digest);
}

Status BlobStore::publish(const fs::path& file, const net::Sha256Digest& digest) const {
    const fs::path blob = path(digest);
    struct stat source {
    }, existing{};
    if (::stat(file.c_str(), &source) != 0)
        return makeError("cannot publish " + file.string() + " as a blob: " + std::strerror(errno));
    if (::stat(blob.c_str(), &existing) == 0 && existing.st_size == source.st_size)
        return {};
    const fs::path temp = blob.string() + std::string(kTempSuffix);
    ::unlink(temp.c_str());
    if (::link(file.c_str(), temp.c_str()) != 0) {
        // Another file system, or an operator's shard this user may not hard-link
        // (fs.protected_hardlinks): a link by name.
        const int linkErrno = errno;
        std::error_code ec;
        const fs::path target = fs::absolute(file, ec);
        if (ec || ::symlink(target.c_str(), temp.c_str()) != 0)
            return makeError("cannot link " + file.string() + " as the blob " + blob.string() +
                             ": " + std::strerror(linkErrno));
    }
    if (::rename(temp.c_str(), blob.c_str()) != 0) {
        const int renameErrno = errno;
        ::unlink(temp.c_str());
        return makeError("cannot rename " + temp.string() + ": " + std::strerror(renameErrno));
    }
    return fsyncPath(m_dir, true);
}

Outcome<ServedFile> BlobStore::find(std::string_view name) const {
    if (!isBlobName(name))
        return Refusal{400, "bad_blob_name",
                       "a blob is named by the 64 lowercase hex digits of its SHA-256, found '" +
                           net::quotable(name) + "'"};
    const fs::path blob = m_dir / std::string(name);
    struct stat s {};
    if (::stat(blob.c_str(), &s) != 0 || !S_ISREG(s.st_mode))
        return Refusal{404, "unknown_blob",
                       "no blob " + std::string(name) +
                           " (never published, or no version a worker may still need holds it)"};
    return ServedFile{blob, static_cast<int64_t>(s.st_size),
                      net::digestFromHex(std::string(name)).value()};
}

void BlobStore::removeUnreferenced(const std::set<std::string>& keepHex) const {
    std::error_code ec;
    for (auto& e : fs::directory_iterator(m_dir, ec)) {
        const std::string name = e.path().filename().string();
        if (!keepHex.count(name))
            fs::remove(e.path(), ec);
    }
}

}  // namespace tandem::coord
