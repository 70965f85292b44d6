// The worker's HTTPS client on libcurl (OpenSSL): verified TLS only (a CA file or a pinned public
// key), connect timeout and low-speed abort instead of a total timeout, proxies, bearer token,
// JSON requests, resumable downloads checked by SHA-256, uploads with retries (capped exponential
// backoff with jitter, Retry-After honoured), rate limits and cancellable progress callbacks.
//
// Every failure is an HttpError value whose kind tells programs what happened (TLS unknown CA,
// host name mismatch, pin mismatch, connection refused, timeout, HTTP status with the server's
// {"error":{"code","message"}}, ...) and whose message says it to people.
//
// The parts: http_error (errors and their mapping), http_headers (Retry-After, Content-Range),
// http_config (trust, proxy, limits, URLs), http_retry (backoff and the retry loop),
// http_transport (libcurl handles and one attempt), http_download.cpp (resumable downloads).
#pragma once

#include "crypto.hpp"
#include "http_config.hpp"
#include "http_error.hpp"
#include "http_headers.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace tandem::net {

struct HttpResponse {
    long status = 0;
    HttpHeaders headers;
    std::string body;
    std::optional<std::string> header(const std::string& nameLowerCase) const;
    std::optional<std::chrono::milliseconds> retryAfter;  // parsed Retry-After, if any
    // Timings of the (last) attempt, from its start: request sent (pretransfer), first answer
    // byte (startTransfer), done (total); body bytes sent and received by it.
    double secondsPretransfer = 0, secondsStartTransfer = 0, secondsTotal = 0;
    int64_t bytesUploaded = 0, bytesDownloaded = 0;  // upload(): bytes sent over all attempts
};

struct TransferProgress {
    int64_t bytesDone = 0;      // for downloads including bytes resumed from disk
    int64_t bytesTotal = -1;    // -1 while unknown
    double bytesPerSecond = 0;  // average over the current attempt
    bool upload = false;
};
enum class ProgressAction { Continue, Cancel };
// Called from the transferring thread at least about once a second; Cancel aborts the transfer
// (a download keeps its verified-offset partial file, so it resumes later: that is "pause").
using ProgressCallback = std::function<ProgressAction(const TransferProgress&)>;

// An upload body: bytes in memory, or a file read as it is sent.
struct UploadBody {
    std::variant<std::span<const uint8_t>, std::filesystem::path> source;
};

struct DownloadRequest {
    std::string url;                    // path or https:// URL
    std::filesystem::path destination;  // written as destination + ".part", renamed when verified
    Sha256Digest expectedSha256{};
    int64_t expectedBytes = -1;  // -1: unknown
    ProgressCallback progress;
    // >= 0: download only bytes [rangeStart, rangeStart + expectedBytes) of the resource (a data
    // range of a shard); expectedSha256 is then the digest of that range. A server that answers
    // 200 (whole resource) is read up to the range's end and the rest is dropped.
    int64_t rangeStart = -1;
    // A content-addressed blob (protocol v4, /blobs/sha256/<hex>) on the coordinator or a
    // mirror: sent without the bearer token and without If-Range (the bytes behind such a URL
    // never change, so a partial resumes from any URL that serves them); a URL on another host
    // than the coordinator's is trusted per mirrorConfig() (http_config.hpp).
    bool blob = false;
    // "https://host:port" of another server the signed manifest names as the coordinator's (its
    // upload URL's, when a front end sends uploads to the aggregating process): a blob there is
    // trusted as the coordinator is (its pin or CA file), not as a mirror. Empty: none.
    std::string coordinatorOrigin{};
    // Replaces the client's retry policy for this download (a mirror gets few tries before the
    // next URL is asked).
    std::optional<RetryPolicy> retry{};
};

struct DownloadResult {
    int64_t bytes = 0;
    int64_t bytesTransferred = 0;  // received over the network, over all attempts
    int64_t resumedFrom = 0;       // bytes already on disk when it started
    int attempts = 0;
    bool alreadyPresent = false;  // the destination already held the verified file
    std::string url{};            // the URL it came from (protocol v4: one of the manifest's)
};

class HttpClient {
  public:
    static HttpResult<std::unique_ptr<HttpClient>> create(HttpClientConfig config);
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    // One request with a JSON (or empty) body; 2xx answers are values (including 204), others
    // HttpStatus errors. Retried (per `retry`) only on transient failures.
    HttpResult<HttpResponse> requestJson(const std::string& method, const std::string& url,
                                         const std::string& jsonBody = {},
                                         const HttpHeaders& extraHeaders = {},
                                         std::optional<RetryPolicy> retry = std::nullopt);
    // GET into memory (at most maxBytes), no retries: for small binary answers.
    HttpResult<HttpResponse> get(const std::string& url, int64_t maxBytes,
                                 const HttpHeaders& extraHeaders = {},
                                 const ProgressCallback& progress = {});

    // Resumable download: Range from the bytes in destination.part; only a 206 whose
    // Content-Range starts exactly there is appended to; a 200 restarts the file; a 416 means
    // the partial is complete (checked) or wrong (restarted). The SHA-256 (and size, if given) of
    // the whole file is checked before it is renamed to destination; a mismatch deletes the
    // partial. Transient failures are retried per the client's policy, resuming each time.
    HttpResult<DownloadResult> download(const DownloadRequest& request);

    // PUT (or POST) of a body, retried with backoff on transient failures (the whole body again:
    // the protocol makes result uploads idempotent). Sends Expect: 100-continue so a refusal
    // arrives before the body.
    HttpResult<HttpResponse> upload(const std::string& method, const std::string& url,
                                    const UploadBody& body, const std::string& contentType,
                                    const HttpHeaders& extraHeaders = {},
                                    const ProgressCallback& progress = {},
                                    std::optional<RetryPolicy> retry = std::nullopt);

    void setBearerToken(std::string token);
    // Drops the idle kept-alive connections (after a network change; tests use it so that the
    // next request opens a new connection).
    void closeConnections();
    // 0: unlimited; applies to transfers that start afterwards. An average: libcurl reads a burst
    // (about 1.6 MB) before it first pauses, so short transfers may run faster.
    void setRateLimits(int64_t maxSendBytesPerSecond, int64_t maxRecvBytesPerSecond);
    const HttpClientConfig& config() const { return m_config; }

    // The wait before retry `retryNumber` (1-based), without a Retry-After.
    std::chrono::milliseconds backoffDelay(int retryNumber);
    std::chrono::milliseconds backoffDelay(int retryNumber, const RetryPolicy& policy);

    struct Impl;

  private:
    HttpClient(HttpClientConfig config, std::unique_ptr<Impl> impl);
    HttpClientConfig m_config;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace tandem::net
