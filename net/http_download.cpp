// HttpClient::download: a resumable download into destination.part, checked by SHA-256 (and
// size) before it is renamed into place (net/README.md describes the Range/If-Range rules).
#include "http_client.hpp"

#include "http_retry.hpp"
#include "http_transport.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tandem::net {

using std::chrono::milliseconds;
using namespace transport;

namespace {

int64_t fileSize(const std::filesystem::path& path) {
    struct stat s {};
    return ::stat(path.c_str(), &s) == 0 ? static_cast<int64_t>(s.st_size) : 0;
}

}  // namespace

HttpResult<DownloadResult> HttpClient::download(const DownloadRequest& request) {
    auto full = resolveUrl(m_config.baseUrl, request.url);
    if (!full)
        return full.error();
    const std::filesystem::path dest = request.destination;
    const std::filesystem::path part = dest.string() + ".part";
    const std::string expectedHex = toHex(request.expectedSha256);
    DownloadResult result;

    auto ioError = [&](const std::string& what) {
        return makeHttpError(HttpErrorKind::LocalIo, what + ": " + std::strerror(errno));
    };
    // Checks the complete partial; renames it into place or deletes it.
    auto verifyPart = [&]() -> HttpResult<Unit> {
        auto hashed = sha256File(part);
        if (!hashed)
            return makeHttpError(HttpErrorKind::LocalIo, hashed.error().message);
        const auto& [digest, size] = *hashed;
        if (digest != request.expectedSha256 ||
            (request.expectedBytes >= 0 && size != request.expectedBytes)) {
            std::error_code ec;
            std::filesystem::remove(part, ec);
            HttpError e;
            e.kind = HttpErrorKind::ChecksumMismatch;
            e.message = "download of " + *full + " does not match: expected SHA-256 " +
                        expectedHex +
                        (request.expectedBytes >= 0
                             ? " and " + std::to_string(request.expectedBytes) + " bytes"
                             : std::string()) +
                        ", found " + toHex(digest) + " and " + std::to_string(size) +
                        " bytes; the partial file was deleted";
            e.bytesTransferred = result.bytesTransferred;
            return e;
        }
        const int fd = ::open(part.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ::fsync(fd);
            ::close(fd);
        }
        std::error_code ec;
        std::filesystem::rename(part, dest, ec);
        if (ec)
            return makeHttpError(HttpErrorKind::LocalIo, "cannot rename " + part.string() + " to " +
                                                             dest.string() + ": " + ec.message());
        result.bytes = size;
        return Unit{};
    };

    {
        std::error_code ec;
        if (std::filesystem::exists(dest, ec)) {
            auto hashed = sha256File(dest);
            if (hashed && hashed->digest == request.expectedSha256 &&
                (request.expectedBytes < 0 || hashed->bytes == request.expectedBytes)) {
                result.bytes = hashed->bytes;
                result.alreadyPresent = true;
                return result;
            }
            std::filesystem::remove(dest, ec);
        }
    }
    result.resumedFrom = fileSize(part);
    const bool ranged = request.rangeStart >= 0;
    if (ranged && request.expectedBytes <= 0)
        return makeHttpError(HttpErrorKind::Other,
                             "a ranged download needs its length (expectedBytes > 0)");

    // A mirror is another server: its own trust (a copy of the configuration for it alone).
    const bool mirror =
        request.blob && !onCoordinator(m_config.baseUrl, *full) &&
        (request.coordinatorOrigin.empty() || !onCoordinator(request.coordinatorOrigin, *full));
    const HttpClientConfig mirrorCfg = mirror ? mirrorConfig(m_config) : HttpClientConfig{};
    const HttpClientConfig& cfg = mirror ? mirrorCfg : m_config;

    return withRetries<DownloadResult>(
        request.retry.value_or(m_config.retry), *this, [&](int n) -> HttpResult<DownloadResult> {
            result.attempts = n;
            int64_t offset = fileSize(part);
            if (request.expectedBytes >= 0 && offset > request.expectedBytes) {
                // Longer than the file can be: nothing in it can be trusted.
                if (::truncate(part.c_str(), 0) != 0)
                    return ioError("cannot truncate " + part.string());
                offset = 0;
            }
            if (request.expectedBytes >= 0 && offset == request.expectedBytes && offset > 0) {
                if (auto v = verifyPart(); !v)
                    return v.error();
                return result;
            }
            const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd < 0)
                return ioError("cannot open " + part.string());
            struct FdCloser {
                int fd;
                ~FdCloser() { ::close(fd); }
            } closer{fd};

            AttemptSpec spec;
            spec.method = "GET";
            spec.url = *full;
            // Absolute position in the resource of the first byte wanted.
            const int64_t base = ranged ? request.rangeStart : 0;
            if (ranged) {
                spec.headers.emplace("Range", "bytes=" + std::to_string(base + offset) + "-" +
                                                  std::to_string(base + request.expectedBytes - 1));
            } else if (offset > 0) {
                spec.headers.emplace("Range", "bytes=" + std::to_string(offset) + "-");
                // Protocol v1: the ETag is the SHA-256; another version of the file gives 200.
                if (!request.blob)
                    spec.headers.emplace("If-Range", "\"" + expectedHex + "\"");
            }
            spec.sendToken = !request.blob;
            spec.mirror = mirror;
            spec.progress = &request.progress;
            spec.progressBase = offset;
            spec.progressTotal = request.expectedBytes;

            bool decided = false;
            bool rangeComplete = false;  // a ranged download got all its bytes from a 200
            int64_t writePos = offset;
            int64_t skip = 0;  // bytes of a 200 body before the wanted range
            std::optional<HttpError> sinkError;
            BodySink sink;
            sink.write = [&](const char* data, size_t size, long status,
                             const HttpHeaders& headers) -> bool {
                if (!decided) {
                    decided = true;
                    if (status == 206) {
                        auto it = headers.find("content-range");
                        auto cr =
                            it == headers.end() ? std::nullopt : parseContentRange(it->second);
                        if (!cr || cr->first != base + offset ||
                            (ranged && cr->last > base + request.expectedBytes - 1) ||
                            (!ranged && request.expectedBytes >= 0 && cr->total >= 0 &&
                             cr->total != request.expectedBytes)) {
                            sinkError = makeHttpError(
                                HttpErrorKind::BadResponse,
                                "206 from " + *full + " with Content-Range '" +
                                    (it == headers.end() ? std::string("(none)") : it->second) +
                                    "', expected one starting at byte " +
                                    std::to_string(base + offset) +
                                    (!ranged && request.expectedBytes >= 0
                                         ? " of " + std::to_string(request.expectedBytes)
                                         : std::string()) +
                                    "; nothing was appended");
                            return false;
                        }
                    } else {
                        // 200: the whole file (the server ignored the Range, or the file
                        // changed): start the partial over.
                        if (::ftruncate(fd, 0) != 0) {
                            sinkError = ioError("cannot truncate " + part.string());
                            return false;
                        }
                        writePos = 0;
                        skip = base;
                        spec.progressBase = 0;
                    }
                }
                if (skip > 0) {
                    const size_t drop =
                        static_cast<size_t>(std::min<int64_t>(skip, static_cast<int64_t>(size)));
                    data += drop;
                    size -= drop;
                    skip -= static_cast<int64_t>(drop);
                }
                if (ranged && writePos + static_cast<int64_t>(size) >= request.expectedBytes) {
                    // Only up to the end of the range; a 200 body goes on past it.
                    size = static_cast<size_t>(request.expectedBytes - writePos);
                    rangeComplete = true;
                }
                size_t done = 0;
                while (done < size) {
                    const ssize_t w = ::pwrite(fd, data + done, size - done, writePos);
                    if (w < 0) {
                        if (errno == EINTR)
                            continue;
                        sinkError = ioError("cannot write " + part.string());
                        return false;
                    }
                    done += static_cast<size_t>(w);
                    writePos += w;
                }
                return !rangeComplete;  // stop reading once the range is complete
            };
            spec.sink = &sink;
            AttemptOutcome out = performAttempt(*m_impl, cfg, spec);
            if (out.status >= 200 && out.status < 300)
                result.bytesTransferred += out.bytesReceived;
            if (sinkError)
                out.sinkError = sinkError;
            if (rangeComplete && out.writeAborted() && !sinkError)
                out.curlCode = 0;  // the sink stopped reading at the end of the range
            if (!out.ok()) {
                HttpError e = failureOf(spec, out, cfg);
                e.bytesTransferred = result.bytesTransferred;
                return e;
            }
            if (ranged && out.status == 416)
                return makeHttpError(HttpErrorKind::BadResponse,
                                     "416 from " + *full + ": the resource has no bytes " +
                                         std::to_string(base + offset) + ".." +
                                         std::to_string(base + request.expectedBytes - 1));
            if (out.status == 416) {
                auto it = out.headers.find("content-range");
                auto cr = it == out.headers.end() ? std::nullopt : parseContentRange(it->second);
                if (cr && cr->total == offset) {
                    // The partial already holds the whole file.
                    if (auto v = verifyPart(); !v)
                        return v.error();
                    return result;
                }
                // The partial is longer than the file: start over (a retryable condition).
                if (::ftruncate(fd, 0) != 0)
                    return ioError("cannot truncate " + part.string());
                HttpError e =
                    makeHttpError(HttpErrorKind::ConnectionLost,
                                  "416 from " + *full + " for a resume at byte " +
                                      std::to_string(offset) + " (the file has " +
                                      (cr && cr->total >= 0 ? std::to_string(cr->total) : "?") +
                                      " bytes); the partial was discarded");
                e.retryAfter = milliseconds(0);
                return e;
            }
            if (out.status < 200 || out.status >= 300)
                return statusErrorOf(spec, out, cfg);
            if (!decided && out.status == 200 && ::ftruncate(fd, 0) != 0)
                return ioError("cannot truncate " + part.string());  // a 200 with an empty body
            if (auto v = verifyPart(); !v)
                return v.error();
            return result;
        });
}

}  // namespace tandem::net
