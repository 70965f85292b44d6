#include "http_transport.hpp"
#include "text.hpp"

#include <curl/curl.h>
#include <openssl/x509_vfy.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace tandem::net {

void curlGlobalInit() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpClient::Impl::~Impl() {
    for (CURL* h : idle)
        curl_easy_cleanup(h);
}

CURL* HttpClient::Impl::take() {
    std::lock_guard lock(mutex);
    if (!idle.empty()) {
        CURL* h = idle.back();
        idle.pop_back();
        curl_easy_reset(h);
        return h;
    }
    return curl_easy_init();
}

void HttpClient::Impl::give(CURL* h) {
    std::lock_guard lock(mutex);
    if (idle.size() < 4)
        idle.push_back(h);
    else
        curl_easy_cleanup(h);
}

void HttpClient::Impl::closeIdle() {
    std::vector<CURL*> handles;
    {
        std::lock_guard lock(mutex);
        handles.swap(idle);
    }
    for (CURL* h : handles)
        curl_easy_cleanup(h);
}

namespace transport {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kProgressInterval = std::chrono::milliseconds(100);

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
        st->out->headers.emplace(asciiLower(trimWhitespace(line.substr(0, colon))),
                                 trimWhitespace(line.substr(colon + 1)));
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

// The request line, body and headers of the attempt; returns the header list to free.
curl_slist* applyRequest(CURL* h, AttemptSpec& spec, const std::string& token) {
    curl_slist* headers = nullptr;
    if (!token.empty())
        headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
    bool hasExpect = false;
    for (const auto& [k, v] : spec.headers) {
        headers = curl_slist_append(headers, (k + ": " + v).c_str());
        hasExpect = hasExpect || asciiLower(k) == "expect";
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
    return headers;
}

// What libcurl says about the finished transfer: status, TLS result, errno, timings.
void readInfo(CURL* h, AttemptOutcome& out) {
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
}

}  // namespace

bool AttemptOutcome::writeAborted() const {
    return curlCode == CURLE_WRITE_ERROR;
}

AttemptOutcome performAttempt(HttpClient::Impl& impl, const HttpClientConfig& cfg,
                              AttemptSpec& spec) {
    AttemptOutcome out;
    CURL* h = impl.take();
    if (!h) {
        out.curlCode = CURLE_OUT_OF_MEMORY;
        return out;
    }
    std::string token;
    int64_t maxSend = 0, maxRecv = 0;
    {
        std::lock_guard lock(impl.mutex);
        if (spec.sendToken)
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
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errorBuffer);
    applyConnectionOptions(h, cfg);
    if (maxSend > 0)
        curl_easy_setopt(h, CURLOPT_MAX_SEND_SPEED_LARGE, static_cast<curl_off_t>(maxSend));
    if (maxRecv > 0)
        curl_easy_setopt(h, CURLOPT_MAX_RECV_SPEED_LARGE, static_cast<curl_off_t>(maxRecv));
    curl_slist* headers = applyRequest(h, spec, token);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, headerCallback);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &st);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, writeCallback);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xferInfoCallback);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &st);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);

    out.curlCode = curl_easy_perform(h);
    out.curlMessage = errorBuffer;
    readInfo(h, out);
    // Pinning with VERIFYPEER off still reports the chain result; it is not an error then.
    if (pinIsTrustAnchor(cfg))
        out.verifyResult = X509_V_OK;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
    curl_slist_free_all(headers);
    impl.give(h);
    return out;
}

HttpError failureOf(const AttemptSpec& spec, const AttemptOutcome& out,
                    const HttpClientConfig& cfg) {
    if (out.sinkError)
        return *out.sinkError;
    CurlFailure f;
    f.curlCode = out.curlCode;
    f.curlMessage = out.curlMessage;
    f.verifyResult = out.verifyResult;
    f.osErrno = out.osErrno;
    f.connected = out.connected;
    f.method = spec.method;
    f.url = spec.url;
    f.caFile = cfg.caFile;
    f.pinnedPublicKey = cfg.pinnedPublicKey;
    f.proxy = cfg.proxy;
    f.mirror = spec.mirror;
    f.connectTimeout = cfg.connectTimeout;
    f.lowSpeedBytesPerSecond = cfg.lowSpeedBytesPerSecond;
    f.lowSpeedSeconds = cfg.lowSpeedSeconds;
    return httpErrorFromCurl(f);
}

HttpError statusErrorOf(const AttemptSpec& spec, const AttemptOutcome& out,
                        const HttpClientConfig& cfg) {
    return httpErrorFromStatus(spec.method, spec.url, out.status, out.body, out.headers, cfg.now());
}

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

}  // namespace transport
}  // namespace tandem::net
