#include "http_client.hpp"

#include "protocol.hpp"
#include "random.hpp"

#include <curl/curl.h>
#include <openssl/x509_vfy.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

namespace tandem::net {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int64_t kMaxErrorBodyBytes = 64 * 1024;
constexpr auto kProgressInterval = milliseconds(100);

std::string lower(std::string s) {
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string trim(const std::string& s) {
    size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a])))
        ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])))
        --b;
    return s.substr(a, b - a);
}

bool startsWithNoCase(const std::string& s, const std::string& prefix) {
    return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == prefix;
}

void curlGlobalInit() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpError makeHttpError(HttpErrorKind kind, std::string message) {
    HttpError e;
    e.kind = kind;
    e.message = std::move(message);
    return e;
}

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
};

struct AttemptOutcome {
    CURLcode code = CURLE_OK;
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
};

struct CallbackState {
    AttemptSpec* spec = nullptr;
    AttemptOutcome* out = nullptr;
    Clock::time_point start;
    Clock::time_point lastProgress;
};

size_t headerCallback(char* buffer, size_t size, size_t count, void* user) {
    auto* st = static_cast<CallbackState*>(user);
    const size_t n = size * count;
    std::string line(buffer, n);
    if (line.rfind("HTTP/", 0) == 0) {
        // A new response (after 100 Continue, or the real one): start over.
        st->out->headers.clear();
        const size_t sp = line.find(' ');
        st->out->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
        return n;
    }
    const size_t colon = line.find(':');
    if (colon != std::string::npos)
        st->out->headers.emplace(lower(trim(line.substr(0, colon))), trim(line.substr(colon + 1)));
    return n;
}

size_t writeCallback(char* data, size_t size, size_t count, void* user) {
    auto* st = static_cast<CallbackState*>(user);
    const size_t n = size * count;
    st->out->bytesReceived += static_cast<int64_t>(n);
    if (st->spec->sink && st->out->status >= 200 && st->out->status < 300) {
        if (!st->spec->sink->write(data, n, st->out->status, st->out->headers))
            return 0;  // CURLE_WRITE_ERROR
        return n;
    }
    // Error bodies and JSON answers: kept in memory up to a bound.
    const int64_t room = st->spec->maxMemoryBody - static_cast<int64_t>(st->out->body.size());
    if (room <= 0) {
        st->out->bodyTruncated = true;
        return n;
    }
    st->out->body.append(data, std::min<size_t>(n, static_cast<size_t>(room)));
    if (static_cast<int64_t>(n) > room)
        st->out->bodyTruncated = true;
    return n;
}

size_t readCallback(char* buffer, size_t size, size_t count, void* user) {
    auto* src = static_cast<BodySource*>(user);
    const int64_t want =
        std::min<int64_t>(static_cast<int64_t>(size * count), src->size - src->position);
    if (want <= 0)
        return 0;
    if (src->data) {
        std::memcpy(buffer, src->data + src->position, static_cast<size_t>(want));
        src->position += want;
        return static_cast<size_t>(want);
    }
    const ssize_t got = ::pread(src->fd, buffer, static_cast<size_t>(want), src->position);
    if (got <= 0)
        return CURL_READFUNC_ABORT;
    src->position += got;
    return static_cast<size_t>(got);
}

int seekCallback(void* user, curl_off_t offset, int origin) {
    auto* src = static_cast<BodySource*>(user);
    if (origin != SEEK_SET || offset < 0 || offset > src->size)
        return CURL_SEEKFUNC_FAIL;
    src->position = offset;
    return CURL_SEEKFUNC_OK;
}

