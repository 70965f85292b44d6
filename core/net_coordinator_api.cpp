#include "net_coordinator_api.hpp"

namespace tandem::core {

namespace {

net::ProgressCallback adapt(const TransferProgressFn& progress) {
    if (!progress)
        return {};
    return [progress](const net::TransferProgress& p) {
        return progress(p.bytesDone, p.bytesTotal, p.bytesPerSecond) ? net::ProgressAction::Continue
                                                                     : net::ProgressAction::Cancel;
    };
}

}  // namespace

ApiFailure toApiFailure(const net::HttpError& e) {
    ApiFailure f;
    f.message = e.message;
    f.code = e.apiCode;
    f.httpStatus = e.httpStatus;
    if (e.retryAfter)
        f.retryAfterMs = e.retryAfter->count();
    switch (e.kind) {
        case net::HttpErrorKind::TlsPinMismatch:
            f.problem = Problem::WrongPin;
            break;
        case net::HttpErrorKind::TlsUnknownCa:
        case net::HttpErrorKind::TlsHostMismatch:
        case net::HttpErrorKind::Tls:
            f.problem = Problem::Certificate;
            break;
        case net::HttpErrorKind::ConnectionRefused:
        case net::HttpErrorKind::ResolveFailed:
        case net::HttpErrorKind::Timeout:
        case net::HttpErrorKind::ConnectionLost:
        case net::HttpErrorKind::Proxy:
            f.problem = Problem::Unreachable;
            break;
        default:
            f.problem = problemFromFailure(e.httpStatus, e.message);
    }
    switch (e.kind) {
        case net::HttpErrorKind::HttpStatus:
            f.transient = e.transient() || e.apiCode == "upload_in_progress" ||
                          e.apiCode == "too_many_uploads" || e.apiCode == "too_many_work_units" ||
                          e.apiCode == "busy";
            break;
        case net::HttpErrorKind::BadSignature:
            f.transient = false;
            break;
        default:
            // Transport, TLS, local files, odd answers: nothing was refused; try again later.
            f.transient = true;
    }
    return f;
}

ApiResult<net::RegisterResponse> NetCoordinatorApi::registerClient(
    const net::RegisterRequest& request) {
    auto r = m_client->registerClient(request);
    if (!r)
        return toApiFailure(r.error());
    return std::move(r).value();
}

ApiResult<WorkOffer> NetCoordinatorApi::requestWork(const net::WorkRequest& request,
                                                    const std::string& requestId) {
    auto r = m_client->requestWork(request, requestId);
    if (!r)
        return toApiFailure(r.error());
    WorkOffer offer;
    offer.manifest = r->manifest;
    offer.manifestJson = r->manifestJson;
    offer.retryAfterMs = r->retryAfter.count();
    return offer;
}

ApiResult<std::vector<net::HeldWorkUnit>> NetCoordinatorApi::listWork() {
    auto r = m_client->listWork();
    if (!r)
        return toApiFailure(r.error());
    return std::move(r->units);
}

ApiResult<net::DonorProfile> NetCoordinatorApi::updateProfile(const net::DonorProfile& profile) {
    auto r = m_client->updateProfile(profile);
    if (!r)
        return toApiFailure(r.error());
    return std::move(r.value());
}

ApiResult<void> NetCoordinatorApi::releaseWork(int64_t workUnitId) {
    auto r = m_client->releaseWork(workUnitId);
    if (!r)
        return toApiFailure(r.error());
    return {};
}

ApiResult<DownloadOutcome> NetCoordinatorApi::downloadWeights(const net::Manifest& manifest,
                                                              const std::filesystem::path& dest,
                                                              const TransferProgressFn& progress) {
    auto r = m_client->downloadWeights(manifest, dest, adapt(progress));
    if (!r)
        return toApiFailure(r.error());
    return DownloadOutcome{r->bytesTransferred};
}

ApiResult<DownloadOutcome> NetCoordinatorApi::downloadWeightDelta(
    const net::Manifest& manifest, const net::WeightDeltaRef& delta,
    const std::filesystem::path& dest, const TransferProgressFn& progress) {
    auto r = m_client->downloadWeightDelta(manifest, delta, dest, adapt(progress));
    if (!r)
        return toApiFailure(r.error());
    return DownloadOutcome{r->bytesTransferred};
}

ApiResult<DownloadOutcome> NetCoordinatorApi::downloadData(const net::Manifest& manifest,
                                                           const std::filesystem::path& dest,
                                                           const TransferProgressFn& progress) {
    auto r = m_client->downloadData(manifest, dest, adapt(progress));
    if (!r)
        return toApiFailure(r.error());
    return DownloadOutcome{r->bytesTransferred};
}

ApiResult<net::ProgressReply> NetCoordinatorApi::reportProgress(int64_t workUnitId,
                                                                const net::ProgressReport& report) {
    auto r = m_client->reportProgress(workUnitId, report);
    if (!r)
        return toApiFailure(r.error());
    return std::move(r).value();
}

ApiResult<UploadOutcome> NetCoordinatorApi::uploadResult(const std::string& uploadUrl,
                                                         const std::filesystem::path& resultFile,
                                                         const net::Signature& signature,
                                                         const TransferProgressFn& progress) {
    auto r = m_client->uploadResult(uploadUrl, resultFile, signature, adapt(progress));
    if (!r)
        return toApiFailure(r.error());
    UploadOutcome out;
    out.receipt = r->receipt;
    out.receiptJson = r->receiptJson;
    out.bytesSent = r->bytesSent;
    return out;
}

ApiResult<UploadOutcome> NetCoordinatorApi::uploadPiece(const std::string& uploadUrl,
                                                        const std::filesystem::path& pieceFile,
                                                        int shard, const net::Signature& signature,
                                                        const TransferProgressFn& progress) {
    auto r = m_client->uploadPiece(uploadUrl, pieceFile, shard, signature, adapt(progress));
    if (!r)
        return toApiFailure(r.error());
    UploadOutcome out;
    out.receipt = r->receipt;
    out.receiptJson = r->receiptJson;
    out.bytesSent = r->bytesSent;
    return out;
}

}  // namespace tandem::core
