#include "http_error.hpp"

#include "protocol.hpp"

#include <curl/curl.h>
#include <openssl/x509_vfy.h>

#include <cctype>
#include <cerrno>

namespace tandem::net {

namespace {

std::string hostOf(const std::string& url) {
    size_t a = url.find("://");
    a = a == std::string::npos ? 0 : a + 3;
    size_t b = url.find('/', a);
    return url.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

// CURLE_PEER_FAILED_VERIFICATION: which part of the certificate check failed.
HttpError verificationError(const CurlFailure& f, const std::string& host,
                            const std::string& detail) {
    const std::string lowerDetail = asciiLower(detail);
    if (lowerDetail.find("subject name") != std::string::npos ||
        lowerDetail.find("host name") != std::string::npos ||
        lowerDetail.find("hostname") != std::string::npos)
        return makeHttpError(
            HttpErrorKind::TlsHostMismatch,
            "TLS: the certificate of " + host + " is for another host name (" + detail + ")");
    if (f.verifyResult == X509_V_ERR_HOSTNAME_MISMATCH ||
        f.verifyResult == X509_V_ERR_IP_ADDRESS_MISMATCH)
        return makeHttpError(HttpErrorKind::TlsHostMismatch,
                             "TLS: the certificate of " + host + " is for another host name (" +
                                 X509_verify_cert_error_string(f.verifyResult) + ")");
    const long v = f.verifyResult;
    const bool unknownIssuer =
        v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT ||
        v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
        v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT || v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
        v == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE || v == X509_V_ERR_CERT_UNTRUSTED;
    if (v != X509_V_OK && !unknownIssuer)  // expired, not yet valid, revoked, ...
        return makeHttpError(
            HttpErrorKind::Tls,
            "TLS: the certificate of " + host + " is refused: " + X509_verify_cert_error_string(v));
    if (unknownIssuer) {
        const std::string why = X509_verify_cert_error_string(v);
        return makeHttpError(
            HttpErrorKind::TlsUnknownCa,
            "TLS: the certificate of " + host + " is not trusted: " + why +
                (f.mirror && f.caFile.empty()
                     ? " (a mirror's certificate must chain to a CA of the system's store)"
                 : f.caFile.empty()
                     ? " (no CA file was given: pass the coordinator's CA "
                       "file or its public-key pin sha256//...)"
                     : " (it does not chain to the CA in " + f.caFile.string() + ")"));
    }
    return makeHttpError(HttpErrorKind::Tls, "TLS: verifying " + host + " failed: " + detail);
}

}  // namespace

const char* httpErrorKindName(HttpErrorKind kind) {
    switch (kind) {
        case HttpErrorKind::InvalidUrl:
            return "invalid_url";
        case HttpErrorKind::TlsUnknownCa:
            return "tls_unknown_ca";
        case HttpErrorKind::TlsHostMismatch:
            return "tls_host_mismatch";
        case HttpErrorKind::TlsPinMismatch:
            return "tls_pin_mismatch";
        case HttpErrorKind::Tls:
            return "tls";
        case HttpErrorKind::ConnectionRefused:
            return "connection_refused";
        case HttpErrorKind::ResolveFailed:
            return "resolve_failed";
        case HttpErrorKind::Timeout:
            return "timeout";
        case HttpErrorKind::ConnectionLost:
            return "connection_lost";
        case HttpErrorKind::Proxy:
            return "proxy";
        case HttpErrorKind::HttpStatus:
            return "http_status";
        case HttpErrorKind::BadResponse:
            return "bad_response";
        case HttpErrorKind::ChecksumMismatch:
            return "checksum_mismatch";
        case HttpErrorKind::BadSignature:
            return "bad_signature";
        case HttpErrorKind::Cancelled:
            return "cancelled";
        case HttpErrorKind::LocalIo:
            return "local_io";
        case HttpErrorKind::Other:
            return "other";
    }
    return "other";
}

bool HttpError::transient() const {
    switch (kind) {
        case HttpErrorKind::ConnectionRefused:
        case HttpErrorKind::ResolveFailed:
        case HttpErrorKind::Timeout:
        case HttpErrorKind::ConnectionLost:
        case HttpErrorKind::Proxy:
            return true;
        case HttpErrorKind::HttpStatus:
            // 409 upload_in_progress: the coordinator has not yet seen the end of an earlier,
            // broken attempt of the same upload.
            return httpStatus == 408 || httpStatus == 429 || httpStatus == 500 ||
                   httpStatus == 502 || httpStatus == 503 || httpStatus == 504 ||
                   (httpStatus == 409 && apiCode == "upload_in_progress");
        default:
            return false;
    }
}

HttpError makeHttpError(HttpErrorKind kind, std::string message) {
    HttpError e;
    e.kind = kind;
    e.message = std::move(message);
    return e;
}

HttpError httpErrorFromStatus(const std::string& method, const std::string& url, long status,
                              const std::string& body, const HttpHeaders& headers,
                              std::chrono::system_clock::time_point now) {
    HttpError e;
    e.kind = HttpErrorKind::HttpStatus;
    e.httpStatus = status;
    std::string what;
    if (auto api = ApiError::fromJson(body)) {
        e.apiCode = api->code;
        e.apiMessage = api->message;
        what = api->code + ": " + api->message;
    } else {
        std::string snippet = body.substr(0, 200);
        for (char& c : snippet)
            if (!std::isprint(static_cast<unsigned char>(c)))
                c = ' ';
        what = snippet.empty() ? "(no body)" : "'" + snippet + "' (not a protocol error body)";
    }
    e.message = "HTTP " + std::to_string(status) + " from " + method + " " + url + ": " + what;
    auto ra = headers.find("retry-after");
    if (ra != headers.end())
        e.retryAfter = parseRetryAfter(ra->second, now);
    return e;
}

// Turns libcurl's result into an HttpError with a message that says what happened.
HttpError httpErrorFromCurl(const CurlFailure& f) {
    const auto code = static_cast<CURLcode>(f.curlCode);
    const std::string host = hostOf(f.url);
    const std::string detail = f.curlMessage.empty() ? curl_easy_strerror(code) : f.curlMessage;
    switch (code) {
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_URL_MALFORMAT:
            return makeHttpError(HttpErrorKind::InvalidUrl,
                                 "cannot use the URL '" + f.url + "': " + detail);
        case CURLE_COULDNT_RESOLVE_HOST:
            return makeHttpError(HttpErrorKind::ResolveFailed,
                                 "cannot resolve the host of " + f.url + ": " + detail);
        case CURLE_COULDNT_RESOLVE_PROXY:
            return makeHttpError(HttpErrorKind::Proxy, "cannot resolve the proxy: " + detail);
        case CURLE_COULDNT_CONNECT:
            if (f.osErrno == ECONNREFUSED)
                return makeHttpError(
                    HttpErrorKind::ConnectionRefused,
                    "connection to " + host + " refused (nothing listens there" +
                        std::string(f.proxy.empty() || f.proxy == "direct" ? ""
                                                                           : ", or at the proxy") +
                        "): " + detail);
            return makeHttpError(HttpErrorKind::ConnectionLost,
                                 "cannot connect to " + host + ": " + detail);
        case CURLE_OPERATION_TIMEDOUT:
            if (!f.connected)
                return makeHttpError(HttpErrorKind::Timeout,
                                     "connecting to " + host + " timed out after " +
                                         std::to_string(f.connectTimeout.count()) +
                                         " ms: " + detail);
            return makeHttpError(HttpErrorKind::Timeout,
                                 "the transfer with " + host + " stalled: below " +
                                     std::to_string(f.lowSpeedBytesPerSecond) + " bytes/s for " +
                                     std::to_string(f.lowSpeedSeconds) + " s (" + detail + ")");
        case CURLE_PEER_FAILED_VERIFICATION:
            return verificationError(f, host, detail);
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return makeHttpError(HttpErrorKind::TlsPinMismatch,
                                 "TLS: the public key of " + host +
                                     " does not match the pinned key " + f.pinnedPublicKey +
                                     " (another server, or the coordinator's certificate changed)");
        case CURLE_SSL_CONNECT_ERROR: {
            // A connection cut during the handshake is a lost connection, not a TLS policy failure.
            const std::string l = asciiLower(detail);
            if (f.osErrno != 0 || l.find("eof") != std::string::npos ||
                l.find("reset") != std::string::npos || l.find("syscall") != std::string::npos)
                return makeHttpError(
                    HttpErrorKind::ConnectionLost,
                    "the connection to " + host + " broke during the TLS handshake: " + detail);
            return makeHttpError(HttpErrorKind::Tls,
                                 "TLS handshake with " + host + " failed: " + detail);
        }
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_ENGINE_NOTFOUND:
        case CURLE_SSL_SHUTDOWN_FAILED:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
            return makeHttpError(HttpErrorKind::Tls, "TLS with " + host + ": " + detail);
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_PARTIAL_FILE:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_HTTP3:
            return makeHttpError(HttpErrorKind::ConnectionLost, "the connection to " + host +
                                                                    " broke during " + f.method +
                                                                    " " + f.url + ": " + detail);
        case CURLE_ABORTED_BY_CALLBACK:
            return makeHttpError(HttpErrorKind::Cancelled,
                                 f.method + " " + f.url + " was cancelled");
        case CURLE_WRITE_ERROR:
            return makeHttpError(HttpErrorKind::LocalIo,
                                 "writing the answer of " + f.url + " failed: " + detail);
        case CURLE_READ_ERROR:
            return makeHttpError(HttpErrorKind::LocalIo,
                                 "reading the body to send to " + f.url + " failed: " + detail);
        case CURLE_PROXY:
            return makeHttpError(HttpErrorKind::Proxy, "the proxy failed: " + detail);
        default:
            return makeHttpError(HttpErrorKind::Other, f.method + " " + f.url + ": " + detail);
    }
}

}  // namespace tandem::net