int xferInfoCallback(void* user, curl_off_t dlTotal, curl_off_t dlNow, curl_off_t ulTotal,
                     curl_off_t ulNow) {
    auto* st = static_cast<CallbackState*>(user);
    const ProgressCallback* cb = st->spec->progress;
    if (!cb || !*cb)
        return 0;
    const auto now = Clock::now();
    const bool upload = st->spec->upload != nullptr;
    const bool done =
        upload ? (ulTotal > 0 && ulNow == ulTotal) : (dlTotal > 0 && dlNow == dlTotal);
    if (now - st->lastProgress < kProgressInterval && !done)
        return 0;
    st->lastProgress = now;
    TransferProgress p;
    p.upload = upload;
    const double seconds = std::chrono::duration<double>(now - st->start).count();
    if (upload) {
        p.bytesDone = ulNow;
        p.bytesTotal = ulTotal > 0 ? ulTotal : -1;
        p.bytesPerSecond = seconds > 0 ? static_cast<double>(ulNow) / seconds : 0;
    } else {
        // Only body bytes of a successful answer count; dlNow of an error body is ignored.
        p.bytesDone = st->spec->progressBase + dlNow;
        p.bytesTotal = st->spec->progressTotal >= 0 ? st->spec->progressTotal
                       : dlTotal > 0                ? st->spec->progressBase + dlTotal
                                                    : -1;
        p.bytesPerSecond = seconds > 0 ? static_cast<double>(dlNow) / seconds : 0;
    }
    return (*cb)(p) == ProgressAction::Cancel ? 1 : 0;
}

std::string hostOf(const std::string& url) {
    size_t a = url.find("://");
    a = a == std::string::npos ? 0 : a + 3;
    size_t b = url.find('/', a);
    return url.substr(a, b == std::string::npos ? std::string::npos : b - a);
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

std::optional<std::string> HttpResponse::header(const std::string& nameLowerCase) const {
    auto it = headers.find(nameLowerCase);
    if (it == headers.end())
        return std::nullopt;
    return it->second;
}

std::optional<milliseconds> parseRetryAfter(const std::string& value,
                                            std::chrono::system_clock::time_point now) {
    const std::string v = trim(value);
    if (v.empty())
        return std::nullopt;
    if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        if (v.size() > 9)
            return milliseconds(std::chrono::hours(24 * 365));
        return milliseconds(std::stoll(v) * 1000);
    }
    const time_t at = curl_getdate(v.c_str(), nullptr);
    if (at < 0)
        return std::nullopt;
    const auto when = std::chrono::system_clock::from_time_t(at);
    if (when <= now)
        return milliseconds(0);
    return std::chrono::duration_cast<milliseconds>(when - now);
}

