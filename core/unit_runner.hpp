// Training one work unit: the backend for the unit's model and shape (kept across units, given
// back while the engine is held), the start weights or the unit's checkpoint, the step loop with
// its progress for the heartbeat thread (whose answer may abandon the unit), checkpoints by the
// clock or every N steps and at every hold, device samples, and the result through the
// ResultWriter. The AdamW moments stay in the backend from one unit of a run to the next and go to
// disk on the checkpoint clock and before the backend is given back. Internal to core/.
#pragma once

#include "backend.hpp"
#include "engine_backoff.hpp"
#include "engine_shared.hpp"
#include "result_writer.hpp"
#include "rule_gate.hpp"
#include "unit_files.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <span>

namespace tandem::core {

enum class TrainOutcome {
    Finished,     // trained; the result is queued
    Interrupted,  // held or quitting, checkpointed: train again later
    Abandoned,    // the coordinator abandoned it
    Failed,       // nothing sent
    Retry,        // its downloads were unusable: download again (backing off)
};

// What becomes of a unit the donor stops (pause now, snooze, quit) after `stepsDone` of its
// `innerSteps`: a pseudo-gradient after h < H steps is a valid, smaller contribution, so it is
// uploaded as a partial result once it has the coordinator's stated minimum of steps; below
// that, or when the coordinator stated none, the unit's checkpoint is kept and the unit resumes
// when the coordinator still wants it (asked before training on).
enum class StopChoice { UploadPartial, KeepCheckpoint };
StopChoice choiceOnStop(int64_t stepsDone, int64_t innerSteps, std::optional<int> minSteps);

class UnitRunner {
  public:
    UnitRunner(EngineShared& shared, RuleGate& gate, EngineBackoff& backoff, ResultWriter& writer)
        : m_shared(shared), m_gate(gate), m_backoff(backoff), m_writer(writer) {}

    // Engine thread, the unit downloaded. After Finished, Abandoned or Failed the unit's
    // directory is gone and the caller drops the unit.
    TrainOutcome train(ActiveUnit& unit);
    // While held, the backend's memory (parameters, moments, activations: tens of MB to GB) goes
    // back to the system. Between units the moments it holds go to disk first (saveMoments);
    // during one, train() releases it only once the hold's checkpoint is written.
    void releaseBackend();
    // The AdamW moments of the last finished unit, kept in the backend for the next unit of the
    // run, to disk (optimizer.ckpt) if they are not there yet: on the checkpoint clock after a
    // unit, and before the backend goes. A crash loses at most checkpointIntervalMs of them (the
    // next unit starts from the older ones); results and units are never at stake.
    void saveMoments();
    // The measured speed of the latest steps (0 before the first).
    double tokensPerSecond() const { return m_tokensPerSecond; }
    // Called after every training step with the time the unit's remaining steps will take at
    // the measured speed (the engine starts the next unit's prefetch from it).
    using StepHook = std::function<void(const ActiveUnit& unit, int64_t etaMs)>;
    void setStepHook(StepHook hook) { m_stepHook = std::move(hook); }

  private:
    TrainOutcome trainSteps(ActiveUnit& unit);
    // The unit's progress to the heartbeat thread (core/heartbeat_sender.hpp).
    void reportProgress(const ActiveUnit& unit);
    Status ensureBackend(const ModelConfig& model, int B, int T);
    // A fresh unit's first weights into the backend: the assigned ones (P), or with the
    // manifest's start_blend b the eager start (1 - b) x assigned + b x this run's last end
    // point, where the backend still holds it. The result stays relative to assigned.
    Status loadStart(const net::Manifest& m, std::span<const float> assigned);
    // The backend's weights and moments into ckpt-<step>.ckpt, then progress.json naming it.
    Status checkpoint(ActiveUnit& unit, uint64_t samplerState);
    void failUnit(const ActiveUnit& unit, const std::string& why);
    void abandonUnit(const ActiveUnit& unit, const std::string& why);
    void recordSample();

    EngineShared& m_shared;
    RuleGate& m_gate;
    EngineBackoff& m_backoff;
    ResultWriter& m_writer;
    std::unique_ptr<Backend> m_backend;
    ModelConfig m_backendModel;
    int m_backendB = 0, m_backendT = 0;
    double m_tokensPerSecond = 0;
    StepHook m_stepHook;
    // The run whose last finished unit's moments the backend holds, for the next unit.
    std::optional<int64_t> m_momentsRun;
    std::optional<net::Manifest> m_unsavedMoments;  // that unit, while they are not on disk
    std::optional<int64_t> m_lastMomentsSaveMs;
    // Device samples are spaced by the clock across work units (units are often shorter than
    // the interval); set when training first starts.
    std::optional<int64_t> m_lastSampleMs;
};

}  // namespace tandem::core
