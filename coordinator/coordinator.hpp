// The coordinator's core, independent of HTTP: clients, the run and its rounds (DESIGN.md §3),
// work units, streaming validation and aggregation of uploads, the outer step, validation loss
// and persistence. The HTTPS layer (server.hpp) maps requests onto these calls.
//
// Dimensions: P parameters.
#pragma once

#include "crypto.hpp"
#include "donor_profile.hpp"
#include "expected.hpp"
#include "held_work.hpp"
#include "model.hpp"
#include "outer.hpp"
#include "protocol.hpp"
#include "samples.hpp"
#include "weight_delta.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tandem::coord {

// What a coordinator process does (--role; docs/operations.md, "Front ends"). All: the one
// process of a run that also aggregates results and runs the round clock (the default, and the
// only role with SQLite). Front: a front end on a PostgreSQL run: registration, work, heartbeats,
// held units, status, the public page and leaderboard, the speed test; no round sum, no close,
// no uploads (front_end.cpp).
enum class CoordinatorRole { All, Front };

struct CoordinatorConfig {
    std::filesystem::path stateDir;
    CoordinatorRole role = CoordinatorRole::All;
    // A front end's "https://host:port" of the aggregating process (--upload-base): its manifests'
    // upload_url and the coordinator's own blob URLs point there.
    std::string uploadBase;
    // Sharded runs (issue 16; docs/protocol.md, "Sharded runs"; shard_rounds.cpp): a new run's
    // number of aggregation shards K (--shards, stored with the run; 1: not sharded), this
    // process's shard k (--shard), and the https://host:port at which workers and the other
    // shards reach this process (--public-url; needed when K > 1).
    int newRunShards = 1;
    int shard = 0;
    std::string publicUrl;
    // Reads a blob of another shard's process (a part of a version: an https:// URL of
    // /blobs/sha256/<hex>); empty: HTTPS with the run's own TLS identity as the trust anchor.
    // Tests that drive shards without servers give their own.
    std::function<Expected<std::vector<uint8_t>>(const std::string& url)> fetchShardBlob;
    // The run state (state_store.hpp): empty, the SQLite file coordinator.db in stateDir; or a
    // postgresql:// URL. Files (weights, blobs, uploads) stay in stateDir either way.
    std::string databaseUrl;
    // A new run's data (run_data.hpp): text files or directories as bytes, or, with a
    // tokenizer (a SentencePiece model), tokenized once into token shards; or llm.c token
    // shards (files or directories of *.bin) instead of corpus.
    std::vector<std::filesystem::path> corpus;  // needed when the state dir holds no run yet
    std::filesystem::path tokenizer;
    std::vector<std::filesystem::path> shards;
    std::string model = "tiny";
    // Starting weights of a new run (safetensors or llm.c; kernels/model_files.hpp) instead
    // of a random initialisation; empty: random from `seed`.
    std::filesystem::path initWeights;
    int innerSteps = 50;    // H for a worker of unknown or ample throughput (the maximum)
    int minInnerSteps = 0;  // 0: innerSteps / 10, at least 1
    int batch = 8;
    int seqLen = 0;  // 0: the model's maxSeqLen
    float innerPeakLr = 6e-4f;
    float innerMinLr = 6e-5f;
    // The inner lr follows one schedule over the run's steps (innerSteps per version): linear
    // warmup, then constant at the peak, or with lrDecaySteps > 0 a cosine to innerMinLr at
    // that step. Restarting it in every unit costs about 7% of final loss (docs/benchmarks.md).
    int64_t lrWarmupSteps = 100;
    int64_t lrDecaySteps = 0;
    OuterConfig outer;
    // How a new run's versions move (kernels/weight_delta.hpp, --weight-deltas): off, the outer
    // step as it is; fp16 or int8, next = old + deq(Q(u + e)) with the residual e carried to the
    // next round. Stored with the run, so a restart keeps the run's choice.
    WeightDeltaCodec weightDeltas = WeightDeltaCodec::Off;
    int quorum = 2;  // results that close a round
    // With this set, `quorum` is a minimum and a round also waits for every active worker (a
    // client holding a unit with a live heartbeat, or one that has reported to the round): with
    // more workers than a fixed quorum, rounds would close faster than a unit takes and most
    // results would arrive beyond the staleness bound and be thrown away.
    bool quorumOfActiveWorkers = false;
    int roundTimeoutSeconds = 600;
    int maxStaleness = 1;            // results based on version V - s are accepted for s <= this
    double staleWeightFactor = 0.5;  // weight = tokens * factor^s
    // The eager start (manifest start_blend, protocol 3): a unit whose worker's previous result
    // is not in the weights it gets starts from (1 - b) x those + b x the worker's own last end
    // point; 0: from the weights (docs/benchmarks.md, "Fair comparisons").
    float startBlend = 0.5f;
    // A new run's result encoding (net::kEncodingFp16 or kEncodingInt8), stored with the run
    // (run_setup.hpp); an existing run keeps its own (another one given here is refused).
    std::optional<uint32_t> resultEncoding;
    // A new run's encoding when resultEncoding is not given: tandem-coordinator's default is
    // int8 (docs/benchmarks.md, "int8 results on the wire"); the library's stays fp16.
    uint32_t newRunResultEncoding = net::kEncodingFp16;
    // The Byzantine gate (robust_gate.hpp, GateConfig says what each does).
    double maxNormRatio = 10.0;    // refused above this times the reference norm
    double clipNormRatio = 3.0;    // down-weighted above this times the reference; 0: never
    double maxRelativeNorm = 1.0;  // refused above this times ||theta||; 0: off
    double maxAbsoluteNorm = 0;    // refused above this L2 norm; 0: off
    // Refused below this cosine to the last outer step; -1: off (the default: honest results
    // point against an overshooting outer step, docs/benchmarks.md "The direction check").
    double minCosine = -1.0;
    int referenceRounds = 4;             // rounds whose accepted norms make the reference
    bool refuseRepeatedPayloads = true;  // a payload accepted before is a replay
    // Replication spot-checks (replication.hpp; docs/protocol.md): about this fraction of units
    // get a twin (the same unit for another client; 0: none); twins whose results differ by more
    // than replicateTolerance (||a - b|| / max(||a||, ||b||)) are both held out and counted
    // against both clients; replicateStrikes such disagreements, more than its agreements,
    // block a client. tandem-coordinator's default fraction is 0.05; 0 here, so that code that
    // embeds a coordinator (tests, benchmarks) sees no twins unless it asks for them.
    double replicateFraction = 0;
    // 1.0: honest twins whose workers carry different AdamW moments were up to 0.59 apart
    // (docs/benchmarks.md, "Replication spot-checks"); a sign flip is about 2, noise about 1.41.
    double replicateTolerance = 1.0;
    int replicateStrikes = 3;
    int targetWorkUnitSeconds = 300;  // sizes H from the reported throughput
    int heartbeatSeconds = 30;
    int heartbeatTimeoutSeconds = 180;  // no heartbeat for this long: the work unit is reassigned
    int stallTimeoutSeconds = 600;      // heartbeats without a step forward for this long: the same
    int maxWorkUnitsPerClient = 3;      // training, uploading, the next one prefetched
    int newClientWorkUnits = 1;  // ... until a result was accepted in the last referenceRounds
    int maxUploadsPerClient = 1;
    // Each holds a socket, an HTTPS thread, a staging file with the payload's bytes (2P for
    // fp16) reserved on disk and a
    // 128 KiB block (upload_stream.hpp), never P values: the limit is sockets and disk.
    int maxConcurrentUploads = 256;
    // Base URLs of mirrors of the blobs (--mirror, blob_store.hpp): listed in version 4
    // manifests after the coordinator's own, in this order.
    std::vector<std::string> mirrors;
    int64_t maxUploadSeconds = 3600;
    double validationFraction = 0.05;  // tail of the corpus held out
    int validationBatches = 4;
    int validationBatch = 8;
    SampleConfig samples;  // what the model writes, after each version (samples.hpp)
    int threads = 2;       // aggregation, outer step, validation and samples
    uint64_t seed = 1;
    // Ticker and validator; tests drive tick() themselves. With them, the upload that completes a
    // round is answered at once and the ticker closes the round; without, the commit closes it.
    bool backgroundThreads = true;
    // Tests: called as a round close starts its outer step, without the lock (round: the one
    // closing).
    std::function<void(int64_t round)> testBeforeClose;
    std::function<int64_t()> clock;  // unix seconds; default: the system clock
};

