// CoordinatorApi over the real HTTPS client (net/coordinator_client.hpp): what tandem-worker and
// the desktop app hand to the engine.
#pragma once

#include "coordinator_api.hpp"
#include "coordinator_client.hpp"

#include <memory>

namespace tandem::core {

// How the engine should treat a failed call: transport and TLS trouble, 408/429/5xx and the
// coordinator's "busy" conflicts are worth retrying; other 4xx answers are refusals.
ApiFailure toApiFailure(const net::HttpError& error);

class NetCoordinatorApi final : public CoordinatorApi {
  public:
    explicit NetCoordinatorApi(std::unique_ptr<net::CoordinatorClient> client)
        : m_client(std::move(client)) {}

    ApiResult<net::RegisterResponse> registerClient(const net::RegisterRequest& request) override;
    void setToken(const std::string& token) override { m_client->setToken(token); }
    void setCoordinatorKey(const net::PublicKey& key) override { m_client->setCoordinatorKey(key); }
    ApiResult<WorkOffer> requestWork(const net::WorkRequest& request,
                                     const std::string& requestId) override;
    ApiResult<std::vector<net::HeldWorkUnit>> listWork() override;
    ApiResult<void> releaseWork(int64_t workUnitId) override;
    ApiResult<DownloadOutcome> downloadWeights(const net::Manifest& manifest,
                                               const std::filesystem::path& destination,
                                               const TransferProgressFn& progress) override;
    ApiResult<DownloadOutcome> downloadWeightDelta(const net::Manifest& manifest,
                                                   const net::WeightDeltaRef& delta,
                                                   const std::filesystem::path& destination,
                                                   const TransferProgressFn& progress) override;
    ApiResult<DownloadOutcome> downloadData(const net::Manifest& manifest,
                                            const std::filesystem::path& destination,
                                            const TransferProgressFn& progress) override;
    ApiResult<net::ProgressReply> reportProgress(int64_t workUnitId,
                                                 const net::ProgressReport& report) override;
    ApiResult<net::DonorProfile> updateProfile(const net::DonorProfile& profile) override;
    ApiResult<UploadOutcome> uploadResult(const std::string& uploadUrl,
                                          const std::filesystem::path& resultFile,
                                          const net::Signature& signature,
                                          const TransferProgressFn& progress) override;
    ApiResult<UploadOutcome> uploadPiece(const std::string& uploadUrl,
                                         const std::filesystem::path& pieceFile, int shard,
                                         const net::Signature& signature,
                                         const TransferProgressFn& progress) override;

    net::CoordinatorClient& client() { return *m_client; }

  private:
    std::unique_ptr<net::CoordinatorClient> m_client;
};

}  // namespace tandem::core
