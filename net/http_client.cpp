// HttpClient: creation from a checked configuration, the shared settings (token, rate limits,
// jitter), JSON requests, small GETs and uploads. Downloads are in http_download.cpp; one attempt
// over libcurl in http_transport.cpp.
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

std::optional<std::string> HttpResponse::header(const std::string& nameLowerCase) const {
    auto it = headers.find(nameLowerCase);
    if (it == headers.end())
        return std::nullopt;
    return it->second;
}

HttpResult<std::unique_ptr<HttpClient>> HttpClient::create(HttpClientConfig config) {
    curlGlobalInit();
    auto checked = checkHttpClientConfig(std::move(config));
    if (!checked)
        return checked.error();
    config = std::move(checked).value();
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
    m_impl->closeIdle();
}

void HttpClient::setRateLimits(int64_t maxSendBytesPerSecond, int64_t maxRecvBytesPerSecond) {
    std::lock_guard lock(m_impl->mutex);
    m_impl->maxSend = std::max<int64_t>(0, maxSendBytesPerSecond);
    m_impl->maxRecv = std::max<int64_t>(0, maxRecvBytesPerSecond);
}

milliseconds HttpClient::backoffDelay(int retryNumber) {
    return backoffDelay(retryNumber, m_config.retry);
}

milliseconds HttpClient::backoffDelay(int retryNumber, const RetryPolicy& policy) {
    double u = 0;
    {
        std::lock_guard lock(m_impl->mutex);
        u = m_impl->rng.uniform();
    }
    return retryBackoff(retryNumber, policy, u);
}

HttpResult<HttpResponse> HttpClient::requestJson(const std::string& method, const std::string& url,
                                                 const std::string& jsonBody,
                                                 const HttpHeaders& extraHeaders,
                                                 std::optional<RetryPolicy> retry) {
    auto full = resolveUrl(m_config.baseUrl, url);
    if (!full)
        return full.error();
    const RetryPolicy policy = retry.value_or(m_config.retry);
    return withRetries<HttpResponse>(policy, *this, [&](int) -> HttpResult<HttpResponse> {
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
        if (!out.ok())
            return failureOf(spec, out, m_config);
        if (out.status < 200 || out.status >= 300)
            return statusErrorOf(spec, out, m_config);
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
    if (!out.ok())
        return failureOf(spec, out, m_config);
    if (out.status < 200 || out.status >= 300)
        return statusErrorOf(spec, out, m_config);
    if (out.bodyTruncated)
        return makeHttpError(
            HttpErrorKind::BadResponse,
            "the answer of " + spec.url + " is larger than " + std::to_string(maxBytes) + " bytes");
    return toResponse(std::move(out), m_config);
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
        struct stat st {};
        source.size = ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
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
    return withRetries<HttpResponse>(policy, *this, [&](int) -> HttpResult<HttpResponse> {
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
        if (!out.ok())
            e = failureOf(spec, out, m_config);
        else if (out.status < 200 || out.status >= 300)
            e = statusErrorOf(spec, out, m_config);
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
