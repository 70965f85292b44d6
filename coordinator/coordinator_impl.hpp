// Internal to the coordinator: the state its parts share (Coordinator::Impl) and the state of
// one upload. Each group of Impl's methods lives in the file named above it; coordinator.cpp is
// the facade that takes the lock and calls them. Not part of the public API (coordinator.hpp).
//
// Dimensions: P parameters.
#pragma once

#include "coordinator.hpp"

#include "client_registry.hpp"
#include "leaderboard.hpp"
#include "messages.hpp"
#include "metrics.hpp"
#include "replication.hpp"
#include "result_format.hpp"
#include "robust_gate.hpp"
#include "round_aggregator.hpp"
#include "round_clock.hpp"
#include "run_data.hpp"
#include "run_setup.hpp"
#include "schema.hpp"
#include "sqlite.hpp"
#include "state_dir.hpp"
#include "thread_pool.hpp"
#include "unit_liveness.hpp"
#include "upload_stream.hpp"
#include "validation_loss.hpp"
#include "work_assignment.hpp"
#include "work_units.hpp"

#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace tandem::coord {

namespace fs = std::filesystem;

// The train data a run's row names (runs.train_bytes, train_sha256).
struct StoredTrainData {
    int64_t bytes = 0;
    std::string sha256;
};

struct EvalJob {
    int64_t round = 0;
    std::vector<float> weights;  // (P) the version the round produced
};

// A checked result on its way into the open round (commitEntries): its figures and its payload
// (a live upload's staging file, or, without a stream, the held file of its unit), which the
// aggregator adds to the round sum once the result is committed.
struct CommitEntry {
    int64_t wuId = 0, clientId = 0;
    int64_t tokens = 0;
    int32_t steps = 0;
    float lossFirst = 0, lossLast = 0;
    double norm = 0;
    double weight = 0;
    net::Sha256Digest payloadSha256{}, resultDigest{};
    net::Signature signature{};
    UploadStream* stream = nullptr;
    std::string note;  // why the weight is what it is, for the log
};

// A front end's --upload-base: "https://host[:port]", nothing after it (front_end.cpp).
Status checkUploadBase(const std::string& url);

// ---------------------------------------------------------------------------------------------

struct Coordinator::Impl {
    CoordinatorConfig cfg;
    Logger log;
    std::mutex mu;  // guards everything below, including the database connection
    StateDir dirs;
    Database db;
    RoundClock roundClock;         // whether this process closes rounds (round_clock.hpp)
    ServeLock serveLock;           // the only coordinator process on a PostgreSQL database
    bool roundClockHeld = true;    // at the last tick, for the log
    bool roundClockKnown = false;  // a tick has looked
    net::SigningKey key;
    ThreadPool pool;  // aggregation, outer step
    ClientRegistry clients;
    Metrics metrics;    // counters for /metrics (metrics.hpp)
    Leaderboard board;  // names, teams, totals (leaderboard.hpp)

    // The run (fixed when it was created).
    int64_t runId = 0;
    RunSettings run;
    int64_t P = 0;
    RunData data;                          // train shards and validation split, memory-mapped
    std::optional<NewRun> pendingRun;      // checked before the state directory was made
    std::unique_ptr<Tokenizer> tokenizer;  // the run's, when it has one: decodes samples

    // The open round.
    int64_t version = 0;  // the open round = the current weights version (committed)
    // (P) each; sum is the aggregator's between closes. In a sharded run, vel and sum are (N),
    // this shard's range of the round pieceRound.
    std::vector<float> theta, vel, sum;
    // Runs with weight deltas: the error-feedback residual e of this version (P); else empty.
    std::vector<float> residual;
    std::map<int64_t, ServedFile> weightFiles;
    // Runs with weight deltas: the delta to each of the last kKeptWeightDeltas versions.
    std::map<int64_t, ServedFile> deltaFiles;
    bool closing = false;  // a round close is writing files; commits wait for it
    // A close of this process lost its compare-and-set (rounds.cpp): another process moved the
    // run on, so this one's round state is stale; it closes and commits nothing more.
    bool fencedOut = false;
    std::condition_variable closeCv;
    // The Byzantine gate (result_gate.cpp): ||theta|| of thetaNormVersion, and the last outer
    // step theta_{v-1} - theta_v (P; empty before the first close).
    double thetaNorm = 0;
    int64_t thetaNormVersion = -1;
    // Replaced, never changed in place: an upload measures its cosine against the one it began
    // with while it streams, without the lock.
    std::shared_ptr<const std::vector<float>> lastOuterStep;

