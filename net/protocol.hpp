// Protocol v2 (docs/protocol.md): the JSON bodies of every request and response, with parsing
// that validates types and ranges and says which field is wrong and why.
#pragma once

#include "crypto.hpp"
#include "expected.hpp"
#include "model_config.hpp"
#include "optimizer.hpp"
#include "result_format.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::net {

// The manifest's "protocol". 2: work units carry token ranges (token_bytes, header_bytes). 3: a
// worker that says so in its work request may get a manifest with "start_blend" (the eager
// start of an overlapped unit); others keep getting version 2. 4: weights and data also list
// "urls", content-addressed blobs on the coordinator and its mirrors (/blobs/sha256/<hex>); a
// worker that asks with 3 gets a version 3 manifest. A worker refuses a manifest of any other
// version, naming them.
// 5: the manifest states the result's encoding ("result_encoding": "fp16" or "int8", and for
// int8 "result_block": 256); a run that takes int8 results gives work only to workers that ask
// with 5 or later (an older one would upload fp16), and a fp16 run gives a version 4 manifest to
// a worker that asks with 4. "weights" may list "deltas" (issue 15), the quantized updates of a
// run with weight deltas from the last few versions up to the unit's base version
// (WeightDeltaRef); a worker that asks with 4 gets none.
// 6: sharded runs (issue 16). A run aggregated by K > 1 processes lists "shards" (K >= 2 ranges
// of net::pieceRanges(P, K) with the absolute https:// upload URL of each shard's piece) and
// takes results of format version 2 in pieces (result_format.hpp); it gives work only to
// workers that ask with 6. A K = 1 run answers them with a version 5 manifest that says
// "protocol": 6 and has no shards. Receipts of pieces carry "shard". Workers of this release ask
// with 6 and read manifests of versions 2 to 6.
inline constexpr int kProtocolVersion = 6;
// The first manifest version that may list "shards".
inline constexpr int kShardsProtocol = 6;
// The first manifest version that states the result encoding.
inline constexpr int kResultEncodingProtocol = 5;
// At most this many deltas in a version 5 manifest.
inline constexpr size_t kMaxWeightDeltas = 8;
// At most this many URLs per file in a version 4 manifest (the coordinator's own + mirrors).
inline constexpr size_t kMaxBlobUrls = 16;
inline constexpr int kOldestProtocolVersion = 2;

// {"error": {"code": "...", "message": "..."}}
struct ApiError {
    std::string code;
    std::string message;
    std::string toJson() const;
    static Expected<ApiError> fromJson(std::string_view text);
};

// POST /v1/clients
struct RegisterRequest {
    RegisterRequest() = default;
    RegisterRequest(std::string deviceName, PublicKey key, std::string hardwareSummary,
                    std::string publicName = {}, std::string teamName = {})
        : name(std::move(deviceName)),
          publicKey(key),
          hardware(std::move(hardwareSummary)),
          displayName(std::move(publicName)),
          team(std::move(teamName)) {}
    std::string name;       // 1..100 characters
    PublicKey publicKey{};  // Ed25519, base64 in JSON
    std::string hardware;   // free-form summary, at most 2000 characters
    // Optional: the donor's public name and team (donor_profile.hpp); "" for none. Unlike
    // `name`, these are shown publicly.
    std::string displayName;
    std::string team;
    std::string toJson() const;
    static Expected<RegisterRequest> fromJson(std::string_view text);
};

struct RegisterResponse {
    int64_t clientId = 0;
    std::string token;                 // bearer token for every later request
    PublicKey coordinatorPublicKey{};  // verifies manifests and receipts
    std::string toJson() const;
    static Expected<RegisterResponse> fromJson(std::string_view text);
};

// POST /v1/work
struct WorkRequest {
    std::string device;  // "cuda:0 NVIDIA GeForce RTX 3060", "cpu"
    int64_t memoryBytes = 0;
    double tokensPerSecond = 0;  // measured; 0 when not known yet
    // Measured from the worker's own result uploads (bytes/s); 0 when not known yet. Optional
    // on the wire: the coordinator sizes units so that their upload fits in the next unit.
    double uplinkBytesPerSecond = 0;
    int64_t freeDiskBytes = 0;
    // The newest manifest version the worker understands; absent (an older worker): 2.
    int protocol = kProtocolVersion;
    std::string toJson() const;
    static Expected<WorkRequest> fromJson(std::string_view text);
};

