// The worker engine (DESIGN.md §6): a state machine on its own thread that registers with a
// coordinator, fetches work units, downloads weights and data, trains, and hands finished results
// to an upload thread, so the next unit can train while the previous one uploads.
//
// Everything it touches is injected: the coordinator (CoordinatorApi), the clock and time zone,
// the rule inputs, the backend factory and the data directory. It reports through an
// EngineObserver (called from the engine's threads; keep the callbacks short and never call
// Engine commands that wait from inside them) and answers snapshot() with a value type.
//
// Data directory:
//   identity.pem         Ed25519 key (0600)
//   registration.json    coordinator URL, client id, bearer token, pinned coordinator key (0600)
//   ledger.db            the ledger (core/ledger.hpp)
//   cache/<sha256>       downloaded weights and data ranges, by content hash
//   held_weights.json    run, version and SHA-256 of the weights in cache/ last trained from,
//                        kept to rebuild the next version from weight deltas (held_weights.hpp)
//   work/<id>/           the unit in training: manifest.json, progress.json, ckpt-<step>.ckpt
//                        (and delta-<version> while its weights are rebuilt from deltas)
//   results/<id>.result  finished results waiting for their receipt (+ <id>.json)
//   work_request.json    the request id of a work request whose answer is not recorded yet
//   hold.json            the donor's pause or snooze (with its end), kept across restarts
//   optimizer.ckpt/json  AdamW moments kept across units of the same run on the same device
//                        (in memory between units; here on the checkpoint clock and on a hold
//                        or quit)
#pragma once

#include "backend.hpp"
#include "clock.hpp"
#include "coordinator_api.hpp"
#include "expected.hpp"
#include "ledger.hpp"
#include "next_action.hpp"
#include "problem.hpp"
#include "rules.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace tandem::core {

enum class EngineState {
    Idle,         // nothing to do right now (no work offered; retrying later)
    Fetching,     // registering or asking for work
    Downloading,  // weights and data
    Training,
    Uploading,  // only waiting for results to upload
    Paused,
    Snoozed,
    Waiting,  // a rule holds it back; the reason names the rule
    Backoff,  // after an error, until nextActionAtMs
    Stopped,  // the thread has ended (quit, or --max-work-units reached)
};
const char* toString(EngineState state);

// What the machine says now, for the rules; the engine adds the time and the bytes of today.
struct RuleProbe {
    std::optional<int64_t> idleSeconds;
    PowerSource power = PowerSource::Unknown;
    std::optional<double> temperatureC;
};
using RuleProbeFn = std::function<RuleProbe()>;

// Makes the backend for a device name ("cpu", "cuda:0").
using BackendFactory = std::function<Expected<std::unique_ptr<Backend>>(const std::string& device)>;

struct EngineConfig {
    std::filesystem::path dataDir;
    std::string coordinatorUrl;     // the registration belongs to it
    std::string device = "cpu";     // resolved device name for the backend factory
    std::string deviceDescription;  // sent with work requests ("cuda:0 NVIDIA ..."); default device
    int64_t deviceMemoryBytes = 0;
    std::string clientName = "tandem-worker";  // the device's name; never shown publicly
    // The donor's public display name and team (net/donor_profile.hpp), sent after registering
    // (profile_sync.hpp); none: left as the coordinator has them; "": removed.
    std::optional<std::string> displayName, team;
    std::string hardwareSummary;
    RulesConfig rules;
    int maxWorkUnits = 0;        // > 0: stop once this many units are trained and settled
    bool overlapUploads = true;  // train the next unit while a result uploads (staleness 1)
    // With overlapUploads: ask for and download the next unit while this one trains
    // (core/unit_prefetch.hpp).
    bool prefetch = true;

    int64_t checkpointIntervalMs = 5 * 60 * 1000;  // while training, and the kept moments
    int checkpointEverySteps = 0;                  // > 0: also every N steps (tests)
    int64_t rulesCheckIntervalMs = 10000;          // while training; 0: every step
    int64_t sampleIntervalMs = 60000;              // device samples into the ledger
    int64_t pollIntervalMs = 1000;  // real time between re-checks while waiting for the clock

    int64_t backoffInitialMs = 2000;
    int64_t backoffMaxMs = 5 * 60 * 1000;
    double backoffJitter = 0.5;  // the wait is b reduced by up to this fraction of b
    int64_t maxRetryAfterMs = 60 * 60 * 1000;
    uint64_t jitterSeed = 0;  // 0: from the CSPRNG

    AdamWConfig adamw;

    // Tests: called at named points ("download", "checkpoint", "result", "upload", "receipt":
    // mid-download, between a checkpoint file and its progress.json, between the result file and
    // the ledger, mid-upload, between the coordinator's answer and the stored receipt; "moments":
    // the kept moments written), so a test can kill the process exactly there (tandem-worker:
    // TANDEM_TEST_KILL_AT).
    std::function<void(const char* point)> testHook;
};

class EngineObserver {
  public:
    virtual ~EngineObserver() = default;
    virtual void stateChanged(EngineState /*state*/, const std::string& /*reason*/) {}
    // After every training step and during transfers.
    virtual void progress(const std::string& /*workUnitId*/, int64_t /*step*/,
                          int64_t /*innerSteps*/, float /*loss*/) {}
    virtual void sample(const DeviceSample& /*sample*/) {}
    virtual void logLine(EventLevel /*level*/, const std::string& /*message*/) {}
    // A result was settled: accepted (receipt stored) or refused.
    virtual void workUnitSettled(const std::string& /*workUnitId*/, WorkUnitState /*state*/) {}
};

