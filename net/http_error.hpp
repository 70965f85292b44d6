// The errors of the HTTPS client as values (HttpError), and how a failed transfer becomes one:
// libcurl's result (with the TLS verification result and the socket's errno) or a 4xx/5xx answer
// (with the server's {"error":{"code","message"}}). The mapping takes plain values, so it can be
// tested without a network (tests/net/test_net_http_error.cpp).
#pragma once

#include "expected.hpp"
#include "http_headers.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

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

HttpError makeHttpError(HttpErrorKind kind, std::string message);

// What a failed libcurl transfer reported, and what the client was configured with (for the
// message: which CA file, which pin, which limits).
struct CurlFailure {
    int curlCode = 0;         // CURLcode
    std::string curlMessage;  // libcurl's error buffer; empty: curl_easy_strerror(curlCode)
    long verifyResult = 0;    // CURLINFO_SSL_VERIFYRESULT (an X509_V_ERR_* code)
    long osErrno = 0;         // CURLINFO_OS_ERRNO
    bool connected = false;   // the TLS handshake had completed
    std::string method;       // "GET"
    std::string url;          // the full URL
    std::filesystem::path caFile;
    std::string pinnedPublicKey;
    std::string proxy;    // "", "direct" or a URL
    bool mirror = false;  // a blob download from a mirror (trusted per mirrorConfig)
    std::chrono::milliseconds connectTimeout{0};
    int64_t lowSpeedBytesPerSecond = 0;
    int lowSpeedSeconds = 0;
};
HttpError httpErrorFromCurl(const CurlFailure& failure);

// A 4xx/5xx answer: the server's error.code and message when its body is a protocol error body,
// else a printable snippet of the body; Retry-After relative to `now`.
HttpError httpErrorFromStatus(const std::string& method, const std::string& url, long status,
                              const std::string& body, const HttpHeaders& headers,
                              std::chrono::system_clock::time_point now);

}  // namespace tandem::net