std::optional<ContentRange> parseContentRange(const std::string& value) {
    const std::string v = trim(value);
    if (!startsWithNoCase(v, "bytes "))
        return std::nullopt;
    const std::string rest = trim(v.substr(6));
    const size_t slash = rest.find('/');
    if (slash == std::string::npos)
        return std::nullopt;
    auto number = [](const std::string& s, int64_t& out) {
        if (s.empty() || s.size() > 18 ||
            !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return false;
        out = std::stoll(s);
        return true;
    };
    ContentRange r;
    const std::string range = rest.substr(0, slash), total = rest.substr(slash + 1);
    if (total != "*" && !number(total, r.total))
        return std::nullopt;
    if (range == "*")
        return r;
    const size_t dash = range.find('-');
    if (dash == std::string::npos || !number(range.substr(0, dash), r.first) ||
        !number(range.substr(dash + 1), r.last) || r.last < r.first)
        return std::nullopt;
    return r;
}

// ---- HttpClient::Impl

struct HttpClient::Impl {
    std::mutex mutex;
    std::vector<CURL*> idle;  // easy handles keep their connections between requests
    std::string token;
    int64_t maxSend = 0, maxRecv = 0;
    Rng rng{1};

    ~Impl() {
        for (CURL* h : idle)
            curl_easy_cleanup(h);
    }

    CURL* take() {
        std::lock_guard lock(mutex);
        if (!idle.empty()) {
            CURL* h = idle.back();
            idle.pop_back();
            curl_easy_reset(h);
            return h;
        }
        return curl_easy_init();
    }
    void give(CURL* h) {
        std::lock_guard lock(mutex);
        if (idle.size() < 4)
            idle.push_back(h);
        else
            curl_easy_cleanup(h);
    }
};

HttpResult<std::unique_ptr<HttpClient>> HttpClient::create(HttpClientConfig config) {
    curlGlobalInit();
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
        // One or more "sha256//<base64 of 32 bytes>" separated by ';' (curl's format).
        std::string pins = config.pinnedPublicKey;
        size_t start = 0;
        while (start <= pins.size()) {
            size_t end = pins.find(';', start);
            const std::string pin = trim(
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
        config.sleep = [](milliseconds d) { std::this_thread::sleep_for(d); };
    if (!config.now)
        config.now = [] { return std::chrono::system_clock::now(); };
    auto impl = std::make_unique<Impl>();
    impl->token = config.bearerToken;
    impl->maxSend = config.maxSendBytesPerSecond;
    impl->maxRecv = config.maxRecvBytesPerSecond;
    uint64_t seed = config.jitterSeed;
    if (seed == 0) {
        auto bytes = randomBytes(8);
        std::memcpy(&seed, bytes.data(), 8);
    }
    impl->rng = Rng(seed);
    return std::unique_ptr<HttpClient>(new HttpClient(std::move(config), std::move(impl)));
}

HttpClient::HttpClient(HttpClientConfig config, std::unique_ptr<Impl> impl)
    : m_config(std::move(config)), m_impl(std::move(impl)) {}

HttpClient::~HttpClient() = default;

void HttpClient::setBearerToken(std::string token) {
    std::lock_guard lock(m_impl->mutex);
    m_impl->token = std::move(token);
}

void HttpClient::closeConnections() {
    std::vector<CURL*> handles;
    {
        std::lock_guard lock(m_impl->mutex);
        handles.swap(m_impl->idle);
    }
    for (CURL* h : handles)
        curl_easy_cleanup(h);
}

void HttpClient::setRateLimits(int64_t maxSendBytesPerSecond, int64_t maxRecvBytesPerSecond) {
    std::lock_guard lock(m_impl->mutex);
    m_impl->maxSend = std::max<int64_t>(0, maxSendBytesPerSecond);
    m_impl->maxRecv = std::max<int64_t>(0, maxRecvBytesPerSecond);
}

milliseconds HttpClient::backoffDelay(int retryNumber) {
    return backoffDelay(retryNumber, m_config.retry);
}

milliseconds HttpClient::backoffDelay(int retryNumber, const RetryPolicy& p) {
    double base = static_cast<double>(p.initialBackoff.count());
    for (int i = 1; i < retryNumber && base < static_cast<double>(p.maxBackoff.count()); ++i)
        base *= 2;
    base = std::min(base, static_cast<double>(p.maxBackoff.count()));
    double u = 0;
    {
        std::lock_guard lock(m_impl->mutex);
        u = m_impl->rng.uniform();
    }
    const double jitter = std::clamp(p.jitter, 0.0, 1.0);
    return milliseconds(static_cast<int64_t>(base * (1.0 - jitter * u)));
}

namespace {

// Resolves a request path against the base URL and refuses anything but https://.
HttpResult<std::string> resolveUrl(const std::string& base, const std::string& url) {
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
    return base + url;
}

HttpError httpStatusError(const AttemptSpec& spec, const AttemptOutcome& out,
                          std::chrono::system_clock::time_point now) {
    HttpError e;
    e.kind = HttpErrorKind::HttpStatus;
    e.httpStatus = out.status;
    std::string what;
    if (auto api = ApiError::fromJson(out.body)) {
        e.apiCode = api->code;
        e.apiMessage = api->message;
        what = api->code + ": " + api->message;
    } else {
        std::string snippet = out.body.substr(0, 200);
        for (char& c : snippet)
            if (!std::isprint(static_cast<unsigned char>(c)))
                c = ' ';
        what = snippet.empty() ? "(no body)" : "'" + snippet + "' (not a protocol error body)";
    }
    e.message = "HTTP " + std::to_string(out.status) + " from " + spec.method + " " + spec.url +
                ": " + what;
    auto ra = out.headers.find("retry-after");
    if (ra != out.headers.end())
        e.retryAfter = parseRetryAfter(ra->second, now);
    return e;
}

// Turns libcurl's result into an HttpError with a message that says what happened.
HttpError classify(const AttemptSpec& spec, const AttemptOutcome& out,
                   const HttpClientConfig& cfg) {
    if (out.sinkError)
        return *out.sinkError;
    const std::string host = hostOf(spec.url);
    const std::string detail =
        out.curlMessage.empty() ? curl_easy_strerror(out.code) : out.curlMessage;
    switch (out.code) {
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_URL_MALFORMAT:
            return makeHttpError(HttpErrorKind::InvalidUrl,
                                 "cannot use the URL '" + spec.url + "': " + detail);
        case CURLE_COULDNT_RESOLVE_HOST:
            return makeHttpError(HttpErrorKind::ResolveFailed,
                                 "cannot resolve the host of " + spec.url + ": " + detail);
        case CURLE_COULDNT_RESOLVE_PROXY:
            return makeHttpError(HttpErrorKind::Proxy, "cannot resolve the proxy: " + detail);
        case CURLE_COULDNT_CONNECT:
            if (out.osErrno == ECONNREFUSED)
                return makeHttpError(HttpErrorKind::ConnectionRefused,
                                     "connection to " + host + " refused (nothing listens there" +
                                         std::string(cfg.proxy.empty() || cfg.proxy == "direct"
                                                         ? ""
                                                         : ", or at the proxy") +
                                         "): " + detail);
            return makeHttpError(HttpErrorKind::ConnectionLost,
                                 "cannot connect to " + host + ": " + detail);
        case CURLE_OPERATION_TIMEDOUT:
            if (!out.connected)
                return makeHttpError(HttpErrorKind::Timeout,
                                     "connecting to " + host + " timed out after " +
                                         std::to_string(cfg.connectTimeout.count()) +
                                         " ms: " + detail);
            return makeHttpError(HttpErrorKind::Timeout,
                                 "the transfer with " + host + " stalled: below " +
                                     std::to_string(cfg.lowSpeedBytesPerSecond) + " bytes/s for " +
                                     std::to_string(cfg.lowSpeedSeconds) + " s (" + detail + ")");
        case CURLE_PEER_FAILED_VERIFICATION: {
            const std::string lowerDetail = lower(detail);
            if (lowerDetail.find("subject name") != std::string::npos ||
                lowerDetail.find("host name") != std::string::npos ||
                lowerDetail.find("hostname") != std::string::npos)
                return makeHttpError(HttpErrorKind::TlsHostMismatch,
                                     "TLS: the certificate of " + host +
                                         " is for another host name (" + detail + ")");
            if (out.verifyResult == X509_V_ERR_HOSTNAME_MISMATCH ||
                out.verifyResult == X509_V_ERR_IP_ADDRESS_MISMATCH)
                return makeHttpError(HttpErrorKind::TlsHostMismatch,
                                     "TLS: the certificate of " + host +
                                         " is for another host name (" +
                                         X509_verify_cert_error_string(out.verifyResult) + ")");
            const long v = out.verifyResult;
            const bool unknownIssuer = v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT ||
                                       v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                                       v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
                                       v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                                       v == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE ||
                                       v == X509_V_ERR_CERT_UNTRUSTED;
            if (v != X509_V_OK && !unknownIssuer)  // expired, not yet valid, revoked, ...
                return makeHttpError(HttpErrorKind::Tls,
                                     "TLS: the certificate of " + host +
                                         " is refused: " + X509_verify_cert_error_string(v));
            if (unknownIssuer) {
                const std::string why = X509_verify_cert_error_string(v);
                return makeHttpError(
                    HttpErrorKind::TlsUnknownCa,
                    "TLS: the certificate of " + host + " is not trusted: " + why +
                        (cfg.caFile.empty()
                             ? " (no CA file was given: pass the coordinator's CA "
                               "file or its public-key pin sha256//...)"
                             : " (it does not chain to the CA in " + cfg.caFile.string() + ")"));
            }
            return makeHttpError(HttpErrorKind::Tls,
                                 "TLS: verifying " + host + " failed: " + detail);
        }
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return makeHttpError(HttpErrorKind::TlsPinMismatch,
                                 "TLS: the public key of " + host +
                                     " does not match the pinned key " + cfg.pinnedPublicKey +
                                     " (another server, or the coordinator's certificate changed)");
        case CURLE_SSL_CONNECT_ERROR: {
            // A connection cut during the handshake is a lost connection, not a TLS policy failure.
            const std::string l = lower(detail);
            if (out.osErrno != 0 || l.find("eof") != std::string::npos ||
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
                                                                    " broke during " + spec.method +
                                                                    " " + spec.url + ": " + detail);
        case CURLE_ABORTED_BY_CALLBACK:
            return makeHttpError(HttpErrorKind::Cancelled,
                                 spec.method + " " + spec.url + " was cancelled");
        case CURLE_WRITE_ERROR:
            return makeHttpError(HttpErrorKind::LocalIo,
                                 "writing the answer of " + spec.url + " failed: " + detail);
        case CURLE_READ_ERROR:
            return makeHttpError(HttpErrorKind::LocalIo,
                                 "reading the body to send to " + spec.url + " failed: " + detail);
        case CURLE_PROXY:
            return makeHttpError(HttpErrorKind::Proxy, "the proxy failed: " + detail);
        default:
            if (out.code == CURLE_RECV_ERROR || out.code == CURLE_SEND_ERROR)
                return makeHttpError(HttpErrorKind::ConnectionLost, detail);
            return makeHttpError(HttpErrorKind::Other,
                                 spec.method + " " + spec.url + ": " + detail);
    }
}

}  // namespace

// One request, no retries. The outcome holds libcurl's code and the answer.
static AttemptOutcome performAttempt(HttpClient::Impl& impl, const HttpClientConfig& cfg,
                                     AttemptSpec& spec) {
    AttemptOutcome out;
    CURL* h = impl.take();
    if (!h) {
        out.code = CURLE_OUT_OF_MEMORY;
        return out;
    }
    std::string token;
    int64_t maxSend = 0, maxRecv = 0;
    {
        std::lock_guard lock(impl.mutex);
        token = impl.token;
        maxSend = impl.maxSend;
        maxRecv = impl.maxRecv;
    }
    char errorBuffer[CURL_ERROR_SIZE] = {0};
    CallbackState st;
    st.spec = &spec;
    st.out = &out;
    st.start = st.lastProgress = Clock::now();

    curl_easy_setopt(h, CURLOPT_URL, spec.url.c_str());
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errorBuffer);
    curl_easy_setopt(h, CURLOPT_USERAGENT, cfg.userAgent.c_str());

    // TLS. Always: TLS 1.2 or newer and the host name checked against the certificate's names
    // (VERIFYHOST 2). With a CA file (or neither, the system store): the chain must lead to a
    // trusted CA and be valid now (VERIFYPEER), plus the pin when one is given. With a pin and no
    // CA file: only the chain check is off; the server must hold the private key of the pinned
    // public key (the handshake proves it) and its certificate must name the host. Expiry and
    // issuer are then not checked: the pin is the trust anchor.
    curl_easy_setopt(h, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    const bool pinOnly = cfg.caFile.empty() && !cfg.pinnedPublicKey.empty();
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, pinOnly ? 0L : 1L);
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
    if (maxSend > 0)
        curl_easy_setopt(h, CURLOPT_MAX_SEND_SPEED_LARGE, static_cast<curl_off_t>(maxSend));
    if (maxRecv > 0)
        curl_easy_setopt(h, CURLOPT_MAX_RECV_SPEED_LARGE, static_cast<curl_off_t>(maxRecv));
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);

    curl_slist* headers = nullptr;
    if (!token.empty())
        headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
    bool hasExpect = false;
    for (const auto& [k, v] : spec.headers) {
        headers = curl_slist_append(headers, (k + ": " + v).c_str());
        hasExpect = hasExpect || lower(k) == "expect";
    }
    if (!hasExpect)
        headers = curl_slist_append(headers, "Expect:");

    if (spec.upload) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        if (spec.method != "PUT")
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, spec.method.c_str());
        curl_easy_setopt(h, CURLOPT_READFUNCTION, readCallback);
        curl_easy_setopt(h, CURLOPT_READDATA, spec.upload);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seekCallback);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, spec.upload);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(spec.upload->size));
        curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 5000L);
    } else if (spec.hasPostFields) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(spec.postFields.size()));
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, spec.postFields.data());
        if (spec.method != "POST")
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, spec.method.c_str());
    } else if (spec.method == "GET") {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (spec.method == "HEAD") {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, spec.method.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, headerCallback);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &st);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, writeCallback);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xferInfoCallback);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &st);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);

    out.code = curl_easy_perform(h);
    out.curlMessage = errorBuffer;
    long verify = 0, osErrno = 0, status = 0;
    curl_easy_getinfo(h, CURLINFO_SSL_VERIFYRESULT, &verify);
    curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &osErrno);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_off_t appConnect = 0;
    curl_easy_getinfo(h, CURLINFO_APPCONNECT_TIME_T, &appConnect);
    curl_off_t pre = 0, first = 0, total = 0, sent = 0;
    curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pre);
    curl_easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME_T, &first);
    curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &total);
    curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &sent);
    out.secondsPretransfer = static_cast<double>(pre) * 1e-6;
    out.secondsStartTransfer = static_cast<double>(first) * 1e-6;
    out.secondsTotal = static_cast<double>(total) * 1e-6;
    out.bytesSent = sent;
    out.verifyResult = verify;
    out.osErrno = osErrno;
    out.connected = appConnect > 0;
    if (status != 0)
        out.status = status;
    // Pinning with VERIFYPEER off still reports the chain result; it is not an error then.
    if (pinOnly)
        out.verifyResult = X509_V_OK;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
    curl_slist_free_all(headers);
    impl.give(h);
    return out;
}