struct CurrentWorkUnit {
    std::string id;
    int64_t runId = 0;
    int64_t baseVersion = 0;
    std::string model;  // "L=2 NH=4 C=128 T=64 V=256"
    int64_t step = 0;
    int64_t innerSteps = 0;  // H
    int64_t tokens = 0;
    std::optional<float> lossFirst;
    std::optional<float> lossLast;
    std::optional<int64_t> etaMs;  // until training ends, from the measured step time
    // The fewest steps the coordinator accepts as a partial result (its heartbeat's answer):
    // from then on "pause now" uploads what is done; none: not stated (yet).
    std::optional<int> minSteps;
    int64_t downloadBytesDone = 0;
    int64_t downloadBytesTotal = 0;
};

struct UploadInFlight {
    std::string id;
    int64_t bytesDone = 0;
    int64_t bytesTotal = 0;
    double bytesPerSecond = 0;
};

struct LastUpload {
    std::string id;
    int64_t atMs = 0;
    WorkUnitState state = WorkUnitState::Accepted;  // Accepted, Rejected or Abandoned
    std::string detail;                             // why, when refused
    int64_t round = 0;
    double credit = 0;
};

// Everything the UI shows, as one consistent value. The UI words the codes (state, hold, next,
// problem); the English texts (reason, stateText, nextAction) are for the log and
// tandem-worker's status.
struct EngineSnapshot {
    EngineState state = EngineState::Idle;
    std::string reason;        // "Waiting: on battery", the error of a Backoff, ...
    std::string stateText;     // "Training", "Waiting: on battery", "Snoozed until 18:00"
    std::optional<Hold> hold;  // Waiting: the rule that holds, with its figures
    // The last rule check got no temperature of the device in use (a CPU, a GPU without a
    // sensor): a temperature limit cannot be applied. False before the first check.
    bool temperatureUnknown = false;
    std::string device;
    bool registered = false;
    bool finishThenPause = false;
    std::optional<int64_t> snoozedUntilMs;
    std::optional<CurrentWorkUnit> current;
    double tokensPerSecond = 0;  // of the latest steps
    std::optional<float> stepLoss;
    std::optional<UploadInFlight> upload;
    int pendingUploads = 0;  // results on disk waiting for a receipt
    std::optional<LastUpload> lastUpload;
    NextAction next;
    std::string nextAction;                 // describeNextAction(next): "try again at 12:05", ...
    std::optional<int64_t> nextActionAtMs;  // next.atMs
    // In Backoff: what kind of trouble (problem.hpp; the UI words it, calm for a transient one,
    // "needs attention" for one the donor must fix), and the failure's own words for a details
    // view and the log. None in every other state.
    Problem problem = Problem::None;
    std::string problemDetail;
    Totals totals;                 // from the ledger
    int workUnitsThisSession = 0;  // trained since start
    std::string lastError;
};

class Engine {
  public:
    struct Dependencies {
        CoordinatorApi* api = nullptr;
        const Clock* clock = nullptr;
        const TimeZone* zone = nullptr;
        BackendFactory backends;
        RuleProbeFn probe;                   // may be empty: nothing holds for the machine
        EngineObserver* observer = nullptr;  // may be null
    };

    // Creates the data directory (0700), loads or makes the identity, opens the ledger.
    static Expected<std::unique_ptr<Engine>> create(EngineConfig config, Dependencies deps);
    // Quits (checkpointing) and joins.
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    void start();  // starts the threads
    // Commands: asynchronous, take effect at the next step boundary. Pause and snooze are kept
    // in hold.json, so a restart (or a start at login) begins held.
    // pause, snooze and quit stop a unit in training at the current step: with the coordinator's
    // stated minimum of steps done it is uploaded as a partial result, else checkpointed to
    // resume while the coordinator still wants it (unit_runner.hpp, choiceOnStop).
    void pause();
    void resume();  // also ends a snooze
    void snooze(int64_t untilMs);
    void setFinishThenPause(bool on = true);
    void quit();  // checkpoint and stop; wait() joins
    void wake();  // re-check now (after a clock change or new rule inputs)
    void setRules(const RulesConfig& rules);
    void wait();  // until both threads have ended

    EngineSnapshot snapshot() const;
    Ledger& ledger() { return *m_ledger; }
    const net::PublicKey& publicKey() const { return m_publicKey; }
    bool finished() const;  // the thread has ended

    // Tests: stop like a crash at the next step boundary or transfer callback: no checkpoint, no
    // ledger writes afterwards.
    void crashForTesting();

    struct Impl;

  private:
    Engine() = default;
    std::unique_ptr<Impl> m_impl;
    std::unique_ptr<Ledger> m_ledger;
    net::PublicKey m_publicKey{};
};

// The wait before retry n (1-based): min(max, initial * 2^(n-1)) reduced by jitter * u * that,
// u in [0, 1). retryAfterMs, when given, replaces it (capped at maxRetryAfterMs).
int64_t backoffDelayMs(const EngineConfig& config, int attempt, double u,
                       std::optional<int64_t> retryAfterMs);

// base/file_io's private writer for text: path.tmp created 0600, fsync, rename, fsync of the
// directory; the temporary is removed on every failure.
Status writePrivateFileAtomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace tandem::core

namespace tandem::core {

// The snapshot as a few readable lines ("state: Training", "work unit: 3, step 12 of 50, ...")
// for `tandem-worker status` and logs.
std::string formatSnapshot(const EngineSnapshot& snapshot, int64_t nowMs, const TimeZone& zone);

}  // namespace tandem::core