    // What heartbeats report (unit_liveness.hpp): in memory, written every
    // kLivenessFlushSeconds; a restart gives every assigned unit a fresh grace period.
    UnitLiveness liveness;
    int64_t startedUnix = 0;  // a unit without a pulse counts as alive since then
    int64_t livenessWrittenUnix = 0;

    // Sharded runs (shard_rounds.cpp; run.shards > 1): this process's range of the parameters
    // ([0, P) otherwise), and the round its pieces go into: version, or version + 1 once it has
    // stepped the closing round and the clock has not yet committed the next version.
    net::PieceRange ownRange;
    int64_t pieceRound = 0;
    // Its weights parts by version (part_file.hpp), blobs the other shards assemble from.
    std::map<int64_t, ServedFile> partFiles;
    // The whole weights of version + 1, assembled from the K parts before the commit.
    std::optional<ServedFile> assembled;
    std::map<int, std::string> shardUrls;  // https://host:port by shard (shard_processes)

    // Uploads in progress.
    std::set<int64_t> uploading;  // work unit ids
    std::map<int64_t, int> uploadsPerClient;
    int uploadsTotal = 0;
    // Adds committed results' payload files to `sum` in acceptance order (made once the run is
    // restored; stopped before the rest of Impl goes).
    std::unique_ptr<RoundAggregator> aggregator;

    // The ticker and the validator.
    std::thread ticker, validator;
    std::condition_variable tickCv, evalCv, evalDoneCv;
    std::deque<EvalJob> evalQueue;
    int evalBusy = 0;
    bool samplesTooSlowLogged = false;
    bool stopping = false;

    // The public run page (public_face.cpp), rebuilt when pageEvents, the version or the
    // board's generation moved, or after a minute (active donors, tokens per hour).
    uint64_t pageEvents = 0;              // validation losses and samples recorded
    std::array<uint64_t, 3> pageStamp{};  // version, pageEvents, board generation
    int64_t pageBuiltUnix = 0;
    std::string pageHtml;

    Impl(CoordinatorConfig c, Logger l, StateDir s, Database d, net::SigningKey k)
        : cfg(std::move(c)),
          log(std::move(l)),
          dirs(std::move(s)),
          db(std::move(d)),
          key(std::move(k)),
          pool(std::max(1, cfg.threads)),
          clients(
              db, [this] { return now(); }, log),
          board(db) {}

    int64_t now() const {
        if (cfg.clock)
            return cfg.clock();
        return std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    }
    // The run's result payloads: P values in its encoding.
    PayloadLayout payloadLayout() const { return {run.resultEncoding, P}; }
    bool sharded() const { return run.shards > 1; }
    // A sharded run's pieces at this process: its range's values.
    PayloadLayout pieceLayout() const {
        return {run.resultEncoding, ownRange.end - ownRange.begin};
    }
    int64_t pieceUploadBytes() const {
        return static_cast<int64_t>(net::kResultHeaderBytes) +
               run.shards * static_cast<int64_t>(net::kPieceEntryBytes) + pieceLayout().bytes();
    }
    // The round results go into: the open round, or a shard's pieceRound.
    int64_t sumRound() const { return sharded() ? pieceRound : version; }
    int64_t maxUploadBytes() const {
        return static_cast<int64_t>(net::kResultHeaderBytes) + payloadLayout().bytes();
    }

    // ---- run set-up (run_setup.cpp)

