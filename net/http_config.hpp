// How the HTTPS client is set up: trust (CA file and/or public-key pin), proxy, timeouts, rate
// limits, the retry policy; the checks of a configuration, the https://-only URL rule, and the
// TLS and connection options each libcurl handle gets from it.
#pragma once

#include "http_error.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

typedef void CURL;  // as <curl/curl.h> declares it

namespace tandem::net {

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
    // Trust for mirrors: blob downloads (protocol v4) from another host than the coordinator's
    // are checked against this CA file, or the system's CA store when empty; never against the
    // coordinator's pin or CA file (a mirror is another server; its bytes are checked by SHA-256).
    std::filesystem::path mirrorCaFile;
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

// The configuration as the client uses it: an https:// base URL without trailing '/', well-formed
// pins, a readable CA file, positive limits, and the real sleep and clock where none was given.
HttpResult<HttpClientConfig> checkHttpClientConfig(HttpClientConfig config);

// Resolves a request path against the base URL and refuses anything but https://.
HttpResult<std::string> resolveUrl(const std::string& baseUrl, const std::string& url);

// With a pin and no CA file the pin is the trust anchor: the chain is not checked.
bool pinIsTrustAnchor(const HttpClientConfig& config);

// Whether a resolved URL lies on the coordinator (the base URL's scheme, host and port).
bool onCoordinator(const std::string& baseUrl, const std::string& fullUrl);

// The configuration a request to a mirror is made with: the mirror CA file (or the system's
// store) instead of the coordinator's pin and CA file.
HttpClientConfig mirrorConfig(const HttpClientConfig& config);

// TLS (version, host name, chain, pin), proxy, connect timeout, low-speed abort and keep-alive
// on a libcurl easy handle; the rate limits are set per transfer by the caller.
void applyConnectionOptions(CURL* handle, const HttpClientConfig& config);

}  // namespace tandem::net
