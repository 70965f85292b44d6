#include "coordinator_client.hpp"

#include "result_format.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace tandem::net {

namespace {

HttpError protocolError(HttpErrorKind kind, std::string message) {
    HttpError e;
    e.kind = kind;
    e.message = std::move(message);
    return e;
}

}  // namespace

HttpResult<std::unique_ptr<CoordinatorClient>> CoordinatorClient::create(
    HttpClientConfig config, std::optional<PublicKey> coordinatorKey) {
    auto http = HttpClient::create(std::move(config));
    if (!http)
        return http.error();
    std::unique_ptr<CoordinatorClient> c(new CoordinatorClient(std::move(http.value())));
    c->m_coordinatorKey = coordinatorKey;
    return c;
}

void CoordinatorClient::setToken(const std::string& token) {
    m_http->setBearerToken(token);
}

void CoordinatorClient::setCoordinatorKey(const PublicKey& key) {
    std::lock_guard lock(m_mutex);
    m_coordinatorKey = key;
}

std::optional<PublicKey> CoordinatorClient::coordinatorKey() const {
    std::lock_guard lock(m_mutex);
    return m_coordinatorKey;
}

void CoordinatorClient::setRegistrationSecret(const std::string& secret) {
    std::lock_guard lock(m_mutex);
    m_registrationSecret = secret;
}

HttpResult<RegisterResponse> CoordinatorClient::registerClient(const RegisterRequest& request) {
    HttpHeaders headers;
    {
        std::lock_guard lock(m_mutex);
        if (!m_registrationSecret.empty())
            headers.emplace("X-Tandem-Registration-Secret", m_registrationSecret);
    }
    auto res =
        m_http->requestJson("POST", "/v1/clients", request.toJson(), headers, RetryPolicy::none());
    if (!res)
        return res.error();
    auto parsed = RegisterResponse::fromJson(res->body);
    if (!parsed)
        return protocolError(HttpErrorKind::BadResponse,
                             "the registration answer is not valid: " + parsed.error().message);
    {
        std::lock_guard lock(m_mutex);
        if (m_coordinatorKey && *m_coordinatorKey != parsed->coordinatorPublicKey)
            return protocolError(HttpErrorKind::BadSignature,
                                 "the coordinator answered registration with the key " +
                                     toBase64(parsed->coordinatorPublicKey) +
                                     ", but the pinned coordinator key is " +
                                     toBase64(*m_coordinatorKey));
        m_coordinatorKey = parsed->coordinatorPublicKey;
    }
    m_http->setBearerToken(parsed->token);
    return parsed.value();
}

HttpResult<WorkOffer> CoordinatorClient::requestWork(const WorkRequest& request,
                                                     const std::string& requestId) {
    const auto key = coordinatorKey();
    if (!key)
        return protocolError(HttpErrorKind::BadSignature,
                             "no coordinator key is pinned (register first), so a manifest "
                             "could not be verified");
    HttpHeaders headers;
    if (!requestId.empty())
        headers.emplace(kRequestIdHeader, requestId);
    auto res =
        m_http->requestJson("POST", "/v1/work", request.toJson(), headers, RetryPolicy::none());
    if (!res)
        return res.error();
    WorkOffer offer;
    if (res->status == 204) {
        offer.retryAfter = res->retryAfter.value_or(std::chrono::seconds(30));
        return offer;
    }
    auto manifest = Manifest::fromJson(res->body);
    if (!manifest)
        return protocolError(
            HttpErrorKind::BadResponse,
            "the work answer is not a valid manifest: " + manifest.error().message);
    if (!manifest->verify(*key))
        return protocolError(HttpErrorKind::BadSignature,
                             "the manifest of work unit " + std::to_string(manifest->workUnitId) +
                                 " is not signed by the pinned coordinator key " + toBase64(*key) +
                                 "; it was refused");
    offer.manifest = std::move(manifest.value());
    offer.manifestJson = std::move(res->body);
    return offer;
}

