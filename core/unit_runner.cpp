// Training one work unit: backend, step loop, progress for the heartbeats, checkpoints.
#include "unit_runner.hpp"

#include "corpus.hpp"
#include "file_io.hpp"
#include "memory_estimate.hpp"
#include "unit_end.hpp"

#include <chrono>
#include <cmath>

namespace tandem::core {

namespace fs = std::filesystem;

StopChoice choiceOnStop(int64_t stepsDone, int64_t innerSteps, std::optional<int> minSteps) {
    if (minSteps && *minSteps > 0 && stepsDone >= *minSteps && stepsDone < innerSteps)
        return StopChoice::UploadPartial;
    return StopChoice::KeepCheckpoint;
}

Status UnitRunner::checkpoint(ActiveUnit& a, uint64_t samplerState) {
    if (m_shared.crashed.load())
        return {};
    const ModelConfig& model = a.manifest.model;
    Checkpoint ck;
    ck.config = model;
    ck.parameters.resize(static_cast<size_t>(model.parameterCount()));
    if (auto st = m_backend->storeParameters(ck.parameters); !st)
        return st;
    auto opt = m_backend->storeOptimizerState();
    if (!opt)
        return opt.error();
    ck.optimizer = std::move(*opt);
    const std::string name = DataDir::checkpointName(a.step);
    if (auto st = saveCheckpoint(a.dir / name, ck); !st)
        return st;
    m_shared.hook("checkpoint");
    m_shared.checkCrash();
    UnitProgress progress = a;
    progress.samplerState = samplerState;
    progress.checkpointFile = name;
    if (auto st = writeProgress(DataDir::progressFile(a.dir), progress); !st)
        return st;
    m_shared.checkCrash();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(a.dir, ec)) {
        const std::string f = e.path().filename().string();
        if (DataDir::isCheckpointName(f) && f != name)
            fs::remove(e.path(), ec);
    }
    a.samplerState = samplerState;
    a.checkpointFile = name;
    (void)m_shared.ledger.updateWorkUnitProgress(wuKey(a.manifest.workUnitId), a.tokens, a.step,
                                                 a.computeSeconds, a.lossFirst, a.lossLast,
                                                 m_shared.now());
    return {};
}

void UnitRunner::failUnit(const ActiveUnit& unit, const std::string& why) {
    const int64_t id = unit.manifest.workUnitId;
    m_shared.log(EventLevel::Error,
                 "work unit " + wuKey(id) + " failed: " + why + "; nothing was sent");
    m_shared.transition(id, WorkUnitState::Failed, why);
    std::error_code ec;
    fs::remove_all(unit.dir, ec);
    std::lock_guard lock(m_shared.mu);
    m_shared.snap.current.reset();
}

void UnitRunner::abandonUnit(const ActiveUnit& unit, const std::string& why) {
    const int64_t id = unit.manifest.workUnitId;
    m_shared.log(EventLevel::Info, "work unit " + wuKey(id) + " abandoned: " + why);
    m_shared.transition(id, WorkUnitState::Abandoned, unitEndCode(classifyAbandonReason(why)));
    std::error_code ec;
    fs::remove_all(unit.dir, ec);
    std::lock_guard lock(m_shared.mu);
    m_shared.snap.current.reset();
}

void UnitRunner::saveMoments() {
    if (!m_unsavedMoments || !m_backend || m_backendB == 0 || m_shared.crashed.load())
        return;
    const net::Manifest& m = *m_unsavedMoments;
    Checkpoint ck;
    ck.config = m.model;
    ck.parameters.resize(static_cast<size_t>(m.model.parameterCount()));
    if (m_backend->storeParameters(ck.parameters)) {
        if (auto opt = m_backend->storeOptimizerState()) {
            ck.optimizer = std::move(*opt);
            if (auto st = core::saveMoments(m_shared.files, m, m_shared.cfg.device, ck); !st)
                m_shared.log(EventLevel::Warning,
                             "cannot keep the AdamW moments: " + st.error().message);
            else
                m_shared.hook("moments");
        }
    }
    m_unsavedMoments.reset();
    m_lastMomentsSaveMs = m_shared.now();
}