// The answer to POST /v1/work: one work unit, signed by the coordinator.
// Version 5: the weight delta from version fromVersion to fromVersion + 1, a content-addressed
// file (kernels/weight_delta_file.hpp) at urls (as Manifest::weightsUrls).
struct WeightDeltaRef {
    int64_t fromVersion = 0;
    Sha256Digest sha256{};
    int64_t bytes = 0;
    std::vector<std::string> urls;
};

// Version 6: where piece k of a result of a sharded run goes: its range of the parameters and the
// absolute https:// URL of shard k's piece upload (docs/protocol.md "Sharded runs").
struct ShardUpload {
    PieceRange range;
    std::string uploadUrl;
    bool operator==(const ShardUpload&) const = default;
};

struct Manifest {
    int64_t workUnitId = 0;
    int64_t runId = 0;
    int64_t baseVersion = 0;  // the global weights version training starts from
    ModelConfig model;
    std::string weightsUrl;
    // Version 4: where the same bytes are, in the coordinator's order of preference: a path on
    // the coordinator ("/blobs/sha256/<hex>") or an https:// URL of a mirror. Unauthenticated
    // and untrusted: the SHA-256 below is what the worker checks. Empty below version 4.
    std::vector<std::string> weightsUrls;
    Sha256Digest weightsSha256{};
    int64_t weightsBytes = 0;
    // Version 5: deltas of consecutive versions ending at baseVersion, oldest first, so that a
    // worker holding an older version can rebuild these weights (and check weightsSha256).
    std::vector<WeightDeltaRef> weightDeltas;
    std::string dataUrl;
    // Version 4: the whole shard file as a blob (named by the file's SHA-256), from which the
    // worker takes the unit's bytes with one Range request; as weightsUrls.
    std::vector<std::string> dataUrls;
    int64_t dataShard = 0;
    // Tokens [dataOffset, dataOffset + dataLength) of the shard's tokens, each dataTokenBytes
    // wide (1: text bytes, 2: little-endian uint16 ids), after dataHeaderBytes of header (llm.c
    // shards: 1024).
    int64_t dataOffset = 0;
    int64_t dataLength = 0;
    int dataTokenBytes = 1;
    int64_t dataHeaderBytes = 0;
    Sha256Digest dataSha256{};  // of that range's bytes
    int innerSteps = 0;         // H
    int batch = 0;              // B
    int seqLen = 0;             // T
    LrSchedule lr;              // the run's inner schedule
    int64_t lrStartStep = 0;    // the run's step at this unit's first inner step
    uint64_t seed = 0;          // < 2^53 so that JSON readers keep it exact
    int64_t deadlineUnix = 0;
    int heartbeatSeconds = 0;  // send progress at least this often
    // Version 3 only: the unit starts from (1 - b) x the weights of base_version + b x the
    // worker's own end point of its last unit of this run, where the worker still holds it
    // (the eager start of a unit whose predecessor's result is not in those weights yet). The
    // pseudo-gradient stays relative to the weights of base_version.
    float startBlend = 0;
    int protocol = kProtocolVersion;  // 2 for a worker that asked with an older version
    // Version 5: the encoding of the result (kEncodingFp16 or kEncodingInt8, in blocks of
    // kInt8ResultBlock); fp16 below version 5.
    uint32_t resultEncoding = kEncodingFp16;
    std::string uploadUrl;
    int64_t maxUploadBytes = 0;
    // Version 6, a run of K > 1 shards: K entries, exactly net::pieceRanges(model P, K) in order,
    // each with an absolute https:// upload URL; the result is then uploaded in pieces (format
    // version 2). Empty: a whole result to uploadUrl (every run of one shard, every older version).
    std::vector<ShardUpload> shards;
    Signature signature{};  // Ed25519 over signingText()

    // The bytes of the shard file that hold the unit's tokens (what the worker downloads).
    int64_t dataByteOffset() const { return dataHeaderBytes + dataOffset * dataTokenBytes; }
    int64_t dataByteLength() const { return dataLength * dataTokenBytes; }

