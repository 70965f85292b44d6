// The HTTPS client's error mapping without a network: libcurl results (with the TLS verification
// result and errno) and 4xx/5xx answers become HttpError values with the right kind, the right
// transient() answer and a message that says what was found and what was expected.
#include "http_error.hpp"

#include <curl/curl.h>
#include <openssl/x509_vfy.h>

#include <QtTest>

#include <cerrno>

using namespace tandem;
using namespace tandem::net;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

CurlFailure failure(CURLcode code, std::string message = "libcurl says so") {
    CurlFailure f;
    f.curlCode = code;
    f.curlMessage = std::move(message);
    f.method = "PUT";
    f.url = "https://coord.example:8443/v1/results/7";
    f.connectTimeout = 15000ms;
    f.lowSpeedBytesPerSecond = 1;
    f.lowSpeedSeconds = 60;
    return f;
}

HttpError statusError(long status, const std::string& body, const HttpHeaders& headers = {}) {
    return httpErrorFromStatus("POST", "https://coord.example/v1/work", status, body, headers,
                               std::chrono::system_clock::from_time_t(1700000000));
}

}  // namespace

class TestNetHttpError : public QObject {
    Q_OBJECT
  private slots:
    void kindNames() {
        const std::pair<HttpErrorKind, const char*> names[] = {
            {HttpErrorKind::InvalidUrl, "invalid_url"},
            {HttpErrorKind::TlsUnknownCa, "tls_unknown_ca"},
            {HttpErrorKind::TlsHostMismatch, "tls_host_mismatch"},
            {HttpErrorKind::TlsPinMismatch, "tls_pin_mismatch"},
            {HttpErrorKind::Tls, "tls"},
            {HttpErrorKind::ConnectionRefused, "connection_refused"},
            {HttpErrorKind::ResolveFailed, "resolve_failed"},
            {HttpErrorKind::Timeout, "timeout"},
            {HttpErrorKind::ConnectionLost, "connection_lost"},
            {HttpErrorKind::Proxy, "proxy"},
            {HttpErrorKind::HttpStatus, "http_status"},
            {HttpErrorKind::BadResponse, "bad_response"},
            {HttpErrorKind::ChecksumMismatch, "checksum_mismatch"},
            {HttpErrorKind::BadSignature, "bad_signature"},
            {HttpErrorKind::Cancelled, "cancelled"},
            {HttpErrorKind::LocalIo, "local_io"},
            {HttpErrorKind::Other, "other"}};
        for (const auto& [kind, name] : names)
            QCOMPARE(std::string(httpErrorKindName(kind)), std::string(name));
    }

    void transientKinds() {
        for (HttpErrorKind k :
             {HttpErrorKind::ConnectionRefused, HttpErrorKind::ResolveFailed,
              HttpErrorKind::Timeout, HttpErrorKind::ConnectionLost, HttpErrorKind::Proxy})
            QVERIFY2(makeHttpError(k, "x").transient(), httpErrorKindName(k));
        for (HttpErrorKind k :
             {HttpErrorKind::InvalidUrl, HttpErrorKind::TlsUnknownCa,
              HttpErrorKind::TlsHostMismatch, HttpErrorKind::TlsPinMismatch, HttpErrorKind::Tls,
              HttpErrorKind::BadResponse, HttpErrorKind::ChecksumMismatch,
              HttpErrorKind::BadSignature, HttpErrorKind::Cancelled, HttpErrorKind::LocalIo,
              HttpErrorKind::Other})
            QVERIFY2(!makeHttpError(k, "x").transient(), httpErrorKindName(k));
    }

    void transientStatuses() {
        for (long s : {408L, 429L, 500L, 502L, 503L, 504L})
            QVERIFY2(statusError(s, "").transient(), qPrintable(QString::number(s)));
        for (long s : {400L, 401L, 403L, 404L, 409L, 410L, 413L, 422L, 501L, 505L})
            QVERIFY2(!statusError(s, "").transient(), qPrintable(QString::number(s)));
        // 409 is transient only while an earlier attempt of the same upload is still open.
        QVERIFY(statusError(409, R"({"error":{"code":"upload_in_progress","message":"m"}})")
                    .transient());
        QVERIFY(!statusError(409, R"({"error":{"code":"duplicate","message":"m"}})").transient());
    }

    void statusWithProtocolBody() {
        const HttpError e = statusError(422, R"({"error":{"code":"stale","message":"too old"}})");
        QCOMPARE(e.kind, HttpErrorKind::HttpStatus);
        QCOMPARE(e.httpStatus, 422L);
        QCOMPARE(e.apiCode, std::string("stale"));
        QCOMPARE(e.apiMessage, std::string("too old"));
        QCOMPARE(e.message,
                 std::string("HTTP 422 from POST https://coord.example/v1/work: stale: too old"));
        QVERIFY(!e.retryAfter);
    }