namespace {

HttpResponse toResponse(AttemptOutcome&& out, const HttpClientConfig& cfg) {
    HttpResponse resp;
    resp.status = out.status;
    resp.headers = std::move(out.headers);
    resp.body = std::move(out.body);
    if (auto ra = resp.header("retry-after"))
        resp.retryAfter = parseRetryAfter(*ra, cfg.now());
    resp.secondsPretransfer = out.secondsPretransfer;
    resp.secondsStartTransfer = out.secondsStartTransfer;
    resp.secondsTotal = out.secondsTotal;
    resp.bytesUploaded = out.bytesSent;
    resp.bytesDownloaded = out.bytesReceived;
    return resp;
}

// Runs attempts until one succeeds, fails for good, or the policy's attempts are used up.
template <class T, class F>
HttpResult<T> withRetries(const RetryPolicy& policy, HttpClient& client,
                          const HttpClientConfig& cfg, F attempt) {
    for (int n = 1;; ++n) {
        HttpResult<T> r = attempt(n);
        if (r.ok())
            return r;
        HttpError e = r.error();
        e.attempts = n;
        if (!e.transient() || n >= policy.maxAttempts) {
            if (n > 1)
                e.message += " (after " + std::to_string(n) + " attempts)";
            return e;
        }
        milliseconds wait = e.retryAfter ? std::min(*e.retryAfter, policy.maxRetryAfter)
                                         : client.backoffDelay(n, policy);
        cfg.sleep(wait);
    }
}

}  // namespace

