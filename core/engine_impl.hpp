// Internal to core/: Engine::Impl and the types its parts share. Not part of the public API.
#pragma once

#include "checkpoint.hpp"
#include "engine.hpp"
#include "engine_backoff.hpp"
#include "engine_shared.hpp"
#include "random.hpp"
#include "registration.hpp"
#include "result_uploader.hpp"
#include "result_writer.hpp"
#include "rule_gate.hpp"
#include "unit_runner.hpp"
#include "work_fetcher.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <thread>

namespace tandem::core {

struct Engine::Impl : EngineShared {
    using EngineShared::EngineShared;

    RuleGate ruleGate{*this};
    EngineBackoff backoff{*this};
    Registrar registrar{*this, backoff};
    ResultUploader uploader{*this, ruleGate, registrar};
    WorkFetcher fetcher{*this, ruleGate, backoff, registrar};
    ResultWriter writer{*this};
    UnitRunner runner{*this, ruleGate, backoff, writer};

    // Engine thread only.
    std::optional<ActiveUnit> active;

    std::thread engineThread;

    // --- registration (registration.cpp) ---

    // --- the engine thread (engine.cpp) ---
    void engineMain();
};

}  // namespace tandem::core