    void statusWithOtherBodies() {
        const HttpError html = statusError(502, "<html>\r\nBad\tGateway</html>");
        QVERIFY(html.apiCode.empty());
        QCOMPARE(html.message, std::string("HTTP 502 from POST https://coord.example/v1/work: "
                                           "'<html>  Bad Gateway</html>' (not a protocol error "
                                           "body)"));
        QVERIFY(contains(statusError(404, "").message, ": (no body)"));
        // Only the first 200 bytes of a long body.
        const HttpError longBody = statusError(500, std::string(1000, 'x'));
        QVERIFY(contains(longBody.message, "'" + std::string(200, 'x') + "'"));
        QVERIFY(!contains(longBody.message, std::string(201, 'x')));
    }

    void statusRetryAfter() {
        HttpHeaders seconds{{"retry-after", "120"}};
        QCOMPARE(statusError(503, "", seconds).retryAfter, std::optional(120000ms));
        // An HTTP date 90 s after the `now` given (1700000000 = Tue, 14 Nov 2023 22:13:20 GMT).
        HttpHeaders date{{"retry-after", "Tue, 14 Nov 2023 22:14:50 GMT"}};
        QCOMPARE(statusError(429, "", date).retryAfter, std::optional(90000ms));
        HttpHeaders garbage{{"retry-after", "soon"}};
        QVERIFY(!statusError(429, "", garbage).retryAfter);
    }

    void connectFailures() {
        CurlFailure refused = failure(CURLE_COULDNT_CONNECT, "Connection refused");
        refused.osErrno = ECONNREFUSED;
        HttpError e = httpErrorFromCurl(refused);
        QCOMPARE(e.kind, HttpErrorKind::ConnectionRefused);
        QCOMPARE(e.message, std::string("connection to coord.example:8443 refused (nothing listens "
                                        "there): Connection refused"));
        QVERIFY(e.transient());
        refused.proxy = "socks5h://proxy:1080";
        QVERIFY(contains(httpErrorFromCurl(refused).message,
                         "nothing listens there, or at the "
                         "proxy"));
        refused.proxy = "direct";
        QVERIFY(!contains(httpErrorFromCurl(refused).message, "proxy"));

        CurlFailure unreachable = failure(CURLE_COULDNT_CONNECT, "No route to host");
        unreachable.osErrno = EHOSTUNREACH;
        e = httpErrorFromCurl(unreachable);
        QCOMPARE(e.kind, HttpErrorKind::ConnectionLost);
        QCOMPARE(e.message, std::string("cannot connect to coord.example:8443: No route to host"));

        e = httpErrorFromCurl(failure(CURLE_COULDNT_RESOLVE_HOST));
        QCOMPARE(e.kind, HttpErrorKind::ResolveFailed);
        QVERIFY(contains(e.message, "cannot resolve the host of https://coord.example:8443/"));
        QCOMPARE(httpErrorFromCurl(failure(CURLE_COULDNT_RESOLVE_PROXY)).kind,
                 HttpErrorKind::Proxy);
        QCOMPARE(httpErrorFromCurl(failure(CURLE_PROXY)).kind, HttpErrorKind::Proxy);
        QCOMPARE(httpErrorFromCurl(failure(CURLE_URL_MALFORMAT)).kind, HttpErrorKind::InvalidUrl);
        QCOMPARE(httpErrorFromCurl(failure(CURLE_UNSUPPORTED_PROTOCOL)).kind,
                 HttpErrorKind::InvalidUrl);
    }

    void timeouts() {
        CurlFailure f = failure(CURLE_OPERATION_TIMEDOUT, "Timeout was reached");
        HttpError e = httpErrorFromCurl(f);
        QCOMPARE(e.kind, HttpErrorKind::Timeout);
        QCOMPARE(e.message, std::string("connecting to coord.example:8443 timed out after 15000 "
                                        "ms: Timeout was reached"));
        f.connected = true;
        e = httpErrorFromCurl(f);
        QCOMPARE(e.kind, HttpErrorKind::Timeout);
        QCOMPARE(e.message, std::string("the transfer with coord.example:8443 stalled: below 1 "
                                        "bytes/s for 60 s (Timeout was reached)"));
        QVERIFY(e.transient());
    }

