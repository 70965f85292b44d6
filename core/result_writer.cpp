// Writing the result of a trained unit: results/<id>.result + .json, the moments kept.
#include "engine_impl.hpp"

#include "file_io.hpp"

#include <cstdio>
#include "result_format.hpp"

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

TrainOutcome Engine::Impl::finishUnit(const std::vector<float>& start) {
    ActiveUnit& a = *active;
    const net::Manifest& m = a.manifest;
    const std::string id = wuKey(m.workUnitId);
    std::vector<uint16_t> payload(start.size());
    auto enc = backend->encodePseudoGradient(start, payload);
    if (!enc) {
        failUnit("the pseudo-gradient is not finite (" + enc.error().message + ")");
        return TrainOutcome::Failed;
    }
    if (enc->nonFinite > 0) {
        failUnit("the pseudo-gradient has " + std::to_string(enc->nonFinite) +
                 " NaN or Inf values");
        return TrainOutcome::Failed;
    }
    net::ResultHeader h;
    h.workUnitId = m.workUnitId;
    h.parameterCount = static_cast<int64_t>(start.size());
    h.tokens = a.tokens;
    h.steps = static_cast<int32_t>(a.step);
    h.lossFirst = a.lossFirst.value_or(0);
    h.lossLast = a.lossLast.value_or(0);
    h.lossMean = a.step > 0 ? static_cast<float>(a.lossSum / static_cast<double>(a.step)) : 0;
    h.saturated = enc->saturated;
    const std::vector<uint8_t> body = net::buildResult(h, payload);
    auto header = net::parseResultHeader(body);
    if (!header) {
        failUnit(header.error().message);
        return TrainOutcome::Failed;
    }
    PendingResult p;
    p.workUnitId = m.workUnitId;
    p.uploadUrl = m.uploadUrl;
    p.file = files.resultFile(m.workUnitId);
    p.infoFile = files.resultInfoFile(m.workUnitId);
    p.bytes = static_cast<int64_t>(body.size());
    p.digest = net::resultDigest(*header);
    p.steps = header->steps;
    p.lossLast = header->lossLast;
    p.signature = key.sign(p.digest);
    checkCrash();
    if (auto st = writeFileAtomically(p.file, body); !st) {
        failUnit("cannot write the result: " + st.error().message);
        return TrainOutcome::Failed;
    }
    hook("result");
    checkCrash();
    const ResultInfo info{m.workUnitId, m.uploadUrl, m.runId, m.baseVersion};
    if (auto st = writeResultInfo(p.infoFile, info); !st) {
        failUnit("cannot write the result: " + st.error().message);
        return TrainOutcome::Failed;
    }
    checkCrash();
    (void)ledger.updateWorkUnitProgress(id, a.tokens, a.step, a.computeSeconds, a.lossFirst,
                                        a.lossLast, now());
    transition(m.workUnitId, WorkUnitState::Trained);
    // Moments for the next unit of this run.
    Checkpoint ck;
    ck.config = m.model;
    ck.parameters.resize(start.size());
    if (backend->storeParameters(ck.parameters)) {
        if (auto opt = backend->storeOptimizerState()) {
            ck.optimizer = std::move(*opt);
            if (auto st = saveMoments(files, m, cfg.device, ck); !st)
                log(EventLevel::Warning, "cannot keep the AdamW moments: " + st.error().message);
        }
    }
    checkCrash();
    std::error_code ec;
    fs::remove_all(a.dir, ec);
    char lossText[64];
    std::snprintf(lossText, sizeof lossText, "loss %.3f -> %.3f", h.lossFirst, h.lossLast);
    log(EventLevel::Info, "work unit " + id + " trained: " + std::to_string(a.step) + " steps, " +
                              std::to_string(a.tokens) + " tokens, " + lossText + "; result " +
                              std::to_string(p.bytes) + " bytes");
    active.reset();
    {
        std::lock_guard lock(mu);
        uploads.pushLocked(p);
        snap.current.reset();
        ++trainedThisSession;
        if (finishFlag) {
            finishFlag = false;
            pauseRequested = true;
        }
    }
    notifyAll();
    refreshTotals();
    return TrainOutcome::Finished;
}

}  // namespace tandem::core
