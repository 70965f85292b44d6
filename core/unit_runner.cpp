// Training one work unit: backend, step loop, heartbeats, checkpoints.
#include "engine_impl.hpp"

#include "file_io.hpp"

#include <chrono>
#include <cmath>
#include "corpus.hpp"

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

Status Engine::Impl::checkpoint(uint64_t samplerState) {
    if (crashed.load())
        return {};
    ActiveUnit& a = *active;
    const ModelConfig& model = a.manifest.model;
    Checkpoint ck;
    ck.config = model;
    ck.parameters.resize(static_cast<size_t>(model.parameterCount()));
    if (auto st = backend->storeParameters(ck.parameters); !st)
        return st;
    auto opt = backend->storeOptimizerState();
    if (!opt)
        return opt.error();
    ck.optimizer = std::move(*opt);
    const std::string name = DataDir::checkpointName(a.step);
    if (auto st = saveCheckpoint(a.dir / name, ck); !st)
        return st;
    hook("checkpoint");
    checkCrash();
    UnitProgress progress = a;
    progress.samplerState = samplerState;
    progress.checkpointFile = name;
    if (auto st = writeProgress(DataDir::progressFile(a.dir), progress); !st)
        return st;
    checkCrash();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(a.dir, ec)) {
        const std::string f = e.path().filename().string();
        if (DataDir::isCheckpointName(f) && f != name)
            fs::remove(e.path(), ec);
    }
    a.samplerState = samplerState;
    a.checkpointFile = name;
    (void)ledger.updateWorkUnitProgress(wuKey(a.manifest.workUnitId), a.tokens, a.step,
                                        a.computeSeconds, a.lossFirst, a.lossLast, now());
    return {};
}

void Engine::Impl::failUnit(const std::string& why) {
    const int64_t id = active->manifest.workUnitId;
    log(EventLevel::Error, "work unit " + wuKey(id) + " failed: " + why + "; nothing was sent");
    transition(id, WorkUnitState::Failed, why);
    std::error_code ec;
    fs::remove_all(active->dir, ec);
    active.reset();
    std::lock_guard lock(mu);
    snap.current.reset();
}

void Engine::Impl::abandonUnit(const std::string& why) {
    const int64_t id = active->manifest.workUnitId;
    log(EventLevel::Info, "work unit " + wuKey(id) + " abandoned: " + why);
    transition(id, WorkUnitState::Abandoned, why);
    std::error_code ec;
    fs::remove_all(active->dir, ec);
    active.reset();
    std::lock_guard lock(mu);
    snap.current.reset();
}

// While held, the backend's memory (parameters, moments, activations: tens of MB to GB) goes
// back to the system. Between units it holds nothing unsaved (the moments are kept on disk);
// during one, train() releases it only once the hold's checkpoint is written.
void Engine::Impl::releaseBackend() {
    backend.reset();
    backendB = 0;
}

Status Engine::Impl::ensureBackend(const ModelConfig& model, int B, int T) {
    if (!backend) {
        auto b = deps.backends(cfg.device);
        if (!b)
            return b.error();
        backend = std::move(*b);
        backendB = 0;
    }
    if (backendB == B && backendT == T && backendModel == model)
        return {};
    if (auto st = backend->canRun(model, B, T); !st)
        return st;
    if (auto st = backend->allocate(model, B, T); !st)
        return st;
    backendModel = model;
    backendB = B;
    backendT = T;
    return {};
}