// A refusal: HTTP status, a stable code and a message a person can act on.
struct Refusal {
    int httpStatus = 400;
    std::string code;
    std::string message;
    int retryAfterSeconds = 0;
};

// A value or a refusal; refusal() is error() under the name the coordinator's code uses.
template <class T>
class Outcome : public Expected<T, Refusal> {
  public:
    using Expected<T, Refusal>::Expected;
    const Refusal& refusal() const { return this->error(); }
};

struct WorkOffer {
    std::optional<net::Manifest> manifest;  // empty: no work now
    int retryAfterSeconds = 0;
};

struct ServedFile {
    std::filesystem::path path;
    int64_t bytes = 0;
    net::Sha256Digest sha256{};
};

using Logger = std::function<void(const std::string&)>;

class Coordinator;
class Metrics;

// One streaming upload (PUT /v1/results/{id}). Bytes go to a staging file and a SHA-256, and are
// checked block by block as they arrive (NaN/Inf, norm, direction); the round sum is touched only
// after finish() committed the result, by the aggregator reading the stored file.
class UploadSession {
  public:
    ~UploadSession();
    // Feeds the next body bytes. A value means "stop reading and answer this": a refusal, or the
    // stored receipt when the same result was accepted before (idempotent retry).
    std::optional<Outcome<std::string>> feed(std::span<const uint8_t> bytes);
    // complete: the whole body arrived. Returns the signed receipt JSON, or a refusal.
    Outcome<std::string> finish(bool complete);

