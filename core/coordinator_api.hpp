// What the engine needs from a coordinator, as an interface: the real implementation adapts
// net/coordinator_client (HTTPS on libcurl), tests pass a fake. Calls may come from two threads at
// once (the engine's training thread and its upload thread), so implementations must allow that.
#pragma once

#include "crypto.hpp"
#include "donor_profile.hpp"
#include "expected.hpp"
#include "held_work.hpp"
#include "problem.hpp"
#include "protocol.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::core {

// A failed call, with what the engine needs to decide what to do next.
struct ApiFailure {
    std::string message;    // for people: what was found and what was expected
    bool transient = true;  // worth trying again later (network, 5xx, 429); false: refused for good
    std::optional<int64_t> retryAfterMs;  // the server's Retry-After
    std::string code;              // the server's error.code ("stale", "unauthorized"), if any
    long httpStatus = 0;           // 0 when no HTTP answer arrived
    int64_t bytesTransferred = 0;  // moved over the link before it failed (counts for the caps)
    // What kind of trouble, where the transport knows (TLS, connection); Other: judge it from
    // httpStatus and message (problemFromFailure).
    Problem problem = Problem::Other;
};

inline ApiFailure apiFailure(std::string message, bool transient,
                             std::optional<int64_t> retryAfterMs = std::nullopt,
                             std::string code = {}, long httpStatus = 0) {
    ApiFailure f;
    f.message = std::move(message);
    f.transient = transient;
    f.retryAfterMs = retryAfterMs;
    f.code = std::move(code);
    f.httpStatus = httpStatus;
    return f;
}

// A value, or the failure of a call.
template <class T>
using ApiResult = Expected<T, ApiFailure>;

// Progress of a transfer: bytes so far (including bytes resumed from disk), total (-1 unknown),
// average rate. Return false to cancel (a cancelled download keeps its partial file).
using TransferProgressFn =
    std::function<bool(int64_t bytesDone, int64_t bytesTotal, double bytesPerSecond)>;

struct WorkOffer {
    std::optional<net::Manifest> manifest;  // none: no work now
    std::string manifestJson;               // the manifest exactly as received
    int64_t retryAfterMs = 0;               // without a manifest: when to ask again
};

struct DownloadOutcome {
    int64_t bytesTransferred = 0;  // over the network (0 when the file was already there)
};

struct UploadOutcome {
    net::Receipt receipt;
    std::string receiptJson;  // the receipt exactly as received (stored in the ledger)
    int64_t bytesSent = 0;    // over all attempts
};

class CoordinatorApi {
  public:
    virtual ~CoordinatorApi() = default;

    virtual ApiResult<net::RegisterResponse> registerClient(
        const net::RegisterRequest& request) = 0;
    // The bearer token for every later call.
    virtual void setToken(const std::string& token) = 0;
    // The coordinator key pinned at an earlier registration (loaded from the data directory).
    virtual void setCoordinatorKey(const net::PublicKey& /*key*/) {}
    // requestId: the idempotency key (net::kRequestIdHeader), stored before the call
    // (work_request.json); empty: none.
    virtual ApiResult<WorkOffer> requestWork(const net::WorkRequest& request,
                                             const std::string& requestId) = 0;
    // The units the coordinator counts as this client's (GET /v1/work).
    virtual ApiResult<std::vector<net::HeldWorkUnit>> listWork() = 0;
    // Gives a held unit back to the pool (DELETE /v1/work/{id}); 409 when it is not assigned
    // any more, 404 when the coordinator does not know it.
    virtual ApiResult<void> releaseWork(int64_t workUnitId) = 0;
    // The weights of the manifest's base version into destination, checked against
    // weightsSha256 before destination appears.
    virtual ApiResult<DownloadOutcome> downloadWeights(const net::Manifest& manifest,
                                                       const std::filesystem::path& destination,
                                                       const TransferProgressFn& progress) = 0;
    // A version 5 manifest's weight delta (kernels/weight_delta_file.hpp) into destination,
    // from its URLs in the order and with the fallback of downloadWeights.
    virtual ApiResult<DownloadOutcome> downloadWeightDelta(const net::Manifest& manifest,
                                                           const net::WeightDeltaRef& delta,
                                                           const std::filesystem::path& destination,
                                                           const TransferProgressFn& progress) = 0;
    // The bytes of tokens [dataOffset, dataOffset + dataLength) of the manifest's shard
    // (Manifest::dataByteOffset/dataByteLength), checked against dataSha256.
    virtual ApiResult<DownloadOutcome> downloadData(const net::Manifest& manifest,
                                                    const std::filesystem::path& destination,
                                                    const TransferProgressFn& progress) = 0;
    virtual ApiResult<net::ProgressReply> reportProgress(int64_t workUnitId,
                                                         const net::ProgressReport& report) = 0;
    // PUT of the result file to uploadUrl with the signature of its digest. Idempotent on the
    // coordinator: sending the same file again returns the same receipt.
    virtual ApiResult<UploadOutcome> uploadResult(const std::string& uploadUrl,
                                                  const std::filesystem::path& resultFile,
                                                  const net::Signature& signature,
                                                  const TransferProgressFn& progress) = 0;
    // Protocol v6: PUT of piece `shard` of a pieced result (pieceFile: its body, the header,
    // the piece table and the piece's payload) to that shard's upload URL, with the signature of
    // the result digest. The receipt verifies against the pinned key and names the header's
    // unit, its digest and this shard. Idempotent per piece as uploadResult is per result.
    virtual ApiResult<UploadOutcome> uploadPiece(const std::string& /*uploadUrl*/,
                                                 const std::filesystem::path& /*pieceFile*/,
                                                 int /*shard*/, const net::Signature& /*signature*/,
                                                 const TransferProgressFn& /*progress*/) {
        return apiFailure("this coordinator connection cannot upload result pieces", false);
    }
    // The donor's display name and team (PUT /v1/clients/self); the profile stored.
    virtual ApiResult<net::DonorProfile> updateProfile(const net::DonorProfile& /*profile*/) {
        return apiFailure("this coordinator connection cannot set a display name or team", false);
    }
};

}  // namespace tandem::core
