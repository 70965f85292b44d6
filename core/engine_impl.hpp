// Internal to core/: Engine::Impl and the types its parts share. Not part of the public API.
#pragma once

#include "checkpoint.hpp"
#include "engine.hpp"
#include "engine_backoff.hpp"
#include "engine_shared.hpp"
#include "random.hpp"
#include "registration.hpp"
#include "result_uploader.hpp"
#include "rule_gate.hpp"
#include "work_fetcher.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <thread>

namespace tandem::core {

enum class TrainOutcome { Finished, Interrupted, Abandoned, Failed, Retry };

struct Engine::Impl : EngineShared {
    using EngineShared::EngineShared;

    RuleGate ruleGate{*this};
    EngineBackoff backoff{*this};
    Registrar registrar{*this, backoff};
    ResultUploader uploader{*this, ruleGate, registrar};
    WorkFetcher fetcher{*this, ruleGate, backoff, registrar};

    // Device samples are spaced by the clock across work units (units are often shorter than
    // the interval); set when training first starts. Engine thread only.
    std::optional<int64_t> lastSampleMs;

    // Engine thread only.
    std::optional<ActiveUnit> active;
    std::unique_ptr<Backend> backend;
    ModelConfig backendModel;
    int backendB = 0, backendT = 0;
    double measuredTokensPerSecond = 0;

    std::thread engineThread;

    // --- registration (registration.cpp) ---

    // --- recovery after a restart (recovery.cpp) ---
    void recover();

    // --- training (unit_runner.cpp) ---
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
};

}  // namespace tandem::core