HttpResult<HttpResponse> HttpClient::requestJson(const std::string& method, const std::string& url,
                                                 const std::string& jsonBody,
                                                 const HttpHeaders& extraHeaders,
                                                 std::optional<RetryPolicy> retry) {
    auto full = resolveUrl(m_config.baseUrl, url);
    if (!full)
        return full.error();
    const RetryPolicy policy = retry.value_or(m_config.retry);
    return withRetries<HttpResponse>(policy, *this, m_config, [&](int) -> HttpResult<HttpResponse> {
        AttemptSpec spec;
        spec.method = method;
        spec.url = *full;
        spec.headers = extraHeaders;
        spec.headers.emplace("Accept", "application/json");
        if (!jsonBody.empty() || method == "POST" || method == "PUT") {
            spec.headers.emplace("Content-Type", "application/json");
            spec.postFields = jsonBody;
            spec.hasPostFields = true;
        }
        spec.maxMemoryBody = 16 << 20;
        AttemptOutcome out = performAttempt(*m_impl, m_config, spec);
        if (out.code != CURLE_OK)
            return classify(spec, out, m_config);
        if (out.status < 200 || out.status >= 300)
            return httpStatusError(spec, out, m_config.now());
        if (out.bodyTruncated)
            return makeHttpError(HttpErrorKind::BadResponse,
                                 "the answer of " + spec.url + " is larger than 16 MiB");
        return toResponse(std::move(out), m_config);
    });
}

