// The curl transport under HttpClient: a pool of libcurl easy handles (they keep their
// connections between requests) and one attempt of one request (no retries), with its body from
// memory or a file, its answer into memory (bounded) or a sink, and progress callbacks.
#pragma once

#include "http_client.hpp"
#include "random.hpp"

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tandem::net {

void curlGlobalInit();

struct HttpClient::Impl {
    std::mutex mutex;
    std::vector<CURL*> idle;  // easy handles keep their connections between requests
    std::string token;
    int64_t maxSend = 0, maxRecv = 0;
    Rng rng{1};

    ~Impl();
    CURL* take();
    void give(CURL* handle);
    void closeIdle();
};

namespace transport {

constexpr int64_t kMaxErrorBodyBytes = 64 * 1024;

// What one attempt does with the bytes of the response body.
struct BodySink {
    // Called with each chunk of the body once the headers are complete; false aborts.
    std::function<bool(const char*, size_t, long status, const HttpHeaders&)> write;
};

// The body of a request: memory or an open file descriptor.
struct BodySource {
    const uint8_t* data = nullptr;
    int fd = -1;
    int64_t size = 0;
    int64_t position = 0;
};

struct AttemptSpec {
    std::string method;
    std::string url;
    HttpHeaders headers;
    std::string postFields;  // for JSON requests
    bool hasPostFields = false;
    BodySource* upload = nullptr;  // PUT/POST of a streamed body
    BodySink* sink = nullptr;      // nullptr: the body goes to outcome.body (bounded)
    int64_t maxMemoryBody = kMaxErrorBodyBytes;
    const ProgressCallback* progress = nullptr;
    int64_t progressBase = 0;    // bytes already on disk (downloads)
    int64_t progressTotal = -1;  // known total, if any
    bool sendToken = true;       // false: no Authorization header (blobs)
    bool mirror = false;         // to a mirror: its errors say so
};

struct AttemptOutcome {
    int curlCode = 0;  // CURLcode; 0 is CURLE_OK
    long status = 0;
    HttpHeaders headers;
    std::string body;
    bool bodyTruncated = false;
    std::string curlMessage;
    long verifyResult = 0;
    long osErrno = 0;
    bool connected = false;
    std::optional<HttpError> sinkError;  // set by a sink that refused the body
    int64_t bytesReceived = 0;
    int64_t bytesSent = 0;  // body bytes handed to libcurl
    double secondsPretransfer = 0, secondsStartTransfer = 0, secondsTotal = 0;

    bool ok() const { return curlCode == 0; }
    bool writeAborted() const;  // CURLE_WRITE_ERROR: a sink returned false
};

// One request, no retries. The outcome holds libcurl's code and the answer.
AttemptOutcome performAttempt(HttpClient::Impl& impl, const HttpClientConfig& config,
                              AttemptSpec& spec);

// The error of a failed attempt: the sink's own error, else libcurl's mapped (http_error.hpp).
HttpError failureOf(const AttemptSpec& spec, const AttemptOutcome& out,
                    const HttpClientConfig& config);

// A 4xx/5xx answer as an HttpStatus error.
HttpError statusErrorOf(const AttemptSpec& spec, const AttemptOutcome& out,
                        const HttpClientConfig& config);

HttpResponse toResponse(AttemptOutcome&& out, const HttpClientConfig& config);

}  // namespace transport
}  // namespace tandem::net