void UnitRunner::releaseBackend() {
    saveMoments();
    m_momentsRun.reset();
    m_backend.reset();
    m_backendB = 0;
}

Status UnitRunner::ensureBackend(const ModelConfig& model, int B, int T) {
    if (!m_backend) {
        auto b = m_shared.deps.backends(m_shared.cfg.device);
        if (!b)
            return b.error();
        m_backend = std::move(*b);
        m_backendB = 0;
    }
    if (m_backendB == B && m_backendT == T && m_backendModel == model)
        return {};
    // Free the last unit's buffers first: the memory check below counts them as taken.
    if (m_backendB != 0) {
        releaseBackend();
        return ensureBackend(model, B, T);
    }
    // The worker's own copies live in RAM; with a CPU backend the whole unit does.
    const bool hostBackend = m_backend->name().starts_with("cpu");
    if (auto st = checkUnitFits(model, B, T, hostBackend, availableHostBytes(), "this computer");
        !st)
        return st;
    if (auto st = m_backend->canRun(model, B, T); !st)
        return st;
    if (auto st = m_backend->allocate(model, B, T); !st)
        return st;
    m_backendModel = model;
    m_backendB = B;
    m_backendT = T;
    return {};
}

Status UnitRunner::loadStart(const net::Manifest& m, std::span<const float> assigned) {
    // The backend still holds this run's last end point only after a finished unit of the run
    // (a hold, another shape or a failure gives it back): otherwise the assigned weights.
    if (m.startBlend <= 0 || m_momentsRun != m.runId)
        return m_backend->loadParameters(assigned);
    std::vector<float> start(assigned.size());
    if (auto st = m_backend->storeParameters(start); !st)
        return st;
    const float b = m.startBlend;
    for (size_t i = 0; i < start.size(); ++i)
        start[i] = assigned[i] + b * (start[i] - assigned[i]);
    m_shared.log(EventLevel::Debug, "work unit " + wuKey(m.workUnitId) + ": starts from " +
                                        std::to_string(b) + " x its own last end point + " +
                                        std::to_string(1 - b) + " x version " +
                                        std::to_string(m.baseVersion) + " (start_blend)");
    return m_backend->loadParameters(start);
}

void UnitRunner::reportProgress(const ActiveUnit& a) {
    HeartbeatTarget t;
    t.workUnitId = a.manifest.workUnitId;
    t.periodMs = heartbeatPeriodMs(a.manifest.heartbeatSeconds);
    t.report.step = a.step;
    t.report.loss = a.lossLast.value_or(0.0f);
    t.report.tokensPerSecond = m_tokensPerSecond;
    m_shared.heartbeats.setTraining(t);
}

TrainOutcome UnitRunner::train(ActiveUnit& a) {
    const TrainOutcome outcome = trainSteps(a);
    // A finished unit is queued by now, and the heartbeat thread reports it from the queue.
    m_shared.heartbeats.clearTraining();
    return outcome;
}

