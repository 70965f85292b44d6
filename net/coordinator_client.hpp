// Typed calls for every endpoint of protocol v2 (docs/protocol.md) over the HTTPS client. Answers
// come back as the net/protocol.hpp types; manifests and receipts are checked against the pinned
// coordinator key before they are returned.
#pragma once

#include "donor_profile.hpp"
#include "download_sources.hpp"
#include "held_work.hpp"
#include "http_client.hpp"
#include "protocol.hpp"

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace tandem::net {

struct WorkOffer {
    std::optional<Manifest> manifest;         // none: no work now (204)
    std::string manifestJson;                 // the manifest exactly as received
    std::chrono::milliseconds retryAfter{0};  // without a manifest: when to ask again
};

struct UploadReceipt {
    Receipt receipt;
    std::string receiptJson;  // exactly as received (for the ledger)
    int64_t bytesSent = 0;    // over all attempts
};

class CoordinatorClient {
  public:
    // `coordinatorKey`: pinned at an earlier registration (kept by the caller); without it the
    // key from registerClient() is pinned.
    static HttpResult<std::unique_ptr<CoordinatorClient>> create(
        HttpClientConfig config, std::optional<PublicKey> coordinatorKey = std::nullopt);

    // POST /v1/clients. Takes the bearer token and pins the coordinator key; when a key was
    // pinned already and the answer carries another, that is a BadSignature error.
    HttpResult<RegisterResponse> registerClient(const RegisterRequest& request);
    // Sent with registerClient() in X-Tandem-Registration-Secret when not empty (a coordinator
    // started with --register-secret needs it).
    void setRegistrationSecret(const std::string& secret);
    void setToken(const std::string& token);
    void setCoordinatorKey(const PublicKey& key);
    std::optional<PublicKey> coordinatorKey() const;

    // POST /v1/work: a manifest whose signature verifies against the pinned key, or no work
    // with the server's Retry-After. Not retried (each answer may hand out a work unit).
    // requestId: sent as the Idempotency-Key header (none when empty).
    HttpResult<WorkOffer> requestWork(const WorkRequest& request,
                                      const std::string& requestId = {});
    // GET /v1/work: the units the coordinator counts as this client's.
    HttpResult<HeldWorkUnits> listWork();
    // DELETE /v1/work/{id}: gives a held unit back to the pool (the coordinator abandons it).
    HttpResult<void> releaseWork(int64_t workUnitId);

    // GET of the manifest's weights (whole file, ETag = SHA-256) and data range (only the bytes
    // of its tokens, Manifest::dataByteOffset/dataByteLength, by HTTP Range: never the whole
    // shard), resumable, checked by SHA-256 before `destination` appears. A version 4 manifest's
    // blob URLs are tried in the order sources() gives (each but the last with at most two
    // tries), falling back to the next on any failure but a local one or a cancel; bytes that
    // do not match the manifest's SHA-256 are deleted and count as that URL's failure.
    HttpResult<DownloadResult> downloadWeights(const Manifest& manifest,
                                               const std::filesystem::path& destination,
                                               const ProgressCallback& progress = {});
    HttpResult<DownloadResult> downloadData(const Manifest& manifest,
                                            const std::filesystem::path& destination,
                                            const ProgressCallback& progress = {});
    // A version 5 manifest's weight delta (its blob URLs as above), checked by its SHA-256.
    // Blob URLs on the server of the manifest's absolute upload URL (a front end's manifest names
    // the aggregating process, docs/protocol.md) are trusted as the coordinator's own.
    HttpResult<DownloadResult> downloadWeightDelta(const Manifest& manifest,
                                                   const WeightDeltaRef& delta,
                                                   const std::filesystem::path& destination,
                                                   const ProgressCallback& progress = {});

    // POST /v1/work/{id}/progress; the reply may say "abandon" with a reason.
    HttpResult<ProgressReply> reportProgress(int64_t workUnitId, const ProgressReport& report);

    // PUT of a result file (header + payload) with X-Tandem-Signature, retried with backoff
    // (idempotent on the coordinator). The receipt must verify against the pinned key, name this
    // work unit and carry the digest of the file's header.
    HttpResult<UploadReceipt> uploadResult(const std::string& uploadUrl,
                                           const std::filesystem::path& resultFile,
                                           const Signature& signature,
                                           const ProgressCallback& progress = {});

    // Protocol v6: PUT of piece `shard` of a pieced result (format version 2) to that shard's
    // upload URL (the manifest's absolute https:// URL, trusted as the coordinator: the pin or CA
    // file and the bearer token). pieceFile holds the piece's body: the 128-byte header, the
    // piece table and the piece's payload. As uploadResult, and the receipt must also name this
    // shard ("shard": shard).
    HttpResult<UploadReceipt> uploadPiece(const std::string& uploadUrl,
                                          const std::filesystem::path& pieceFile, int shard,
                                          const Signature& signature,
                                          const ProgressCallback& progress = {});

    // GET /v1/status (no authentication needed).
    HttpResult<RunStatus> status();

    // PUT /v1/clients/self: the donor's display name and team (fields left out stay as they
    // are); the profile the coordinator stored. A refused name is an HttpStatus error with the
    // coordinator's message (400 invalid_name, 409 name_taken).
    HttpResult<DonorProfile> updateProfile(const DonorProfile& profile);
    // GET /v1/runs/{run}/leaderboard with the bearer token: the board and this donor's standing.
    HttpResult<Leaderboard> leaderboard(int64_t runId);

    HttpClient& http() { return *m_http; }
    DownloadSources& sources() { return m_sources; }

  private:
    // uploadResult and uploadPiece: expectedShard is the shard the receipt must name (none: a
    // whole result).
    HttpResult<UploadReceipt> upload(const std::string& uploadUrl,
                                     const std::filesystem::path& file,
                                     std::optional<int> expectedShard, const Signature& signature,
                                     const ProgressCallback& progress);
    // trustedOrigins: servers trusted as the coordinator (the upload URL's, the shards').
    HttpResult<DownloadResult> downloadBlob(const std::vector<std::string>& urls,
                                            DownloadRequest request,
                                            const std::vector<std::string>& trustedOrigins);
    explicit CoordinatorClient(std::unique_ptr<HttpClient> http) : m_http(std::move(http)) {}
    std::unique_ptr<HttpClient> m_http;
    mutable std::mutex m_mutex;
    std::optional<PublicKey> m_coordinatorKey;
    std::string m_registrationSecret;
    DownloadSources m_sources;
};

}  // namespace tandem::net