    Status restore();  // creates the run on first start
    // The stored run's row: runId, run, P and version set from it, and where its train data is;
    // whenMissing: the error when the database holds no run.
    Expected<StoredTrainData> readRunRow(const std::string& whenMissing);
    Expected<RunData> openTrainData(const StoredTrainData& stored);
    Status createRun();
    Expected<int64_t> insertRun(const RunSettings& settings, int64_t trainCount,
                                const std::string& trainSha, std::span<const ShardRow> rows);
    Expected<RunData> openTokenData(const std::string& trainSha);
    Status rebuildRoundSum();
    // Removes what no round needs, blobs no kept version or train shard references included.
    void cleanStaleFiles(bool startup);
    // The kept versions' weights and the train shards as blobs (at start: a state directory of
    // an older coordinator, or a stop between a version's weights and its blob).
    Status publishBlobs();

    // ---- work assignment (work_assignment.cpp), mu held

    // requestId: empty when none was given.
    Outcome<WorkOffer> assignWork(int64_t clientId, const net::WorkRequest& request,
                                  const std::string& requestId);
    // The unit this client was assigned for requestId, when it is still assigned (a repeated
    // request); none when there is none.
    std::optional<Outcome<WorkOffer>> repeatedRequest(int64_t clientId,
                                                      const std::string& requestId);
    Outcome<net::ProgressReply> heartbeat(int64_t clientId, int64_t workUnitId,
                                          const net::ProgressReport& report);

    // ---- Sybil limits on work (work_limits.cpp), mu held

    // newClientWorkUnits until a recent accepted result, then maxWorkUnitsPerClient.
    int workUnitLimit(int64_t clientId);
    // The manifest's start_blend for this client's next unit (docs/protocol.md): cfg.startBlend
    // when its previous unit of the run is not in the weights it gets now (still out, training
    // or uploading: the overlap; or its result waits in the open round); 1 when that unit was
    // trained but its result was lost (DiLoCo's rule for dropped results); otherwise 0.
    float startBlendFor(int64_t clientId);
    void abandonStalled();  // units whose step has not advanced for stallTimeoutSeconds

    // ---- liveness of assigned units (unit_liveness.cpp), mu held

    // At start: every assigned unit alive from now (heartbeats of before are not kept).
    Status restoreLiveness();
    // Writes changed liveness and clients' last-seen times in one transaction.
    void flushLiveness();
    int64_t lastSignOfLife(int64_t workUnitId) const;
    // Stops tracking a unit that ended, its last reported step written to work_units.
    void forgetLiveness(int64_t workUnitId);
    // Clients holding an assigned unit with a heartbeat within heartbeatTimeoutSeconds.
    std::set<int64_t> liveClients();

    // ---- a client's held units (held_units.cpp), mu held

    Outcome<net::HeldWorkUnits> heldWork(int64_t clientId);
    Outcome<void> releaseWork(int64_t clientId, int64_t workUnitId);

    // ---- the public face (public_face.cpp), mu held

    // Registration with the optional display name and team: all of it or nothing.
    Outcome<net::RegisterResponse> registerDonor(const net::RegisterRequest& request);
    const std::string& publicPage();  // rebuilt when stale (see pageStamp)

    // ---- result intake (result_intake.cpp)

