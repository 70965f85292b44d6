// Writing the result of a trained unit: results/<id>.result + .json, the result queued.
#include "result_writer.hpp"

#include "file_io.hpp"
#include "result_format.hpp"

#include <cstdio>

namespace tandem::core {

namespace fs = std::filesystem;

Status ResultWriter::write(const ActiveUnit& a, Backend& backend, const std::vector<float>& start,
                           const char* stoppedBy) {
    const net::Manifest& m = a.manifest;
    const std::string id = wuKey(m.workUnitId);
    std::vector<uint16_t> payload(start.size());
    auto enc = backend.encodePseudoGradient(start, payload);
    if (!enc) {
        return makeError("the pseudo-gradient is not finite (" + enc.error().message + ")");
    }
    if (enc->nonFinite > 0) {
        return makeError("the pseudo-gradient has " + std::to_string(enc->nonFinite) +
                         " NaN or Inf values");
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
        return makeError(header.error().message);
    }
    PendingResult p;
    p.workUnitId = m.workUnitId;
    p.uploadUrl = m.uploadUrl;
    p.file = m_shared.files.resultFile(m.workUnitId);
    p.infoFile = m_shared.files.resultInfoFile(m.workUnitId);
    p.bytes = static_cast<int64_t>(body.size());
    p.digest = net::resultDigest(*header);
    p.steps = header->steps;
    p.lossLast = header->lossLast;
    p.heartbeatMs = heartbeatPeriodMs(m.heartbeatSeconds);
    p.signature = m_shared.key.sign(p.digest);
    m_shared.checkCrash();
    if (auto st = writeFileAtomically(p.file, body); !st) {
        return makeError("cannot write the result: " + st.error().message);
    }
    m_shared.hook("result");
    m_shared.checkCrash();
    const ResultInfo info{m.workUnitId, m.uploadUrl, m.runId, m.baseVersion};
    if (auto st = writeResultInfo(p.infoFile, info); !st) {
        // A .result without its .json is no result: leave nothing half-made.
        std::error_code ec;
        fs::remove(p.file, ec);
        return makeError("cannot write the result: " + st.error().message);
    }
    m_shared.checkCrash();
    (void)m_shared.ledger.updateWorkUnitProgress(id, a.tokens, a.step, a.computeSeconds,
                                                 a.lossFirst, a.lossLast, m_shared.now());
    m_shared.transition(m.workUnitId, WorkUnitState::Trained);
    m_shared.checkCrash();
    std::error_code ec;
    fs::remove_all(a.dir, ec);
    char lossText[64];
    std::snprintf(lossText, sizeof lossText, "loss %.3f -> %.3f", h.lossFirst, h.lossLast);
    const std::string what = stoppedBy ? " stopped at step " + std::to_string(a.step) + " of " +
                                             std::to_string(m.innerSteps) + " (" + stoppedBy +
                                             "), a partial result: "
                                       : " trained: " + std::to_string(a.step) + " steps, ";
    m_shared.log(EventLevel::Info, "work unit " + id + what + std::to_string(a.tokens) +
                                       " tokens, " + lossText + "; result " +
                                       std::to_string(p.bytes) + " bytes");
    bool nowPaused = false;
    {
        std::lock_guard lock(m_shared.mu);
        m_shared.uploads.pushLocked(p);
        m_shared.snap.current.reset();
        ++m_shared.trainedThisSession;
        if (m_shared.finishFlag) {
            m_shared.finishFlag = false;
            m_shared.pauseRequested = true;
            nowPaused = true;
        }
    }
    if (nowPaused)
        m_shared.saveHold();
    m_shared.notifyAll();
    m_shared.refreshTotals();
    return {};
}

}  // namespace tandem::core