HttpResult<HeldWorkUnits> CoordinatorClient::listWork() {
    auto res = m_http->requestJson("GET", "/v1/work");
    if (!res)
        return res.error();
    auto list = HeldWorkUnits::fromJson(res->body);
    if (!list)
        return protocolError(HttpErrorKind::BadResponse, list.error().message);
    return list.value();
}

HttpResult<void> CoordinatorClient::releaseWork(int64_t workUnitId) {
    // Not retried here: a repeat after a lost answer is refused (409), which the caller treats
    // as released.
    auto res = m_http->requestJson("DELETE", "/v1/work/" + std::to_string(workUnitId), {}, {},
                                   RetryPolicy::none());
    if (!res)
        return res.error();
    return {};
}

namespace {

// The server of the manifest's upload URL when it is an absolute https:// URL (a front end's
// manifest: docs/protocol.md, "Upload a result"); empty for a path on the coordinator.
std::string coordinatorOriginOf(const Manifest& manifest) {
    if (manifest.uploadUrl.rfind("https://", 0) != 0)
        return {};
    return DownloadSources::serverOf(manifest.uploadUrl);
}

// The servers trusted as the coordinator besides its own address: the upload URL's, and in a
// version 6 manifest of a sharded run every shard's (docs/protocol.md, "Sharded runs").
std::vector<std::string> trustedOriginsOf(const Manifest& manifest) {
    std::vector<std::string> out;
    if (auto origin = coordinatorOriginOf(manifest); !origin.empty())
        out.push_back(std::move(origin));
    for (const ShardUpload& s : manifest.shards) {
        auto origin = DownloadSources::serverOf(s.uploadUrl);
        if (!origin.empty() && std::find(out.begin(), out.end(), origin) == out.end())
            out.push_back(std::move(origin));
    }
    return out;
}

}  // namespace

HttpResult<DownloadResult> CoordinatorClient::downloadWeights(
    const Manifest& manifest, const std::filesystem::path& destination,
    const ProgressCallback& progress) {
    DownloadRequest req;
    req.url = manifest.weightsUrl;
    req.destination = destination;
    req.expectedSha256 = manifest.weightsSha256;
    req.expectedBytes = manifest.weightsBytes > 0 ? manifest.weightsBytes : -1;
    req.progress = progress;
    req.coordinatorOrigin = coordinatorOriginOf(manifest);
    if (!manifest.weightsUrls.empty())
        return downloadBlob(manifest.weightsUrls, std::move(req), trustedOriginsOf(manifest));
    return m_http->download(req);
}

HttpResult<DownloadResult> CoordinatorClient::downloadData(const Manifest& manifest,
                                                           const std::filesystem::path& destination,
                                                           const ProgressCallback& progress) {
    DownloadRequest req;
    req.url = manifest.dataUrl;
    req.destination = destination;
    req.expectedSha256 = manifest.dataSha256;
    req.expectedBytes = manifest.dataByteLength();
    req.rangeStart = manifest.dataByteOffset();
    req.progress = progress;
    req.coordinatorOrigin = coordinatorOriginOf(manifest);
    if (!manifest.dataUrls.empty())
        return downloadBlob(manifest.dataUrls, std::move(req), trustedOriginsOf(manifest));
    return m_http->download(req);
}

HttpResult<DownloadResult> CoordinatorClient::downloadWeightDelta(
    const Manifest& manifest, const WeightDeltaRef& delta, const std::filesystem::path& destination,
    const ProgressCallback& progress) {
    DownloadRequest req;
    req.coordinatorOrigin = coordinatorOriginOf(manifest);
    req.destination = destination;
    req.expectedSha256 = delta.sha256;
    req.expectedBytes = delta.bytes;
    req.progress = progress;
    return downloadBlob(delta.urls, std::move(req), trustedOriginsOf(manifest));
}