TrainOutcome UnitRunner::trainSteps(ActiveUnit& a) {
    const net::Manifest& m = a.manifest;
    const int B = m.batch, T = m.seqLen;
    const std::string id = wuKey(m.workUnitId);
    // Back from a hold (or a restart) with a checkpoint: only worth training on while the
    // coordinator still wants the unit; its answer also states the partial minimum.
    if (!a.checkpointFile.empty()) {
        net::ProgressReport report;
        report.step = a.step;
        report.loss = a.lossLast.value_or(0.0f);
        auto reply = m_shared.deps.api->reportProgress(m.workUnitId, report);
        m_shared.checkCrash();
        if (reply && reply->action == "abandon") {
            abandonUnit(a, reply->reason.empty() ? "the coordinator abandoned it" : reply->reason);
            return TrainOutcome::Abandoned;
        }
        if (reply)
            m_shared.heartbeats.noteMinSteps(m.workUnitId, reply->minSteps);
    }
    if (auto st = ensureBackend(m.model, B, T); !st) {
        failUnit(a, "the model does not fit on " + m_shared.cfg.device + ": " + st.error().message);
        return TrainOutcome::Failed;
    }
    auto start = loadCheckpoint(m_shared.files.weightsFile(m), m.model);
    if (!start) {
        std::error_code ec;
        fs::remove(m_shared.files.weightsFile(m), ec);
        a.downloaded = false;
        m_backoff.failLocal("the downloaded weights are unusable: " + start.error().message);
        return TrainOutcome::Retry;
    }
    auto data = readFile(m_shared.files.dataFile(m));
    if (!data || static_cast<int64_t>(data->size()) != m.dataByteLength() || m.dataLength <= T) {
        a.downloaded = false;
        m_backoff.failLocal("the downloaded data is unusable");
        return TrainOutcome::Retry;
    }
    const TokenView tokens(data->data(), m.dataLength, m.dataTokenBytes);
    // The signed manifest's SHA-256 matched, so a token outside the model's vocabulary is the
    // coordinator's data, not a damaged download: the unit cannot be trained.
    if (const int64_t at = firstTokenAtOrAbove(tokens, m.model.vocabSize); at >= 0) {
        failUnit(a, "token " + std::to_string(tokens[at]) + " at token " +
                        std::to_string(m.dataOffset + at) + " of data shard " +
                        std::to_string(m.dataShard) + " is not below the model's vocabulary V=" +
                        std::to_string(m.model.vocabSize));
        return TrainOutcome::Failed;
    }
    BatchSampler sampler(tokens, m.seed);
    const size_t P = start->parameters.size();
    if (!a.checkpointFile.empty()) {
        auto ck = loadCheckpoint(a.dir / a.checkpointFile, m.model);
        if (!ck || !ck->optimizer) {
            m_shared.log(EventLevel::Warning,
                         "work unit " + id + ": checkpoint unusable (" +
                             (ck ? std::string("no moments") : ck.error().message) +
                             "); starting it again");
            a.restart();
        } else {
            if (auto st = m_backend->loadParameters(ck->parameters); !st) {
                failUnit(a, st.error().message);
                return TrainOutcome::Failed;
            }
            if (auto st = m_backend->loadOptimizerState(*ck->optimizer); !st) {
                failUnit(a, st.error().message);
                return TrainOutcome::Failed;
            }
            sampler.setState(a.samplerState);
        }
    }
    if (a.checkpointFile.empty()) {
        if (auto st = loadStart(m, start->parameters); !st) {
            failUnit(a, st.error().message);
            return TrainOutcome::Failed;
        }
        if (m_momentsRun == m.runId) {
            // The last unit's moments are still in the backend (same run, model and shape).
            m_shared.log(EventLevel::Debug,
                         "work unit " + id + ": AdamW moments carried over in memory");
        } else {
            auto carried = carriedMoments(m_shared.files, m, m_shared.cfg.device);
            OptimizerState opt;
            if (carried) {
                opt = std::move(*carried);
                m_shared.log(EventLevel::Debug, "work unit " + id + ": AdamW moments carried over");
            } else {
                opt.m.assign(P, 0.0f);
                opt.v.assign(P, 0.0f);
            }
            if (auto st = m_backend->loadOptimizerState(opt); !st) {
                failUnit(a, st.error().message);
                return TrainOutcome::Failed;
            }
        }
        a.step = 0;
        a.tokens = 0;
        a.lossSum = 0;
        a.lossFirst.reset();
        a.lossLast.reset();
        a.computeSeconds = 0;
    }
    // From here the backend's moments are this unit's (its checkpoints keep them).
    m_momentsRun.reset();
    m_unsavedMoments.reset();
    if (!m_lastMomentsSaveMs)
        m_lastMomentsSaveMs = m_shared.now();
    m_shared.transition(m.workUnitId, WorkUnitState::Training);
    m_shared.setState(EngineState::Training, "training",
                      NextAction(NextStep::Upload, std::nullopt, id, m.innerSteps));
    std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
    int64_t lastCheckpointMs = m_shared.now();
    if (!m_lastSampleMs)
        m_lastSampleMs = m_shared.now();
    int64_t stepsSinceCheckpoint = 0;
    double stepSecondsAvg = 0;
    bool checkpointed = !a.checkpointFile.empty() && a.step > 0;
    int64_t savedStep = a.checkpointFile.empty() ? -1 : a.step;  // on disk as a checkpoint
    bool released = false;
    bool partial = false;  // stopped by the donor and sent as a partial result
    // Why the donor stopped the unit ("paused", "snoozed", "quitting"); null for a rule's hold.
    auto stoppedBy = [&]() -> const char* {
        std::lock_guard lock(m_shared.mu);
        if (m_shared.quitRequested)
            return "quitting";
        if (m_shared.snoozeUntil)
            return "snoozed";
        if (m_shared.pauseRequested)
            return "paused";
        return nullptr;
    };
    auto holdCheckpoint = [&] {
        if (partial)
            return;
        // A held unit sends no heartbeats: the coordinator may give its data to someone else.
        m_shared.heartbeats.clearTraining();
        const char* why = stoppedBy();
        if (why && choiceOnStop(a.step, m.innerSteps, m_shared.heartbeats.minSteps(m.workUnitId)) ==
                       StopChoice::UploadPartial) {
            if (auto st = m_writer.write(a, *m_backend, start->parameters, why); st) {
                partial = true;
                // Its moments go on to the next unit of the run, as a finished unit's do.
                m_momentsRun = m.runId;
                m_unsavedMoments = m;
                releaseBackend();
                released = true;
                return;
            } else {
                m_shared.log(EventLevel::Warning,
                             "work unit " + id + ": cannot write the partial result (" +
                                 st.error().message + "); keeping its checkpoint instead");
            }
        }
        if (!checkpointed && a.step > 0) {
            if (auto st = checkpoint(a, sampler.state()); !st) {
                m_shared.log(EventLevel::Warning, "checkpoint failed: " + st.error().message);
            } else {
                savedStep = a.step;
                m_shared.log(EventLevel::Info,
                             "work unit " + id + ": checkpoint at step " + std::to_string(a.step));
            }
        }
        checkpointed = true;
        // train() starts over from the checkpoint, or from the start weights before the
        // first step; the backend is kept if the checkpoint could not be written.
        if (savedStep == a.step || (a.step == 0 && a.checkpointFile.empty())) {
            releaseBackend();
            released = true;
        }
    };
    bool firstStep = true;
    while (a.step < m.innerSteps) {
        if (!m_gate.waitUntilClear(true, 0, holdCheckpoint, firstStep)) {
            holdCheckpoint();
            return partial ? TrainOutcome::Finished : TrainOutcome::Interrupted;
        }
        if (partial)
            return TrainOutcome::Finished;  // its result is queued; the next unit comes next
        if (released)
            return TrainOutcome::Interrupted;  // back from a hold: train() starts over
        m_shared.setState(EngineState::Training, "training",
                          NextAction(NextStep::Upload, std::nullopt, id, m.innerSteps));
        firstStep = false;
        // The heartbeat thread reports the progress; its answer may end the unit.
        if (auto why = m_shared.heartbeats.abandonReason(m.workUnitId)) {
            m_shared.heartbeats.clearTraining();
            abandonUnit(a, *why);
            return TrainOutcome::Abandoned;
        }
        reportProgress(a);
        const auto t0 = std::chrono::steady_clock::now();
        sampler.next(B, T, inputs, targets);
        auto loss = m_backend->forward(inputs, targets, B, T);
        if (!loss) {
            failUnit(a, "forward: " + loss.error().message);
            return TrainOutcome::Failed;
        }
        if (!std::isfinite(*loss)) {
            failUnit(a, "the training loss became " + std::to_string(*loss) + " at step " +
                            std::to_string(a.step));
            return TrainOutcome::Failed;
        }
        if (auto st = m_backend->backward(); !st) {
            failUnit(a, "backward: " + st.error().message);
            return TrainOutcome::Failed;
        }
        auto stats = m_backend->adamwStep(m_shared.cfg.adamw, m.learningRate(a.step));
        if (!stats) {
            failUnit(a, "AdamW: " + stats.error().message);
            return TrainOutcome::Failed;
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        m_shared.checkCrash();
        ++a.step;
        ++stepsSinceCheckpoint;
        checkpointed = false;
        a.tokens += int64_t{B} * T;
        a.computeSeconds += seconds;
        if (!a.lossFirst)
            a.lossFirst = *loss;
        a.lossLast = *loss;
        a.lossSum += *loss;
        stepSecondsAvg = stepSecondsAvg == 0 ? seconds : 0.8 * stepSecondsAvg + 0.2 * seconds;
        if (stepSecondsAvg > 0)
            m_tokensPerSecond = static_cast<double>(B) * T / stepSecondsAvg;
        {
            std::lock_guard lock(m_shared.mu);
            m_shared.snap.current = currentInfo(a);
            m_shared.snap.current->etaMs =
                static_cast<int64_t>(stepSecondsAvg * 1000.0 * (m.innerSteps - a.step));
            m_shared.snap.current->minSteps = m_shared.heartbeats.minSteps(m.workUnitId);
            m_shared.snap.tokensPerSecond = m_tokensPerSecond;
            m_shared.snap.stepLoss = *loss;
        }
        if (m_shared.deps.observer)
            m_shared.deps.observer->progress(id, a.step, m.innerSteps, *loss);
        m_shared.checkCrash();
        if (m_stepHook)
            m_stepHook(a, static_cast<int64_t>(stepSecondsAvg * 1000.0 * (m.innerSteps - a.step)));
        if (a.step < m.innerSteps &&
            ((m_shared.cfg.checkpointEverySteps > 0 &&
              stepsSinceCheckpoint >= m_shared.cfg.checkpointEverySteps) ||
             m_shared.now() >= lastCheckpointMs + m_shared.cfg.checkpointIntervalMs)) {
            if (auto st = checkpoint(a, sampler.state()); !st)
                m_shared.log(EventLevel::Warning, "checkpoint failed: " + st.error().message);
            else
                savedStep = a.step;
            checkpointed = true;
            lastCheckpointMs = m_shared.now();
            stepsSinceCheckpoint = 0;
        }
        if (m_shared.now() >= *m_lastSampleMs + m_shared.cfg.sampleIntervalMs)
            recordSample();
    }
    if (auto st = m_writer.write(a, *m_backend, start->parameters); !st) {
        failUnit(a, st.error().message);
        return TrainOutcome::Failed;
    }
    // The moments stay in the backend for the next unit of the run; to disk on the clock, and
    // before the backend goes (a hold, quitting, another shape).
    m_momentsRun = m.runId;
    m_unsavedMoments = m;
    if (m_shared.now() >= *m_lastMomentsSaveMs + m_shared.cfg.checkpointIntervalMs)
        saveMoments();
    return TrainOutcome::Finished;
}

void UnitRunner::recordSample() {
    m_lastSampleMs = m_shared.now();
    DeviceSample s;
    s.atMs = m_shared.now();
    s.device = m_shared.cfg.device;
    s.tokensPerSecond = m_tokensPerSecond;
    if (m_shared.deps.probe)
        s.temperatureC = m_shared.deps.probe().temperatureC;
    (void)m_shared.ledger.recordSample(s);
    if (m_shared.deps.observer)
        m_shared.deps.observer->sample(s);
}

}  // namespace tandem::core