TrainOutcome Engine::Impl::train() {
    ActiveUnit& a = *active;
    const net::Manifest& m = a.manifest;
    const int B = m.batch, T = m.seqLen;
    const std::string id = wuKey(m.workUnitId);
    if (auto st = ensureBackend(m.model, B, T); !st) {
        failUnit("the model does not fit on " + cfg.device + ": " + st.error().message);
        return TrainOutcome::Failed;
    }
    auto start = loadCheckpoint(files.weightsFile(m), m.model);
    if (!start) {
        std::error_code ec;
        fs::remove(files.weightsFile(m), ec);
        a.downloaded = false;
        backoff.failLocal("the downloaded weights are unusable: " + start.error().message);
        return TrainOutcome::Retry;
    }
    auto data = readFile(files.dataFile(m));
    if (!data || static_cast<int64_t>(data->size()) <= T) {
        a.downloaded = false;
        backoff.failLocal("the downloaded data is unusable");
        return TrainOutcome::Retry;
    }
    BatchSampler sampler(*data, m.seed);
    const size_t P = start->parameters.size();
    if (!a.checkpointFile.empty()) {
        auto ck = loadCheckpoint(a.dir / a.checkpointFile, m.model);
        if (!ck || !ck->optimizer) {
            log(EventLevel::Warning, "work unit " + id + ": checkpoint unusable (" +
                                         (ck ? std::string("no moments") : ck.error().message) +
                                         "); starting it again");
            a.restart();
        } else {
            if (auto st = backend->loadParameters(ck->parameters); !st) {
                failUnit(st.error().message);
                return TrainOutcome::Failed;
            }
            if (auto st = backend->loadOptimizerState(*ck->optimizer); !st) {
                failUnit(st.error().message);
                return TrainOutcome::Failed;
            }
            sampler.setState(a.samplerState);
        }
    }
    if (a.checkpointFile.empty()) {
        if (auto st = backend->loadParameters(start->parameters); !st) {
            failUnit(st.error().message);
            return TrainOutcome::Failed;
        }
        auto carried = carriedMoments(files, m, cfg.device);
        OptimizerState opt;
        if (carried) {
            opt = std::move(*carried);
            log(EventLevel::Debug, "work unit " + id + ": AdamW moments carried over");
        } else {
            opt.m.assign(P, 0.0f);
            opt.v.assign(P, 0.0f);
        }
        if (auto st = backend->loadOptimizerState(opt); !st) {
            failUnit(st.error().message);
            return TrainOutcome::Failed;
        }
        a.step = 0;
        a.tokens = 0;
        a.lossSum = 0;
        a.lossFirst.reset();
        a.lossLast.reset();
        a.computeSeconds = 0;
    }
    transition(m.workUnitId, WorkUnitState::Training);
    setState(EngineState::Training, "training",
             "upload work unit " + id + " after step " + std::to_string(m.innerSteps));
    std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
    int64_t lastCheckpointMs = now();
    int64_t lastHeartbeatMs = INT64_MIN;
    if (!lastSampleMs)
        lastSampleMs = now();
    int64_t stepsSinceCheckpoint = 0;
    double stepSecondsAvg = 0;
    bool checkpointed = !a.checkpointFile.empty() && a.step > 0;
    int64_t savedStep = a.checkpointFile.empty() ? -1 : a.step;  // on disk as a checkpoint
    bool released = false;
    auto holdCheckpoint = [&] {
        if (!checkpointed && a.step > 0) {
            if (auto st = checkpoint(sampler.state()); !st) {
                log(EventLevel::Warning, "checkpoint failed: " + st.error().message);
            } else {
                savedStep = a.step;
                log(EventLevel::Info,
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
        if (!ruleGate.waitUntilClear(true, 0, holdCheckpoint, firstStep)) {
            holdCheckpoint();
            return TrainOutcome::Interrupted;
        }
        if (released)
            return TrainOutcome::Interrupted;  // back from a hold: train() starts over
        if (checkpointed && !firstStep) {
            // Back from a hold.
            setState(EngineState::Training, "training",
                     "upload work unit " + id + " after step " + std::to_string(m.innerSteps));
        }
        setState(EngineState::Training, "training",
                 "upload work unit " + id + " after step " + std::to_string(m.innerSteps));
        firstStep = false;
        // Heartbeat (and the coordinator's word on whether to go on).
        const int64_t hbEveryMs = std::max<int64_t>(1000, m.heartbeatSeconds * 1000LL / 2);
        if (lastHeartbeatMs == INT64_MIN || now() >= lastHeartbeatMs + hbEveryMs) {
            lastHeartbeatMs = now();
            net::ProgressReport report;
            report.step = a.step;
            report.loss = a.lossLast.value_or(0.0f);
            report.tokensPerSecond = measuredTokensPerSecond;
            auto reply = deps.api->reportProgress(m.workUnitId, report);
            checkCrash();
            if (reply && reply->action == "abandon") {
                abandonUnit(reply->reason.empty() ? "the coordinator abandoned it" : reply->reason);
                return TrainOutcome::Abandoned;
            }
            if (!reply)
                log(EventLevel::Warning, "heartbeat failed: " + reply.error().message);
        }
        const auto t0 = std::chrono::steady_clock::now();
        sampler.next(B, T, inputs, targets);
        auto loss = backend->forward(inputs, targets, B, T);
        if (!loss) {
            failUnit("forward: " + loss.error().message);
            return TrainOutcome::Failed;
        }
        if (!std::isfinite(*loss)) {
            failUnit("the training loss became " + std::to_string(*loss) + " at step " +
                     std::to_string(a.step));
            return TrainOutcome::Failed;
        }
        if (auto st = backend->backward(); !st) {
            failUnit("backward: " + st.error().message);
            return TrainOutcome::Failed;
        }
        auto stats = backend->adamwStep(cfg.adamw, m.learningRate(a.step));
        if (!stats) {
            failUnit("AdamW: " + stats.error().message);
            return TrainOutcome::Failed;
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        checkCrash();
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
            measuredTokensPerSecond = static_cast<double>(B) * T / stepSecondsAvg;
        {
            std::lock_guard lock(mu);
            snap.current = currentInfo(a);
            snap.current->etaMs =
                static_cast<int64_t>(stepSecondsAvg * 1000.0 * (m.innerSteps - a.step));
            snap.tokensPerSecond = measuredTokensPerSecond;
            snap.stepLoss = *loss;
        }
        if (deps.observer)
            deps.observer->progress(id, a.step, m.innerSteps, *loss);
        checkCrash();
        if (a.step < m.innerSteps &&
            ((cfg.checkpointEverySteps > 0 && stepsSinceCheckpoint >= cfg.checkpointEverySteps) ||
             now() >= lastCheckpointMs + cfg.checkpointIntervalMs)) {
            if (auto st = checkpoint(sampler.state()); !st)
                log(EventLevel::Warning, "checkpoint failed: " + st.error().message);
            else
                savedStep = a.step;
            checkpointed = true;
            lastCheckpointMs = now();
            stepsSinceCheckpoint = 0;
        }
        if (now() >= *lastSampleMs + cfg.sampleIntervalMs) {
            lastSampleMs = now();
            DeviceSample s;
            s.atMs = now();
            s.device = cfg.device;
            s.tokensPerSecond = measuredTokensPerSecond;
            if (deps.probe)
                s.temperatureC = deps.probe().temperatureC;
            (void)ledger.recordSample(s);
            if (deps.observer)
                deps.observer->sample(s);
        }
    }
    return finishUnit(start->parameters);
}

}  // namespace tandem::core