HttpResult<HttpResponse> HttpClient::get(const std::string& url, int64_t maxBytes,
                                         const HttpHeaders& extraHeaders,
                                         const ProgressCallback& progress) {
    auto full = resolveUrl(m_config.baseUrl, url);
    if (!full)
        return full.error();
    AttemptSpec spec;
    spec.method = "GET";
    spec.url = *full;
    spec.headers = extraHeaders;
    spec.maxMemoryBody = maxBytes;
    spec.progress = &progress;
    AttemptOutcome out = performAttempt(*m_impl, m_config, spec);
    if (out.code != CURLE_OK)
        return classify(spec, out, m_config);
    if (out.status < 200 || out.status >= 300)
        return httpStatusError(spec, out, m_config.now());
    if (out.bodyTruncated)
        return makeHttpError(
            HttpErrorKind::BadResponse,
            "the answer of " + spec.url + " is larger than " + std::to_string(maxBytes) + " bytes");
    return toResponse(std::move(out), m_config);
}

namespace {

// SHA-256 and size of a file, read in 1 MiB pieces.
Expected<std::pair<Sha256Digest, int64_t>> hashFile(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return Error{"cannot open " + path.string() + ": " + std::strerror(errno)};
    Sha256 h;
    std::vector<uint8_t> buf(1 << 20);
    int64_t total = 0;
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            return Error{"cannot read " + path.string() + ": " + std::strerror(err)};
        }
        if (n == 0)
            break;
        h.update(std::span(buf.data(), static_cast<size_t>(n)));
        total += n;
    }
    ::close(fd);
    return std::pair{h.finish(), total};
}

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
        auto hashed = hashFile(part);
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
            auto hashed = hashFile(dest);
            if (hashed && hashed->first == request.expectedSha256 &&
                (request.expectedBytes < 0 || hashed->second == request.expectedBytes)) {
                result.bytes = hashed->second;
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

    return withRetries<DownloadResult>(
        m_config.retry, *this, m_config, [&](int n) -> HttpResult<DownloadResult> {
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
                spec.headers.emplace("If-Range", "\"" + expectedHex + "\"");
            }
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
            AttemptOutcome out = performAttempt(*m_impl, m_config, spec);
            if (out.status >= 200 && out.status < 300)
                result.bytesTransferred += out.bytesReceived;
            if (sinkError)
                out.sinkError = sinkError;
            if (rangeComplete && out.code == CURLE_WRITE_ERROR && !sinkError)
                out.code = CURLE_OK;
            if (out.code != CURLE_OK) {
                HttpError e = classify(spec, out, m_config);
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
                return httpStatusError(spec, out, m_config.now());
            if (!decided && out.status == 200 && ::ftruncate(fd, 0) != 0)
                return ioError("cannot truncate " + part.string());  // a 200 with an empty body
            if (auto v = verifyPart(); !v)
                return v.error();
            return result;
        });
}