    // The checks that need no body, then a slot (nullptr for a dry run). piece >= 0: piece k
    // of a sharded run's result (piece_intake.cpp).
    Outcome<std::unique_ptr<UploadSession::State>> beginUpload(int64_t clientId, int64_t workUnitId,
                                                               int64_t contentLength,
                                                               std::string_view signature,
                                                               bool dryRun, int piece = -1);
    // After the stream's checks: the checks against the round, then the commit.
    Outcome<std::string> commitResult(UploadSession::State& upload);
    CommitEntry entryOf(UploadSession::State& upload);  // weight and note left to the caller
    // mu held: the unit's state when its upload is about to commit; 409 work_unit_abandoned
    // once it was abandoned (or accepted, unless acceptedIsOpen: a sharded run's other piece).
    Outcome<std::string> unitStateAtCommit(int64_t workUnitId, bool acceptedIsOpen);
    // In a version's commit (rounds.cpp, shard_rounds.cpp): the units beyond the staleness
    // bound of newVersion abandoned, the transaction committed; the count for the metrics.
    Expected<int64_t> abandonStaleAndCommit(Transaction& tx, int64_t newVersion);
    // mu held, no close running: the payloads into the round, then in one transaction the rows
    // of every entry (in order) and whatever alsoInTransaction writes, then the round sum.
    // The signed receipts, in the entries' order.
    Outcome<std::vector<std::string>> commitEntries(
        std::span<CommitEntry> entries, const std::function<Status()>& alsoInTransaction);
    // Closes the round (or wakes the ticker to) once its results reach the quorum.
    void closeIfComplete(std::unique_lock<std::mutex>& lock);

    // ---- pieces of a sharded run's results (piece_intake.cpp), mu held unless said

    // What this shard holds of a unit's result: its piece (and receipt), and the digest of the
    // result another shard's piece accepted.
    struct PieceRecord {
        bool here = false;
        std::optional<net::Sha256Digest> resultDigest;
        std::string receipt;
    };
    Expected<PieceRecord> pieceRecord(int64_t workUnitId);
    // A whole result for a sharded run, a piece for another shard or for a run that is not
    // sharded: the refusal that says where it belongs.
    std::optional<Refusal> pieceRouteRefusal(int64_t workUnitId, int piece);
    // After the stream's checks (mu not held): the staleness, the gate, the commit.
    Outcome<std::string> commitPiece(UploadSession::State& upload);

    // ---- rounds of a sharded run (shard_rounds.cpp), mu held

    // At start: this shard's range, the round its pieces go into, its momentum and sum, and its
    // address in shard_processes.
    Status restoreShard();
    // The ticker's round work instead of the one-process close: the clock marks the round
    // closing, each shard steps its range, the parts are assembled and the clock commits.
    void shardTick(std::unique_lock<std::mutex>& lock, bool clock);
    Status markClosing();
    Status stepShard(std::unique_lock<std::mutex>& lock);
    // The whole weights of version v from the K parts recorded for it (mu released meanwhile).
    Status assembleVersion(std::unique_lock<std::mutex>& lock, int64_t v);
    Status commitShardedVersion();
    // Follows the run's committed version (its weights assembled or fetched first).
    Status adoptVersion(std::unique_lock<std::mutex>& lock);
    Status readShardUrls();
    // A committed version's whole weights, fetched from another shard (a shard that joins, or
    // lost its copy).
    Status fetchVersionWeights(std::unique_lock<std::mutex>& lock, int64_t v);
    Expected<std::vector<uint8_t>> fetchShardBlob(const std::string& url);

    // ---- replication spot-checks (replication.cpp), mu held

    // 403 client_blocked for a client blocked by its twins' disagreements.
    std::optional<Refusal> blockedRefusal(int64_t clientId);
    // For a client none of whose units has a twin: a twin of an open-round unit waiting for one.
    std::optional<Outcome<WorkOffer>> assignTwin(int64_t clientId, const std::string& requestId);
    // After the gate passed an upload of a unit with a live twin: held until the twin's result
    // arrives (503 awaiting_replica), or compared with the held one (both committed, or 422
    // replica_mismatch). None: the unit has no live twin and is committed alone.
    std::optional<Outcome<std::string>> pairResult(UploadSession::State& upload,
                                                   const GateVerdict& verdict,
                                                   std::unique_lock<std::mutex>& lock);
    // What an upload of a unit is answered before its body: 503 awaiting_replica while its
    // result is held, 422 replica_mismatch after its pair disagreed.
    std::optional<Refusal> twinRefusal(int64_t workUnitId);
    // Held results (of one unit, or 0: all) whose twin is gone are committed alone, those whose
    // own unit was abandoned or went stale are dropped. Not while a close runs.
    void settleHeld(int64_t workUnitId = 0);
    // At startup: held payload files without a row (a crash before the row's commit).
    void removeOrphanHeldFiles();
    // ||a - b|| / max(||a||, ||b||) of a held result's payload and an upload's staged one, read
    // in chunks (the held one checked against its SHA-256).
    Expected<double> twinDistanceOfFiles(int64_t heldWorkUnitId, const net::Sha256Digest& heldSha,
                                         const fs::path& staged);

