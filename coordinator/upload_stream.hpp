// The checks of one upload's byte stream as it arrives, with no database and no lock: the
// 128-byte result header (work unit, size, the client's signature, claimed tokens and steps),
// then the payload, written to a staging file, hashed, scanned for NaN/Inf and decoded into a
// private fp32 scratch 1 MiB at a time; at the end the payload's digest and the flush to disk.
// Result intake (result_intake.cpp) begins and commits uploads around it.
//
// Dimensions: P parameters.
#pragma once

#include "coordinator.hpp"
#include "result_format.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tandem::coord {

// Payload halves decoded per step (1 MiB), here and when a restart rebuilds the round sum.
inline constexpr size_t kDecodeChunkHalves = size_t{1} << 19;

// What an upload must match, fixed when it begins.
struct UploadExpectation {
    int64_t workUnitId = 0;
    int64_t parameterCount = 0;  // P
    std::string modelName;       // for messages
    int64_t bodyBytes = 0;       // header + 2P
    int64_t maxTokens = 0;       // what the work unit allows
    int maxSteps = 0;
    // A partial result (fewer steps than assigned) needs at least minSteps steps
    // (minResultSteps), and no result claims more than tokensPerStep (B x T) tokens a step.
    int minSteps = 1;
    int64_t tokensPerStep = 0;  // 0: not checked
    net::PublicKey clientKey{};
    net::Signature signature{};  // the X-Tandem-Signature header, over the result digest
    // The work unit already has an accepted result: a retry with the same digest gets its
    // receipt back and nothing is staged; another digest is refused.
    bool accepted = false;
    net::Sha256Digest acceptedDigest{};
    std::string acceptedReceipt;
    // Unix seconds; the upload fails once it has taken longer than maxSeconds since startedUnix.
    std::function<int64_t()> clock;
    int64_t startedUnix = 0;
    int64_t maxSeconds = 0;
};

class UploadStream {
  public:
    explicit UploadStream(UploadExpectation expectation);
    ~UploadStream();  // discard()
    UploadStream(const UploadStream&) = delete;
    UploadStream& operator=(const UploadStream&) = delete;

    // Before the first byte of a result not yet accepted: creates the staging file and takes
    // `scratch` (resized to P zeros; pass a used buffer to avoid a new allocation).
    std::optional<Refusal> open(const std::filesystem::path& stagingFile,
                                std::vector<float> scratch);
    // The next body bytes. A value means "stop reading and answer this": a refusal, or the
    // stored receipt of an idempotent retry.
    std::optional<Outcome<std::string>> feed(std::span<const uint8_t> bytes);
    // complete: the whole body arrived. Checks the length, decodes the last chunk, compares the
    // payload's SHA-256 with the header's, and flushes and closes the staging file. Once only.
    std::optional<Refusal> finish(bool complete);

    // After a successful finish():
    const net::ResultHeader& header() const { return *m_header; }
    const net::Sha256Digest& resultDigest() const { return m_digest; }  // of the header
    double norm() const;                                                // of the payload
    std::span<const float> delta() const { return m_scratch; }          // (P) decoded payload
    const std::filesystem::path& stagingFile() const { return m_stagingFile; }
    // The staging file was moved elsewhere: do not remove it.
    void releaseStagingFile() { m_stagingFile.clear(); }

    const net::Signature& signature() const { return m_expect.signature; }
    bool isRetryOfAccepted() const { return m_expect.accepted; }
    // Closes and removes the staging file (if still there).
    void discard();
    std::vector<float> takeScratch() { return std::move(m_scratch); }

  private:
    std::optional<Outcome<std::string>> checkHeader();
    std::optional<Refusal> flushChunk();

    UploadExpectation m_expect;
    std::vector<uint8_t> m_head;
    std::optional<net::ResultHeader> m_header;
    net::Sha256Digest m_digest{};
    net::Sha256 m_payloadHash;
    std::vector<float> m_scratch;  // (P) decoded delta
    std::vector<uint16_t> m_chunk;
    size_t m_chunkBytes = 0;
    int64_t m_decoded = 0;  // halves decoded into the scratch
    int64_t m_received = 0;
    double m_sumSquares = 0;
    int m_fd = -1;
    std::filesystem::path m_stagingFile;
    bool m_finished = false;
};

}  // namespace tandem::coord
