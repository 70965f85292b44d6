#include "http_config.hpp"
#include "text.hpp"

#include "crypto.hpp"

#include <curl/curl.h>

#include <unistd.h>

#include <thread>

namespace tandem::net {

namespace {

// One or more "sha256//<base64 of 32 bytes>" separated by ';' (curl's format).
HttpStatusResult checkPins(const std::string& pins) {
    size_t start = 0;
    while (start <= pins.size()) {
        size_t end = pins.find(';', start);
        const std::string pin = trimWhitespace(
            pins.substr(start, end == std::string::npos ? std::string::npos : end - start));
        auto raw = pin.rfind("sha256//", 0) == 0 ? fromBase64(pin.substr(8))
                                                 : Expected<std::vector<uint8_t>>(Error{});
        if (!raw || raw->size() != 32)
            return makeHttpError(HttpErrorKind::Tls,
                                 "the public-key pin must be 'sha256//' followed by the "
                                 "base64 of 32 bytes, found '" +
                                     pin + "'");
        if (end == std::string::npos)
            break;
        start = end + 1;
    }
    return Unit{};
}

}  // namespace

HttpResult<HttpClientConfig> checkHttpClientConfig(HttpClientConfig config) {
    if (!startsWithNoCase(config.baseUrl, "https://")) {
        if (startsWithNoCase(config.baseUrl, "http://"))
            return makeHttpError(HttpErrorKind::InvalidUrl,
                                 "refusing the plain http:// URL '" + config.baseUrl +
                                     "': coordinators are reached only over https:// (TLS is "
                                     "always on and verified)");
        return makeHttpError(
            HttpErrorKind::InvalidUrl,
            "the coordinator URL must start with https://, found '" + config.baseUrl + "'");
    }
    while (!config.baseUrl.empty() && config.baseUrl.back() == '/')
        config.baseUrl.pop_back();
    if (!config.pinnedPublicKey.empty()) {
        if (auto pins = checkPins(config.pinnedPublicKey); !pins)
            return pins.error();
    }
    if (!config.mirrorCaFile.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(config.mirrorCaFile, ec) ||
            ::access(config.mirrorCaFile.c_str(), R_OK) != 0)
            return makeHttpError(HttpErrorKind::Tls, "the mirror CA file '" +
                                                         config.mirrorCaFile.string() +
                                                         "' does not exist or cannot be read");
    }
    if (!config.caFile.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(config.caFile, ec) ||
            ::access(config.caFile.c_str(), R_OK) != 0)
            return makeHttpError(HttpErrorKind::Tls, "the CA file '" + config.caFile.string() +
                                                         "' does not exist or cannot be read");
    }
    if (config.connectTimeout.count() <= 0 || config.lowSpeedSeconds <= 0 ||
        config.lowSpeedBytesPerSecond < 0 || config.retry.maxAttempts < 1)
        return makeHttpError(HttpErrorKind::Other,
                             "connect timeout and low-speed time must be positive and "
                             "maxAttempts at least 1");
    if (!config.sleep)
        config.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
    if (!config.now)
        config.now = [] { return std::chrono::system_clock::now(); };
    return config;
}

HttpResult<std::string> resolveUrl(const std::string& baseUrl, const std::string& url) {
    if (startsWithNoCase(url, "https://"))
        return url;
    if (startsWithNoCase(url, "http://"))
        return makeHttpError(HttpErrorKind::InvalidUrl,
                             "refusing the plain http:// URL '" + url +
                                 "': only https:// is used (TLS is always on and verified)");
    if (url.find("://") != std::string::npos)
        return makeHttpError(HttpErrorKind::InvalidUrl,
                             "only https:// URLs are used, found '" + url + "'");
    if (url.empty() || url[0] != '/')
        return makeHttpError(HttpErrorKind::InvalidUrl,
                             "a request path must start with '/', found '" + url + "'");
    return baseUrl + url;
}

bool pinIsTrustAnchor(const HttpClientConfig& config) {
    return config.caFile.empty() && !config.pinnedPublicKey.empty();
}

bool onCoordinator(const std::string& baseUrl, const std::string& fullUrl) {
    return fullUrl.size() > baseUrl.size() && fullUrl[baseUrl.size()] == '/' &&
           startsWithNoCase(fullUrl, baseUrl);
}

HttpClientConfig mirrorConfig(const HttpClientConfig& config) {
    HttpClientConfig c = config;
    c.caFile = config.mirrorCaFile;
    c.pinnedPublicKey.clear();
    return c;
}

void applyConnectionOptions(CURL* h, const HttpClientConfig& cfg) {
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, cfg.userAgent.c_str());

    // TLS. Always: TLS 1.2 or newer and the host name checked against the certificate's names
    // (VERIFYHOST 2). With a CA file (or neither, the system store): the chain must lead to a
    // trusted CA and be valid now (VERIFYPEER), plus the pin when one is given. With a pin and no
    // CA file: only the chain check is off; the server must hold the private key of the pinned
    // public key (the handshake proves it) and its certificate must name the host. Expiry and
    // issuer are then not checked: the pin is the trust anchor.
    curl_easy_setopt(h, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, pinIsTrustAnchor(cfg) ? 0L : 1L);
    if (!cfg.caFile.empty())
        curl_easy_setopt(h, CURLOPT_CAINFO, cfg.caFile.c_str());
    if (!cfg.pinnedPublicKey.empty())
        curl_easy_setopt(h, CURLOPT_PINNEDPUBLICKEY, cfg.pinnedPublicKey.c_str());

    if (cfg.proxy == "direct")
        curl_easy_setopt(h, CURLOPT_PROXY, "");
    else if (!cfg.proxy.empty())
        curl_easy_setopt(h, CURLOPT_PROXY, cfg.proxy.c_str());

    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(cfg.connectTimeout.count()));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(cfg.lowSpeedBytesPerSecond));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(cfg.lowSpeedSeconds));
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
}

}  // namespace tandem::net
