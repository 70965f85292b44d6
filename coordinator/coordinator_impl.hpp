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
#include "result_format.hpp"
#include "robust_gate.hpp"
#include "run_data.hpp"
#include "run_setup.hpp"
#include "schema.hpp"
#include "sqlite.hpp"
#include "state_dir.hpp"
#include "thread_pool.hpp"
#include "upload_stream.hpp"
#include "validation_loss.hpp"
#include "work_assignment.hpp"
#include "work_units.hpp"

#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace tandem::coord {

namespace fs = std::filesystem;

struct EvalJob {
    int64_t round = 0;
    std::vector<float> weights;  // (P) the version the round produced
};

// ---------------------------------------------------------------------------------------------

struct Coordinator::Impl {
    CoordinatorConfig cfg;
    Logger log;
    std::mutex mu;  // guards everything below, including the database connection
    StateDir dirs;
    Database db;
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
    int64_t version = 0;                 // the open round = the current weights version
    std::vector<float> theta, vel, sum;  // (P) each
    std::map<int64_t, ServedFile> weightFiles;
    bool closing = false;  // a round close is writing files; commits wait for it
    std::condition_variable closeCv;
    // The Byzantine gate (result_gate.cpp): ||theta|| of thetaNormVersion, and the last outer
    // step theta_{v-1} - theta_v (P; empty before the first close).
    double thetaNorm = 0;
    int64_t thetaNormVersion = -1;
    std::vector<float> lastOuterStep;

    // Progress reported by heartbeats (work_limits.cpp): a unit's step and since when; in memory,
    // so a restart gives every unit a fresh --stall-timeout.
    struct Progress {
        int64_t step = 0, since = 0;
    };
    std::map<int64_t, Progress> progressSeen;

    // Uploads in progress.
    std::set<int64_t> uploading;  // work unit ids
    std::map<int64_t, int> uploadsPerClient;
    int uploadsTotal = 0;
    std::vector<std::vector<float>> scratchPool;

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
    int64_t maxUploadBytes() const { return static_cast<int64_t>(net::kResultHeaderBytes) + 2 * P; }

    // ---- run set-up (run_setup.cpp)

    Status restore();  // creates the run on first start
    Status createRun();
    Expected<int64_t> insertRun(const RunSettings& settings, int64_t trainCount,
                                const std::string& trainSha, std::span<const ShardRow> rows);
    Expected<RunData> openTokenData(const std::string& trainSha);
    Status rebuildRoundSum();
    void cleanStaleFiles(bool startup);

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
    void noteProgress(int64_t workUnitId, int64_t step);
    void abandonStalled();  // units whose step has not advanced for stallTimeoutSeconds

    // ---- a client's held units (held_units.cpp), mu held

    Outcome<net::HeldWorkUnits> heldWork(int64_t clientId);
    Outcome<void> releaseWork(int64_t clientId, int64_t workUnitId);

    // ---- the public face (public_face.cpp), mu held

    // Registration with the optional display name and team: all of it or nothing.
    Outcome<net::RegisterResponse> registerDonor(const net::RegisterRequest& request);
    const std::string& publicPage();  // rebuilt when stale (see pageStamp)

    // ---- result intake (result_intake.cpp)

    // The checks that need no body, then a slot (nullptr for a dry run).
    Outcome<std::unique_ptr<UploadSession::State>> beginUpload(int64_t clientId, int64_t workUnitId,
                                                               int64_t contentLength,
                                                               std::string_view signature,
                                                               bool dryRun);
    // After the stream's checks: the checks against the round, then the commit.
    Outcome<std::string> commitResult(UploadSession::State& upload);

    // ---- the Byzantine gate (result_gate.cpp), mu held

    GateConfig gateConfig() const;
    // The lower median of the norms of accepted results of the last referenceRounds rounds.
    double normReference();
    GateVerdict gateResult(const UploadSession::State& upload);
    void rememberOuterStep(std::span<const float> before, std::span<const float> after);
    void restoreOuterStep();  // from the weights of version - 1, when they are still kept

    std::vector<float> takeScratch();  // mu held

    // ---- rounds (rounds.cpp)

    // mu held through `lock`; released while the new version is computed and written.
    Status closeRound(std::unique_lock<std::mutex>& lock);
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
    UploadStream stream;

    State(Coordinator::Impl* coordinator, int64_t client, int64_t workUnit, int64_t base,
          UploadExpectation expectation);
    ~State();
};

}  // namespace tandem::coord
