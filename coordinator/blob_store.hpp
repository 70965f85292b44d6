// Content-addressed downloads (docs/protocol.md, "Blobs"): <state-dir>/blobs/sha256/<hex>, each
// file named by the SHA-256 of its bytes and never changed once there, so that any web server,
// cache or CDN can serve the folder as it is (installer/nginx/). A blob is a hard link to the
// file it publishes (a version's weights, a train shard), or a symbolic link where a hard link
// is not possible (an operator's llm.c shard on another file system or of another owner); it
// appears atomically (a link under a temporary name, renamed into place, the directory
// fsync'd), so no reader sees a partial blob.
#pragma once

#include "coordinator.hpp"

#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::coord {

// The path of a blob on the coordinator, and below a mirror's base URL.
inline constexpr std::string_view kBlobPath = "/blobs/sha256/";
std::string blobUrlPath(const net::Sha256Digest& digest);

// --mirror base URLs: https://host[:port][/path], without a query, fragment, user or white
// space, at most net::kMaxBlobUrls - 1 of them; a trailing '/' is dropped. An error names the
// first bad one and why.
Expected<std::vector<std::string>> checkMirrorUrls(std::vector<std::string> mirrors);

// A version 4 manifest's "urls" for a blob: the coordinator's own path, then each mirror's.
std::vector<std::string> blobUrls(const net::Sha256Digest& digest,
                                  const std::vector<std::string>& mirrors);

class BlobStore {
  public:
    // dir: <state-dir>/blobs/sha256 (created by StateDir::open).
    explicit BlobStore(std::filesystem::path dir) : m_dir(std::move(dir)) {}
    const std::filesystem::path& dir() const { return m_dir; }
    std::filesystem::path path(const net::Sha256Digest& digest) const;

    // Makes `file`, whose SHA-256 is `digest`, available as its blob. A blob already there with
    // the file's size is kept (same name, same bytes).
    Status publish(const std::filesystem::path& file, const net::Sha256Digest& digest) const;

    // The blob named by `name` for serving: 400 bad_blob_name unless 64 lowercase hex digits,
    // 404 unknown_blob when there is none (never published, or removed as unreferenced).
    Outcome<ServedFile> find(std::string_view name) const;

    // Removes every blob whose hex name is not in keepHex, and leftover temporaries.
    void removeUnreferenced(const std::set<std::string>& keepHex) const;

  private:
    std::filesystem::path m_dir;
};

}  // namespace tandem::coord