HttpResult<DownloadResult> CoordinatorClient::downloadBlob(
    const std::vector<std::string>& urls, DownloadRequest request,
    const std::vector<std::string>& trustedOrigins) {
    const std::vector<std::string> order = m_sources.order(urls);
    request.blob = true;
    const std::string defaultOrigin = request.coordinatorOrigin;
    int64_t earlierBytes = 0;  // moved by URLs that failed
    int attempts = 0;
    std::string failures;
    for (size_t i = 0; i < order.size(); ++i) {
        request.url = order[i];
        // A blob on a server the signed manifest names for uploads (a shard's) is the
        // coordinator's own.
        const std::string server = DownloadSources::serverOf(order[i]);
        request.coordinatorOrigin =
            std::find(trustedOrigins.begin(), trustedOrigins.end(), server) != trustedOrigins.end()
                ? server
                : defaultOrigin;
        request.retry.reset();
        if (i + 1 < order.size()) {
            RetryPolicy fewer = m_http->config().retry;
            fewer.maxAttempts = std::min(fewer.maxAttempts, 2);
            request.retry = fewer;
        }
        const auto start = std::chrono::steady_clock::now();
        auto r = m_http->download(request);
        if (r) {
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            m_sources.recordSuccess(order[i], r->bytesTransferred, seconds);
            r->url = order[i];
            r->bytesTransferred += earlierBytes;
            r->attempts += attempts;
            return r;
        }
        HttpError e = r.error();
        earlierBytes += e.bytesTransferred;
        attempts += e.attempts;
        // Our own disk or the caller's cancel: another URL would not help.
        if (e.kind == HttpErrorKind::LocalIo || e.kind == HttpErrorKind::Cancelled) {
            e.bytesTransferred = earlierBytes;
            return e;
        }
        m_sources.recordFailure(order[i]);
        failures += (failures.empty() ? "" : "; ") + order[i] + ": " + e.message;
        if (i + 1 == order.size()) {
            e.message = "no URL of the manifest gave the file (" + std::to_string(order.size()) +
                        " tried): " + failures;
            e.bytesTransferred = earlierBytes;
            e.attempts = attempts;
            return e;
        }
    }
    return protocolError(HttpErrorKind::BadResponse, "the manifest lists no URL for the file");
}

HttpResult<ProgressReply> CoordinatorClient::reportProgress(int64_t workUnitId,
                                                            const ProgressReport& report) {
    auto res = m_http->requestJson("POST", "/v1/work/" + std::to_string(workUnitId) + "/progress",
                                   report.toJson(), {}, RetryPolicy::none());
    if (!res)
        return res.error();
    auto reply = ProgressReply::fromJson(res->body);
    if (!reply)
        return protocolError(HttpErrorKind::BadResponse,
                             "the progress answer is not valid: " + reply.error().message);
    return reply.value();
}

HttpResult<UploadReceipt> CoordinatorClient::uploadResult(const std::string& uploadUrl,
                                                          const std::filesystem::path& resultFile,
                                                          const Signature& signature,
                                                          const ProgressCallback& progress) {
    return upload(uploadUrl, resultFile, std::nullopt, signature, progress);
}

HttpResult<UploadReceipt> CoordinatorClient::uploadPiece(const std::string& uploadUrl,
                                                         const std::filesystem::path& pieceFile,
                                                         int shard, const Signature& signature,
                                                         const ProgressCallback& progress) {
    return upload(uploadUrl, pieceFile, shard, signature, progress);
}

