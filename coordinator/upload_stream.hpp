// The checks of one upload's byte stream as it arrives, with no database and no lock: the
// 128-byte result header (work unit, encoding, size, the client's signature, claimed tokens and
// steps), then the payload, written to a staging file about 128 KiB at a time while it is
// hashed, scanned for NaN/Inf (fp16 values, int8 scales), measured (its norm, and its cosine to
// the gate's reference direction) through the one decode path (payload_encoding.hpp); at the end
// the payload's digest and the flush to disk. Memory per upload: the 128 KiB block, never P
// values: accepted payloads are added to the round sum from their files (round_aggregator.hpp).
// Result intake (result_intake.cpp) begins and commits uploads around it.
//
// Dimensions: P parameters.
#pragma once

#include "coordinator.hpp"
#include "payload_file.hpp"
#include "result_format.hpp"
#include "robust_gate.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tandem::coord {

// Payload values written, scanned and measured per step (fp16: 128 KiB, scanFp16's block, so the
// norm adds the same block sums in the same order as a scan of whole 1 MiB chunks; int8: 512
// blocks, 130 KiB).
inline constexpr size_t kStageBlockHalves = size_t{1} << 16;
inline constexpr size_t kStageBlockValues = size_t{1} << 17;  // int8

// A piece's sum of squares in its table may differ from the shard's own by this much (relative):
// the shard's scan sums in float within blocks, the worker in double.
inline constexpr double kPieceSumTolerance = 1e-4;

// What an upload must match, fixed when it begins.
struct UploadExpectation {
    int64_t workUnitId = 0;
    int64_t parameterCount = 0;  // P
    // The only encoding accepted (the run's); another one is refused before any payload byte.
    uint32_t encoding = net::kEncodingFp16;
    std::string modelName;  // for messages
    int64_t bodyBytes = 0;  // header + the payload's bytes in that encoding
    int64_t maxTokens = 0;  // what the work unit allows
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
    // The Byzantine gate's reference direction (the last outer step, P values; null: none). The
    // cosine to it is measured as the payload streams; the intake recomputes it from the
    // staging file when a round closed during the upload (the direction changed).
    std::shared_ptr<const std::vector<float>> direction;
    // A piece of a sharded run's result (docs/protocol.md, "Sharded runs"): the header is format
    // version 2, the piece table of `shards` entries follows it, then the values of this
    // shard's range. shards 0: a whole result (format version 1).
    int shards = 0;
    int shardIndex = 0;
    net::PieceRange pieceRange;
    // A piece of a unit whose result another shard accepted: its digest must be this one.
    std::optional<net::Sha256Digest> resultDigestMustBe;

    // The values the payload holds: P, or the piece's range.
    int64_t payloadValues() const {
        return shards > 0 ? pieceRange.end - pieceRange.begin : parameterCount;
    }
};

class UploadStream {
  public:
    explicit UploadStream(UploadExpectation expectation);
    ~UploadStream();  // discard()
    UploadStream(const UploadStream&) = delete;
    UploadStream& operator=(const UploadStream&) = delete;

    // Before the first byte of a result not yet accepted: creates the staging file and reserves
    // the payload's bytes on disk (507 insufficient_storage when the disk cannot hold them).
    std::optional<Refusal> open(const std::filesystem::path& stagingFile);
    // The next body bytes. A value means "stop reading and answer this": a refusal, or the
    // stored receipt of an idempotent retry.
    std::optional<Outcome<std::string>> feed(std::span<const uint8_t> bytes);
    // complete: the whole body arrived. Checks the length, the last block, compares the
    // payload's SHA-256 with the header's, and flushes and closes the staging file. Once only.
    std::optional<Refusal> finish(bool complete);

    // After a successful finish():
    const net::ResultHeader& header() const { return *m_header; }
    const net::Sha256Digest& resultDigest() const { return m_digest; }  // of the header
    // Of the payload; of a piece: of the whole result, from the piece table's sums.
    double norm() const;
    // A piece: its entry of the piece table (checked against its bytes by finish()).
    const net::PieceEntry& pieceEntry() const { return m_table[m_expect.shardIndex]; }
    // The cosine to expectation.direction (none without one, or for a zero payload).
    std::optional<double> cosine() const { return m_cosine.value(); }
    const std::shared_ptr<const std::vector<float>>& direction() const {
        return m_expect.direction;
    }
    const std::filesystem::path& stagingFile() const { return m_stagingFile; }
    // The staging file was moved elsewhere: do not remove it.
    void releaseStagingFile() { m_stagingFile.clear(); }

    const net::Signature& signature() const { return m_expect.signature; }
    bool isRetryOfAccepted() const { return m_expect.accepted; }
    // Closes and removes the staging file (if still there).
    void discard();

  private:
    std::optional<Outcome<std::string>> checkHeader();
    std::optional<Refusal> checkTable();
    std::optional<Refusal> flushBlock();
    PayloadLayout layout() const { return {m_expect.encoding, m_expect.payloadValues()}; }
    // Values of a full staging block.
    int64_t stageValues() const;
    std::optional<Refusal> writeFailed(const char* what, int error);

    UploadExpectation m_expect;
    std::vector<uint8_t> m_head;
    std::optional<net::ResultHeader> m_header;
    std::vector<uint8_t> m_tableBytes;  // a piece's table as it arrives
    std::vector<net::PieceEntry> m_table;
    bool m_tableChecked = false;
    net::Sha256Digest m_digest{};
    net::Sha256 m_payloadHash;
    std::vector<uint16_t> m_block;  // arriving bytes (uint16_t: aligned for fp16)
    size_t m_blockCapacity = 0;     // bytes of a full block: stageValues() values
    std::vector<float> m_decoded;   // a piece of the block, decoded for the cosine
    size_t m_blockBytes = 0;
    int64_t m_written = 0;  // values written and scanned
    int64_t m_received = 0;
    // The pieces' sums of squares: of the blocks of the current 1 MiB chunk, then of the chunks.
    double m_chunkSquares = 0, m_sumSquares = 0;
    CosineAccumulator m_cosine;
    int m_fd = -1;
    std::filesystem::path m_stagingFile;
    bool m_finished = false;
};

}  // namespace tandem::coord