HttpResult<HttpResponse> HttpClient::upload(const std::string& method, const std::string& url,
                                            const UploadBody& body, const std::string& contentType,
                                            const HttpHeaders& extraHeaders,
                                            const ProgressCallback& progress,
                                            std::optional<RetryPolicy> retry) {
    auto full = resolveUrl(m_config.baseUrl, url);
    if (!full)
        return full.error();
    BodySource source;
    int fd = -1;
    if (const auto* bytes = std::get_if<std::span<const uint8_t>>(&body.source)) {
        source.data = bytes->data();
        source.size = static_cast<int64_t>(bytes->size());
    } else {
        const auto& path = std::get<std::filesystem::path>(body.source);
        fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return makeHttpError(
                HttpErrorKind::LocalIo,
                "cannot open " + path.string() + " to upload it: " + std::strerror(errno));
        source.fd = fd;
        source.size = fileSize(path);
    }
    struct FdCloser {
        int fd;
        ~FdCloser() {
            if (fd >= 0)
                ::close(fd);
        }
    } closer{fd};
    const RetryPolicy policy = retry.value_or(m_config.retry);
    int64_t totalSent = 0;
    return withRetries<HttpResponse>(policy, *this, m_config, [&](int) -> HttpResult<HttpResponse> {
        source.position = 0;
        AttemptSpec spec;
        spec.method = method;
        spec.url = *full;
        spec.headers = extraHeaders;
        spec.headers.emplace("Content-Type", contentType);
        spec.headers.emplace("Expect", "100-continue");
        spec.upload = &source;
        spec.progress = &progress;
        spec.maxMemoryBody = 1 << 20;
        AttemptOutcome out = performAttempt(*m_impl, m_config, spec);
        totalSent += out.bytesSent;
        HttpError e;
        if (out.code != CURLE_OK)
            e = classify(spec, out, m_config);
        else if (out.status < 200 || out.status >= 300)
            e = httpStatusError(spec, out, m_config.now());
        else {
            HttpResponse resp = toResponse(std::move(out), m_config);
            resp.bytesUploaded = totalSent;
            return resp;
        }
        e.bytesTransferred = totalSent;
        return e;
    });
}

}  // namespace tandem::net