    // Learning rate of inner step h (0-based) of this unit.
    float learningRate(int64_t h) const { return lr.at(lrStartStep + h); }

    // Canonical JSON of every field but the signature (keys sorted, no spaces).
    std::string signingText() const;
    void sign(const SigningKey& key);
    bool verify(const PublicKey& coordinatorKey) const;
    std::string toJson() const;
    static Expected<Manifest> fromJson(std::string_view text);
};

// POST /v1/work/{id}/progress
struct ProgressReport {
    int64_t step = 0;
    float loss = 0;
    double tokensPerSecond = 0;
    std::string toJson() const;
    static Expected<ProgressReport> fromJson(std::string_view text);
};

struct ProgressReply {
    std::string action = "continue";  // "continue" or "abandon"
    std::string reason;               // why, when abandoning
    // The fewest inner steps a result of this unit may have: a worker that stops early (paused,
    // quitting) may upload a partial result of at least this many steps. 0: not stated (older
    // coordinators); the worker then keeps its checkpoint instead.
    int minSteps = 0;
    std::string toJson() const;
    static Expected<ProgressReply> fromJson(std::string_view text);
};

// The answer to an accepted PUT /v1/results/{id}.
struct Receipt {
    int64_t workUnitId = 0;
    int64_t clientId = 0;
    int64_t round = 0;  // the round the result was applied to
    double weight = 0;  // its weight in that round's average (tokens, reduced when stale)
    int64_t timeUnix = 0;
    Sha256Digest resultDigest{};  // SHA-256 of the result header
    Signature signature{};        // by the coordinator, over signingText()
    // The donor's credit: the tokens trained, whatever the weight (absent from receipts of
    // older coordinators, whose workers credited the weight).
    std::optional<int64_t> credit;
    // Version 6: the receipt of piece k of a result of a sharded run (absent for a whole result).
    std::optional<int> shard;

    std::string signingText() const;
    void sign(const SigningKey& key);
    bool verify(const PublicKey& coordinatorKey) const;
    std::string toJson() const;
    static Expected<Receipt> fromJson(std::string_view text);
};

struct RoundSummary {
    int64_t round = 0;
    std::optional<double> valLoss;  // null until evaluated
    int contributors = 0;
    int64_t tokens = 0;
    bool operator==(const RoundSummary&) const = default;
};

// Where the operator last exported the model (tandem-coordinator export).
struct ExportInfo {
    std::string path;
    std::string format;  // "safetensors" or "llmc"
    int64_t version = 0;
    int64_t exportedUnix = 0;
    bool operator==(const ExportInfo&) const = default;
};

// What the model wrote after one version, from one prompt (GET /v1/runs/{run}/samples).
struct SampleSummary {
    int64_t version = 0;
    std::string prompt;
    std::string text;  // the continuation alone
    bool operator==(const SampleSummary&) const = default;
};

// GET /v1/runs/{run}/samples: newest version first.
std::string samplesToJson(const std::vector<SampleSummary>& samples);

// GET /v1/status
struct RunStatus {
    int64_t runId = 0;
    int64_t round = 0;  // the open round; the current weights version
    ModelConfig model;
    int activeWorkers = 0;
    int64_t totalTokens = 0;
    int workUnitSeconds = 0;    // what work units are sized to take (0: not said)
    int batch = 0, seqLen = 0;  // a work unit's B x T (0: not said)
    // How units are sized (base/unit_sizing.hpp): H between these, about workUnitSeconds of the
    // worker's throughput; each token of a unit's data range takes tokenBytes (0: not said).
    int innerStepsMin = 0, innerStepsMax = 0;
    int tokenBytes = 0;
    // What a unit sends and receives (empty: not said, an older coordinator: fp16 results and
    // full weights): the result encoding ("fp16", "int8") and the weight deltas ("off", "fp16",
    // "int8"), so that a donor's cost estimate counts the bytes this run moves.
    std::string resultEncoding, weightDeltas;
    std::vector<RoundSummary> history;          // one entry per closed round, oldest first
    std::optional<ExportInfo> latestExport;     // absent: none made
    std::optional<SampleSummary> latestSample;  // what the newest sampled version wrote
    std::string toJson() const;
    static Expected<RunStatus> fromJson(std::string_view text);
};

}  // namespace tandem::net