    void certificateVerification() {
        // Host name: from libcurl's text, or from OpenSSL's verify result.
        CurlFailure f = failure(CURLE_PEER_FAILED_VERIFICATION,
                                "SSL: no alternative certificate subject name matches");
        QCOMPARE(httpErrorFromCurl(f).kind, HttpErrorKind::TlsHostMismatch);
        f = failure(CURLE_PEER_FAILED_VERIFICATION, "verification failed");
        f.verifyResult = X509_V_ERR_HOSTNAME_MISMATCH;
        HttpError e = httpErrorFromCurl(f);
        QCOMPARE(e.kind, HttpErrorKind::TlsHostMismatch);
        QVERIFY(contains(e.message, "is for another host name (hostname mismatch)"));

        // Unknown issuer: the message says which trust was used.
        f.verifyResult = X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT;
        e = httpErrorFromCurl(f);
        QCOMPARE(e.kind, HttpErrorKind::TlsUnknownCa);
        QVERIFY(contains(e.message, "not trusted: self-signed certificate"));
        QVERIFY(contains(e.message, "no CA file was given"));
        f.caFile = "/etc/tandem/ca.pem";
        e = httpErrorFromCurl(f);
        QCOMPARE(e.kind, HttpErrorKind::TlsUnknownCa);
        QVERIFY(contains(e.message, "does not chain to the CA in /etc/tandem/ca.pem"));
        for (long v :
             {X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
              X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE,
              X509_V_ERR_CERT_UNTRUSTED}) {
            f.verifyResult = v;
            QCOMPARE(httpErrorFromCurl(f).kind, HttpErrorKind::TlsUnknownCa);
        }

        // Any other verify result: refused, with OpenSSL's reason.
        f.verifyResult = X509_V_ERR_CERT_HAS_EXPIRED;
        e = httpErrorFromCurl(f);
        QCOMPARE(e.kind, HttpErrorKind::Tls);
        QCOMPARE(e.message, std::string("TLS: the certificate of coord.example:8443 is refused: "
                                        "certificate has expired"));
        QVERIFY(!e.transient());
        f.verifyResult = X509_V_OK;
        e = httpErrorFromCurl(f);
        QCOMPARE(e.kind, HttpErrorKind::Tls);
        QVERIFY(contains(e.message, "verifying coord.example:8443 failed: verification failed"));
    }

    void pinAndHandshake() {
        CurlFailure f = failure(CURLE_SSL_PINNEDPUBKEYNOTMATCH);
        f.pinnedPublicKey = "sha256//AAAA";
        HttpError e = httpErrorFromCurl(f);
        QCOMPARE(e.kind, HttpErrorKind::TlsPinMismatch);
        QVERIFY(contains(e.message, "does not match the pinned key sha256//AAAA"));

        // A handshake cut by the network is a lost connection (worth retrying), not TLS policy.
        f = failure(CURLE_SSL_CONNECT_ERROR, "OpenSSL SSL_connect: SSL_ERROR_SYSCALL");
        QCOMPARE(httpErrorFromCurl(f).kind, HttpErrorKind::ConnectionLost);
        f = failure(CURLE_SSL_CONNECT_ERROR, "unexpected EOF while reading");
        QCOMPARE(httpErrorFromCurl(f).kind, HttpErrorKind::ConnectionLost);
        f = failure(CURLE_SSL_CONNECT_ERROR, "handshake");
        f.osErrno = ECONNRESET;
        QCOMPARE(httpErrorFromCurl(f).kind, HttpErrorKind::ConnectionLost);
        f = failure(CURLE_SSL_CONNECT_ERROR, "tlsv1 alert protocol version");
        e = httpErrorFromCurl(f);
        QCOMPARE(e.kind, HttpErrorKind::Tls);
        QCOMPARE(e.message, std::string("TLS handshake with coord.example:8443 failed: tlsv1 alert "
                                        "protocol version"));
        for (CURLcode c : {CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER})
            QCOMPARE(httpErrorFromCurl(failure(c)).kind, HttpErrorKind::Tls);
    }

    void brokenTransfers() {
        for (CURLcode c : {CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE,
                           CURLE_GOT_NOTHING, CURLE_HTTP2, CURLE_HTTP2_STREAM}) {
            const HttpError e = httpErrorFromCurl(failure(c, "Connection reset by peer"));
            QCOMPARE(e.kind, HttpErrorKind::ConnectionLost);
            QCOMPARE(e.message,
                     std::string("the connection to coord.example:8443 broke during PUT "
                                 "https://coord.example:8443/v1/results/7: Connection reset by "
                                 "peer"));
            QVERIFY(e.transient());
        }
        HttpError e = httpErrorFromCurl(failure(CURLE_ABORTED_BY_CALLBACK));
        QCOMPARE(e.kind, HttpErrorKind::Cancelled);
        QCOMPARE(e.message, std::string("PUT https://coord.example:8443/v1/results/7 was "
                                        "cancelled"));
        QVERIFY(!e.transient());
        QCOMPARE(httpErrorFromCurl(failure(CURLE_WRITE_ERROR)).kind, HttpErrorKind::LocalIo);
        QCOMPARE(httpErrorFromCurl(failure(CURLE_READ_ERROR)).kind, HttpErrorKind::LocalIo);
    }

    void otherCodesUseLibcurlsText() {
        // Without an error-buffer text the message is curl_easy_strerror's.
        const HttpError e = httpErrorFromCurl(failure(CURLE_OUT_OF_MEMORY, ""));
        QCOMPARE(e.kind, HttpErrorKind::Other);
        QCOMPARE(e.message, std::string("PUT https://coord.example:8443/v1/results/7: ") +
                                curl_easy_strerror(CURLE_OUT_OF_MEMORY));
        QVERIFY(!e.transient());
    }
};

QTEST_APPLESS_MAIN(TestNetHttpError)
#include "test_net_http_error.moc"