HttpResult<UploadReceipt> CoordinatorClient::upload(const std::string& uploadUrl,
                                                    const std::filesystem::path& resultFile,
                                                    std::optional<int> expectedShard,
                                                    const Signature& signature,
                                                    const ProgressCallback& progress) {
    const auto key = coordinatorKey();
    if (!key)
        return protocolError(HttpErrorKind::BadSignature,
                             "no coordinator key is pinned (register first), so a receipt "
                             "could not be verified");
    // The header names the work unit and gives the digest the receipt must carry.
    std::array<uint8_t, kResultHeaderBytes> headerBytes{};
    {
        FILE* f = std::fopen(resultFile.c_str(), "rb");
        const size_t got = f ? std::fread(headerBytes.data(), 1, headerBytes.size(), f) : 0;
        if (f)
            std::fclose(f);
        if (got != headerBytes.size())
            return protocolError(
                HttpErrorKind::LocalIo,
                "cannot read the 128-byte result header of " + resultFile.string());
    }
    auto header = parseResultHeader(headerBytes);
    if (!header)
        return protocolError(
            HttpErrorKind::LocalIo,
            "the result file " + resultFile.string() + " is not valid: " + header.error().message);
    const Sha256Digest digest = sha256(std::span<const uint8_t>(headerBytes));
    auto res = m_http->upload("PUT", uploadUrl, UploadBody{resultFile}, "application/octet-stream",
                              {{"X-Tandem-Signature", toBase64(signature)}}, progress);
    if (!res)
        return res.error();
    auto receipt = Receipt::fromJson(res->body);
    if (!receipt)
        return protocolError(
            HttpErrorKind::BadResponse,
            "the upload answer is not a valid receipt: " + receipt.error().message);
    if (!receipt->verify(*key))
        return protocolError(HttpErrorKind::BadSignature,
                             "the receipt for work unit " + std::to_string(header->workUnitId) +
                                 " is not signed by the pinned coordinator key");
    if (receipt->workUnitId != header->workUnitId || receipt->resultDigest != digest)
        return protocolError(HttpErrorKind::BadResponse,
                             "the receipt is for work unit " + std::to_string(receipt->workUnitId) +
                                 " and digest " + toHex(receipt->resultDigest) +
                                 ", expected work unit " + std::to_string(header->workUnitId) +
                                 " and digest " + toHex(digest));
    if (expectedShard && receipt->shard != expectedShard)
        return protocolError(HttpErrorKind::BadResponse,
                             "the receipt for work unit " + std::to_string(header->workUnitId) +
                                 " is for " +
                                 (receipt->shard ? "piece " + std::to_string(*receipt->shard)
                                                 : std::string("no piece")) +
                                 ", expected piece " + std::to_string(*expectedShard));
    UploadReceipt out;
    out.receipt = std::move(receipt.value());
    out.receiptJson = std::move(res->body);
    out.bytesSent = res->bytesUploaded;
    return out;
}

HttpResult<DonorProfile> CoordinatorClient::updateProfile(const DonorProfile& profile) {
    auto res =
        m_http->requestJson("PUT", "/v1/clients/self", profile.toJson(), {}, RetryPolicy::none());
    if (!res)
        return res.error();
    auto stored = DonorProfile::fromJson(res->body);
    if (!stored)
        return protocolError(HttpErrorKind::BadResponse,
                             "the profile answer is not valid: " + stored.error().message);
    return stored.value();
}

HttpResult<Leaderboard> CoordinatorClient::leaderboard(int64_t runId) {
    auto res = m_http->requestJson("GET", "/v1/runs/" + std::to_string(runId) + "/leaderboard");
    if (!res)
        return res.error();
    auto board = Leaderboard::fromJson(res->body);
    if (!board)
        return protocolError(HttpErrorKind::BadResponse,
                             "the leaderboard is not valid: " + board.error().message);
    return board.value();
}

HttpResult<RunStatus> CoordinatorClient::status() {
    auto res = m_http->requestJson("GET", "/v1/status");
    if (!res)
        return res.error();
    auto st = RunStatus::fromJson(res->body);
    if (!st)
        return protocolError(HttpErrorKind::BadResponse,
                             "the status answer is not valid: " + st.error().message);
    return st.value();
}

}  // namespace tandem::net