  private:
    friend class Coordinator;
    struct State;
    explicit UploadSession(std::unique_ptr<State> state);
    std::unique_ptr<State> m_s;
};

class Coordinator {
  public:
    // Opens the state directory (creating the run on first start), restores the last committed
    // state and starts the ticker and validator threads.
    static Expected<std::unique_ptr<Coordinator>> open(CoordinatorConfig config, Logger log);
    ~Coordinator();

    Outcome<net::RegisterResponse> registerClient(std::string_view body);
    // "Bearer <token>" -> client id
    Outcome<int64_t> authenticate(std::string_view authorization);
    // requestId: the Idempotency-Key header, when given. An id this client used before gets the
    // unit assigned then, while it is still assigned; otherwise a new unit (docs/protocol.md).
    Outcome<WorkOffer> requestWork(int64_t clientId, std::string_view body,
                                   std::optional<std::string> requestId = std::nullopt);
    // GET /v1/work: the units the client holds (assigned to it, neither accepted nor abandoned).
    Outcome<net::HeldWorkUnits> heldWork(int64_t clientId);
    // DELETE /v1/work/{id}: the client gives one of its units back; it is abandoned exactly as a
    // unit without heartbeats (its data range goes to the next request). 404 unknown, 403
    // another client's, 409 not assigned any more or its upload is arriving.
    Outcome<void> releaseWork(int64_t clientId, int64_t workUnitId);
    Outcome<net::ProgressReply> progress(int64_t clientId, int64_t workUnitId,
                                         std::string_view body);
    // contentLength < 0: not given. signature: the X-Tandem-Signature header (base64).
    // dryRun: only the checks that need no body (for "Expect: 100-continue"); returns nullptr
    // when they pass and takes no upload slot. piece >= 0: piece k of a sharded run's result
    // (PUT /v1/results/{id}/pieces/{k}; docs/protocol.md, "Sharded runs").
    Outcome<std::unique_ptr<UploadSession>> beginUpload(int64_t clientId, int64_t workUnitId,
                                                        int64_t contentLength,
                                                        std::string_view signature,
                                                        bool dryRun = false, int piece = -1);
    net::RunStatus status();
    // GET /metrics: the Prometheus text exposition (metrics.hpp).
    std::string metricsText();
    // The counters, for the HTTP layer's own figures (responses, bytes sent).
    Metrics& metrics();

    // The public face (public_face.cpp; docs/protocol.md, "Names, teams and the leaderboard").
    // PUT /v1/clients/self: changes the client's display name and team; the stored profile.
    Outcome<net::DonorProfile> updateProfile(int64_t clientId, std::string_view body);
    Outcome<net::DonorProfile> profile(int64_t clientId);
    // The top donors and teams; with a client, its own and its team's standing.
    Outcome<net::Leaderboard> leaderboard(int64_t runId, std::optional<int64_t> clientId);
    // The public run page (HTML), built from a cache; 404 for another run.
    Outcome<std::string> publicPage(int64_t runId);
    // The newest samples, newest version first (at most `limit` of them).
    std::vector<ModelSample> samples(int64_t runId, int64_t limit);
    Outcome<ServedFile> weightsFile(int64_t runId, int64_t version);
    Outcome<ServedFile> dataShard(int64_t runId, int64_t shard);
    // GET /blobs/sha256/<name> (blob_store.hpp).
    Outcome<ServedFile> blob(std::string_view name) const;

    // Abandons work units without heartbeats, closes the round at its deadline.
    void tick();
    // Blocks until every queued validation has been recorded.
    void waitForValidation();

    int64_t runId() const;
    // The run's tokenizer file (<state-dir>/data/tokenizer.model: a SentencePiece model, or
    // llm.c's GPT-2 tokenizer file) for a run created with --tokenizer; none for byte-level
    // runs and llm.c shards given without one. Samples decode with it; exports copy it.
    std::optional<std::filesystem::path> tokenizerPath() const;
    int64_t currentVersion();
    const ModelConfig& model() const;
    int64_t parameterCount() const;
    net::PublicKey publicKey() const;
    std::vector<float> weights();   // (P) current version
    std::vector<float> velocity();  // (P) outer momentum; a shard's: its range's (N)
    // (P) the error-feedback residual of a run with weight deltas; empty without.
    std::vector<float> weightDeltaResidual();
    int64_t maxUploadBytes() const;

    struct Impl;

  private:
    explicit Coordinator(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace tandem::coord