    // ---- the Byzantine gate (result_gate.cpp), mu held

    GateConfig gateConfig() const;
    // The lower median of the norms of accepted results of the last referenceRounds rounds.
    // (not counting workUnitId's own result)
    double normReference(int64_t workUnitId = 0);
    GateVerdict gateResult(const UploadSession::State& upload);
    void rememberOuterStep(std::span<const float> before, std::span<const float> after);
    void restoreOuterStep();  // from the weights of version - 1, when they are still kept

    // ---- several processes on one database (front_end.cpp)

    bool frontEnd() const { return cfg.role == CoordinatorRole::Front; }
    // The aggregating process: the kept versions' files into their rounds' rows (at start; a
    // close writes its own with the new round).
    Status recordVersionFiles();
    // A front end's start instead of restore(): the run, its data, the version.
    Status restoreFront();
    // A front end, mu held: the run's version from the database and, when it moved, the files of
    // the versions its manifests name; the board's cache when results came in.
    Status syncVersion();
    void frontTick();  // mu held: syncVersion, liveness written every second
    // The clock holder on PostgreSQL, mu held: newer liveness that front ends wrote, into the
    // table in memory, before anything is timed out.
    void mergeDatabaseLiveness();
    // The URLs of a weights or delta blob: the coordinator's own path (a front end's: the
    // aggregating process's absolute URL), then the mirrors. Data blobs are every process's.
    std::vector<std::string> weightBlobUrls(const net::Sha256Digest& digest) const;
    int64_t frontContributors = -1;  // of the open round, at the last syncVersion
    int64_t frontRetainedUnix = 0;

    // ---- rounds (rounds.cpp)

    // mu held through `lock`; released while the new version is computed and written.
    Status closeRound(std::unique_lock<std::mutex>& lock);
    // A close that lost its compare-and-set: the new version's files removed, the process
    // fenced out; the error says why.
    Status loseClose(int64_t round, bool withDelta);
    int64_t roundQuorum();   // mu held: results that close the open round
    void abandonTimedOut();  // mu held
    // Abandons work units without heartbeats, closes the round when it is due.
    void tick();
    void tickerLoop();  // the ticker thread: tick() every second

    // ---- validation (validation_loss.cpp)

    // The validation loss of weights (P) on the run's validation text.
    Expected<double> evaluate(std::span<const float> weights) const;
    void recordValidationLoss(int64_t round, double loss);  // mu held
    // Evaluates the version a round produced (mu not held), records its loss and, for the
    // newest queued version, writes its samples.
    void evaluateJob(const EvalJob& job, bool newest);
    void validatorLoop();  // the validator thread

    // ---- samples (samples.cpp), run by the validator after a version's loss, mu not held

    void sampleVersion(int64_t sampled, std::span<const float> weights,
                       double forwardPositionsPerSecond);
    std::vector<ModelSample> latestSamples(int64_t limit);  // mu held
    // Blocks until every queued validation has been recorded (evaluates them itself without
    // background threads).
    void waitForValidation();

    // ---- metrics (coordinator.cpp), mu held

    MetricsGauges metricsGauges();
};

// An upload holding a slot (beginUpload); its destructor gives the slot back.
struct UploadSession::State {
    Coordinator::Impl* c;
    int64_t clientId, wuId, baseVersion;
    int piece = -1;  // a sharded run's piece k; -1: a whole result
    UploadStream stream;

    State(Coordinator::Impl* coordinator, int64_t client, int64_t workUnit, int64_t base,
          UploadExpectation expectation);
    ~State();
};

}  // namespace tandem::coord
