// Internal to core/: Engine::Impl and the types its parts share. Not part of the public API.
#pragma once

#include "checkpoint.hpp"
#include "engine.hpp"
#include "random.hpp"

#include <nlohmann/json.hpp>

#include <atomic>

namespace tandem::core {

// Thrown by crashForTesting's checks: unwinds the engine thread without writing anything.
struct CrashStop {};

Status writeTextAtomically(const std::filesystem::path& path, const std::string& text);
Expected<std::string> readText(const std::filesystem::path& path);
Expected<nlohmann::json> readJson(const std::filesystem::path& path);
bool fileHasDigest(const std::filesystem::path& path, const net::Sha256Digest& digest);
std::string wuKey(int64_t id);

struct Registration {
    std::string coordinatorUrl;
    int64_t clientId = 0;
    std::string token;
    net::PublicKey coordinatorKey{};
};

// A finished result on disk, waiting for its receipt.
struct PendingResult {
    int64_t workUnitId = 0;
    std::string uploadUrl;
    std::filesystem::path file;
    std::filesystem::path infoFile;
    int64_t bytes = 0;
    net::Sha256Digest digest{};
    net::Signature signature{};
    int64_t steps = 0;
    float lossLast = 0;
    bool stillWantedChecked = false;  // asked the coordinator before the first upload
};

// The unit in training.
struct ActiveUnit {
    net::Manifest manifest;
    std::filesystem::path dir;
    bool downloaded = false;
    int64_t step = 0;
    uint64_t samplerState = 0;
    std::optional<float> lossFirst, lossLast;
    double lossSum = 0;
    int64_t tokens = 0;
    double computeSeconds = 0;
    std::string checkpointFile;  // within dir; empty: start from the downloaded weights
};

enum class TrainOutcome { Finished, Interrupted, Abandoned, Failed, Retry };

struct Engine::Impl {
    EngineConfig cfg;
    Dependencies deps;
    Ledger* ledger = nullptr;
    std::optional<net::SigningKey> key;
    // Device samples are spaced by the clock across work units (units are often shorter than
    // the interval); set when training first starts. Engine thread only.
    std::optional<int64_t> lastSampleMs;

    mutable std::mutex mu;
    std::condition_variable cv;
    uint64_t generation = 0;  // bumped by every command, wake and settled upload
    bool pauseRequested = false;
    bool quitRequested = false;
    bool finishFlag = false;
    std::optional<int64_t> snoozeUntil;
    std::atomic<bool> crashed{false};
    bool threadEnded = false;
    bool uploadStop = false;
    RulesConfig rules;
    EngineSnapshot snap;
    std::deque<PendingResult> queue;

    // Engine thread only.
    std::optional<Registration> reg;
    std::optional<ActiveUnit> active;
    std::unique_ptr<Backend> backend;
    ModelConfig backendModel;
    int backendB = 0, backendT = 0;
    Rng jitter{1};
    int backoffAttempt = 0;
    int64_t notBeforeMs = 0;
    EngineState notBeforeState = EngineState::Backoff;
    std::string notBeforeReason;
    std::atomic<bool> heldByTemperature{false};  // written by the engine thread, read by both
    int64_t lastRulesCheckMs = INT64_MIN;
    double measuredTokensPerSecond = 0;
    int trainedThisSession = 0;
    int settledThisSession = 0;

    std::thread engineThread;
    std::thread uploadThread;

    // --- helpers ---
    int64_t now() const { return deps.clock->nowMs(); }
    std::filesystem::path dir() const { return cfg.dataDir; }

    void hook(const char* point) const {
        if (cfg.testHook)
            cfg.testHook(point);
    }

    void checkCrash() const {
        if (crashed.load())
            throw CrashStop{};
    }

    void log(EventLevel level, const std::string& message);
    void notifyAll();
    std::string describe(int64_t atMs) const { return describeLocalTime(atMs, now(), *deps.zone); }
    void setState(EngineState state, std::string reason, std::string nextAction = {},
                  std::optional<int64_t> nextAtMs = std::nullopt);
    // Waits one poll interval of real time, or less when a command arrives or the clock reaches
    // untilMs.
    void waitOnce(std::optional<int64_t> untilMs = std::nullopt);
    void refreshTotals();
    void recordTransfer(Direction direction, const std::string& purpose, int64_t bytes,
                        int64_t startMs, bool ok, int64_t workUnitId, const std::string& detail);
    void transition(int64_t workUnitId, WorkUnitState state, const std::string& detail = {});
    void recordNewUnit(const net::Manifest& m);

    // --- rules (rule_gate.cpp) ---
    RulesVerdict evaluate(int64_t nextDownloadBytes, int64_t nextUploadBytes, bool forUpload);
    // Blocks while paused, snoozed or held by a rule. onHold runs once before the first wait
    // (the checkpoint of a unit in training). haveUnit: a unit is in hand, so "finish then
    // pause" does not pause yet. Returns false when the engine is to quit.
    bool gate(bool haveUnit, int64_t nextDownloadBytes, const std::function<void()>& onHold,
              bool forceRules);

    // --- backoff (engine_backoff.cpp) ---
    void backoff(const std::string& what, const ApiFailure& failure);
    void backoffLocal(const std::string& message);

    // --- registration (registration.cpp) ---
    std::filesystem::path registrationFile() const { return dir() / "registration.json"; }
    void loadRegistration();
    bool doRegister();
    void dropRegistration(const std::string& why);

    // --- recovery after a restart (recovery.cpp) ---
    Expected<PendingResult> loadPending(const std::filesystem::path& infoFile);
    void removePending(const PendingResult& p);
    void recover();

    // --- fetching and downloading (work_fetcher.cpp) ---
    void fetch();
    std::filesystem::path weightsPath(const net::Manifest& m) const {
        return dir() / "cache" / (net::toHex(m.weightsSha256) + ".weights");
    }
    std::filesystem::path dataPath(const net::Manifest& m) const {
        return dir() / "cache" / (net::toHex(m.dataSha256) + ".data");
    }
    bool download();
    CurrentWorkUnit currentInfo() const;

    // --- training (unit_runner.cpp) ---
    std::filesystem::path optimizerFile() const { return dir() / "optimizer.ckpt"; }
    std::filesystem::path optimizerInfo() const { return dir() / "optimizer.json"; }
    std::optional<OptimizerState> carriedMoments(const net::Manifest& m);
    Status saveMoments(const net::Manifest& m, const Checkpoint& ck);
    Status checkpoint(uint64_t samplerState);
    void failUnit(const std::string& why);
    void abandonUnit(const std::string& why);
    // While held, the backend's memory (parameters, moments, activations: tens of MB to GB) goes
    // back to the system. Between units it holds nothing unsaved (the moments are kept on disk);
    // during one, train() releases it only once the hold's checkpoint is written.
    void releaseBackend();
    Status ensureBackend(const ModelConfig& model, int B, int T);
    TrainOutcome train();

    // --- the result (result_writer.cpp) ---
    TrainOutcome finishUnit(const std::vector<float>& start);

    // --- the engine thread (engine.cpp) ---
    void engineMain();

    // --- the upload thread (result_uploader.cpp) ---
    void uploadMain();
    void settle(const PendingResult& p, WorkUnitState state, const std::string& detail,
                const UploadOutcome* outcome);
};

}  // namespace tandem::core
