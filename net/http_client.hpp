// The worker's HTTPS client on libcurl (OpenSSL): verified TLS only (a CA file or a pinned public
// key), connect timeout and low-speed abort instead of a total timeout, proxies, bearer token,
// JSON requests, resumable downloads checked by SHA-256, uploads with retries (capped exponential
// backoff with jitter, Retry-After honoured), rate limits and cancellable progress callbacks.
//
// Every failure is an HttpError value whose kind tells programs what happened (TLS unknown CA,
// host name mismatch, pin mismatch, connection refused, timeout, HTTP status with the server's
// {"error":{"code","message"}}, ...) and whose message says it to people.
#pragma once

#include "crypto.hpp"
#include "expected.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace tandem::net {

enum class HttpErrorKind {
    InvalidUrl,         // not an https:// URL (plain http:// is refused here)
    TlsUnknownCa,       // the certificate chain does not lead to a trusted CA
    TlsHostMismatch,    // the certificate is for another host name
    TlsPinMismatch,     // the server's public key is not the pinned one
    Tls,                // any other TLS failure (handshake, protocol version, bad CA file)
    ConnectionRefused,  // nothing listens at host:port
    ResolveFailed,      // the host name (or the proxy's) does not resolve
    Timeout,            // connect timeout, or the transfer stalled below the low-speed limit
    ConnectionLost,     // the connection broke mid-transfer (reset, cut, short body)
    Proxy,              // the proxy refused or failed
    HttpStatus,         // the server answered 4xx/5xx (apiCode/apiMessage from its JSON body)
    BadResponse,        // an answer that breaks the protocol (wrong Content-Range, bad JSON)
    ChecksumMismatch,   // a download whose SHA-256 (or size) is not the expected one
    BadSignature,       // a manifest or receipt whose signature does not verify
    Cancelled,          // a progress callback asked to stop
    LocalIo,            // reading or writing a local file failed
    Other,
};

const char* httpErrorKindName(HttpErrorKind kind);

struct HttpError {
    HttpErrorKind kind = HttpErrorKind::Other;
    std::string message;  // for people: what was found and what was expected
    long httpStatus = 0;  // for HttpStatus
    std::string apiCode;  // "error.code" of the server's JSON body, when it had one
    std::string apiMessage;
    std::optional<std::chrono::milliseconds> retryAfter;  // from a Retry-After header
    int attempts = 1;                                     // how many tries were made
    int64_t bytesTransferred = 0;  // body bytes moved over the network, over all attempts

    // Worth trying again later: transport failures, 408/429/500/502/503/504, and 409
    // upload_in_progress (an earlier broken attempt not yet noticed by the coordinator).
    bool transient() const;
    Error toError() const { return Error{message}; }
};

// Like Expected<T>, with an HttpError.
template <class T>
using HttpResult = Expected<T, HttpError>;

struct Unit {};
using HttpStatusResult = HttpResult<Unit>;

// Header names are stored lower case.
using HttpHeaders = std::multimap<std::string, std::string>;

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

struct RetryPolicy {
    int maxAttempts = 6;  // 1: no retry
    std::chrono::milliseconds initialBackoff{1000};
    std::chrono::milliseconds maxBackoff{60000};
    // The wait before retry n (n = 1, 2, ...) is b = min(max, initial * 2^(n-1)) reduced by a
    // random fraction of up to `jitter` (0: exact, 0.5: uniform in [b/2, b]). A Retry-After from
    // the server replaces it, capped at maxRetryAfter.
    double jitter = 0.5;
    std::chrono::milliseconds maxRetryAfter{std::chrono::minutes(10)};
    static RetryPolicy none() {
        RetryPolicy p;
        p.maxAttempts = 1;
        return p;
    }
};

struct HttpClientConfig {
    // "https://host:port"; request paths ("/v1/...") are appended. Full https:// URLs given to a
    // request are used as they are.
    std::string baseUrl;
    // Trust: a CA file (PEM), a pinned public key "sha256//<base64>", or both. Neither: the
    // system's CA store.
    std::filesystem::path caFile;
    std::string pinnedPublicKey;
    // Proxy: "" takes it from the environment (https_proxy, HTTPS_PROXY, all_proxy, no_proxy, as
    // curl reads them); "direct" uses none; otherwise a URL: http://host:port, socks5://,
    // socks5h:// (the proxy resolves names), with optional user:password@.
    std::string proxy;
    std::string bearerToken;
    std::string userAgent = "tandem";
    std::chrono::milliseconds connectTimeout{15000};
    // Abort a transfer slower than lowSpeedBytesPerSecond for lowSpeedSeconds (a stalled
    // connection), instead of a total timeout that would cut a slow but moving upload.
    int64_t lowSpeedBytesPerSecond = 1;
    int lowSpeedSeconds = 60;
    // 0: unlimited.
    int64_t maxSendBytesPerSecond = 0;
    int64_t maxRecvBytesPerSecond = 0;
    RetryPolicy retry;
    // Injectable for tests: how to wait before a retry, and the wall clock for HTTP dates.
    std::function<void(std::chrono::milliseconds)> sleep;
    std::function<std::chrono::system_clock::time_point()> now;
    uint64_t jitterSeed = 0;  // 0: from the CSPRNG
};

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
};

struct DownloadResult {
    int64_t bytes = 0;
    int64_t bytesTransferred = 0;  // received over the network, over all attempts
    int64_t resumedFrom = 0;       // bytes already on disk when it started
    int attempts = 0;
    bool alreadyPresent = false;  // the destination already held the verified file
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

// "120" or an HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT") relative to `now`; nullopt when
// neither. Dates in the past give 0.
std::optional<std::chrono::milliseconds> parseRetryAfter(const std::string& value,
                                                         std::chrono::system_clock::time_point now);

// "bytes 100-199/1000" -> {100, 199, 1000} (total -1 for "*").
struct ContentRange {
    int64_t first = -1, last = -1, total = -1;
};
std::optional<ContentRange> parseContentRange(const std::string& value);

}  // namespace tandem::net
