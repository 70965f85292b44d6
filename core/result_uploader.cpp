// The upload of a finished result, its receipt and settling the unit.
#include "result_uploader.hpp"

#include "unit_end.hpp"

namespace tandem::core {

UploadQueue::Verdict ResultUploader::run(const PendingResult& p) {
    if (m_shared.crashed.load())
        return UploadQueue::Verdict::stop();
    RulesVerdict v = m_gate.checkUpload(p.bytes);
    if (!v.allowed()) {
        {
            std::lock_guard lock(m_shared.mu);
            NextAction next(NextStep::UploadWaits, std::nullopt, wuKey(p.workUnitId));
            next.hold = v.holds.front();
            m_shared.setNextLocked(std::move(next));
        }
        return UploadQueue::Verdict::hold();
    }
    // Ask first whether the result is still wanted (a heartbeat): a unit the coordinator
    // abandoned meanwhile (too stale, lease expired) is not worth the uplink.
    if (!p.stillWantedChecked) {
        net::ProgressReport report;
        report.step = p.steps;
        report.loss = p.lossLast;
        auto reply = m_shared.deps.api->reportProgress(p.workUnitId, report);
        if (m_shared.crashed.load())
            return UploadQueue::Verdict::stop();
        {
            std::lock_guard lock(m_shared.mu);
            if (PendingResult* front = m_shared.uploads.frontLocked(p.workUnitId))
                front->stillWantedChecked = true;
        }
        if (reply && reply->action == "abandon") {
            settle(p, WorkUnitState::Abandoned,
                   reply->reason.empty() ? "the coordinator abandoned it" : reply->reason, nullptr);
            return UploadQueue::Verdict::now();
        }
    }
    m_shared.transition(p.workUnitId, WorkUnitState::Uploading);
    {
        std::lock_guard lock(m_shared.mu);
        m_shared.snap.upload = UploadInFlight{wuKey(p.workUnitId), 0, p.bytes, 0};
    }
    const int64_t startMs = m_shared.now();
    auto res = m_shared.deps.api->uploadResult(
        p.uploadUrl, p.file, p.signature, [&](int64_t done, int64_t total, double rate) {
            if (done > 0)
                m_shared.hook("upload");
            std::lock_guard lock(m_shared.mu);
            if (m_shared.snap.upload) {
                m_shared.snap.upload->bytesDone = done;
                if (total > 0)
                    m_shared.snap.upload->bytesTotal = total;
                m_shared.snap.upload->bytesPerSecond = rate;
            }
            return !m_shared.uploads.stopRequestedLocked() && !m_shared.crashed.load();
        });
    if (m_shared.crashed.load())
        return UploadQueue::Verdict::stop();
    {
        std::lock_guard lock(m_shared.mu);
        m_shared.snap.upload.reset();
    }
    if (!res) {
        m_shared.recordTransfer(Direction::Up, "result", res.error().bytesTransferred, startMs,
                                false, p.workUnitId, res.error().message);
        bool stopping;
        {
            std::lock_guard lock(m_shared.mu);
            stopping = m_shared.uploads.stopRequestedLocked();
        }
        if (stopping) {
            m_shared.transition(p.workUnitId, WorkUnitState::Trained, "upload interrupted");
            return UploadQueue::Verdict::stop();
        }
        if (res.error().transient) {
            ++m_attempt;
            const double u = m_shared.jitterUnit();
            const int64_t delay =
                backoffDelayMs(m_shared.cfg, m_attempt, u, res.error().retryAfterMs);
            const int64_t retryAtMs = m_shared.now() + delay;
            m_shared.transition(p.workUnitId, WorkUnitState::Trained, res.error().message);
            m_shared.log(EventLevel::Warning, "upload of work unit " + wuKey(p.workUnitId) +
                                                  " failed: " + res.error().message +
                                                  " (retry in " + std::to_string(delay / 1000) +
                                                  " s)");
            {
                std::lock_guard lock(m_shared.mu);
                m_shared.setNextLocked(
                    NextAction(NextStep::RetryUploadAt, retryAtMs, wuKey(p.workUnitId)));
            }
            return UploadQueue::Verdict::retryAt(retryAtMs);
        }
        settle(p, WorkUnitState::Rejected, res.error().message, nullptr,
               refusalDetail(res.error()));
        m_attempt = 0;
        return UploadQueue::Verdict::now();
    }
    m_shared.hook("receipt");
    m_shared.recordTransfer(Direction::Up, "result", res->bytesSent, startMs, true, p.workUnitId,
                            {});
    m_attempt = 0;
    const net::Receipt& r = res->receipt;
    std::string problem;
    if (const auto pinned = m_registrar.coordinatorKey(); !pinned || !r.verify(*pinned))
        problem = "the receipt is not signed by the coordinator key pinned at registration";
    else if (r.workUnitId != p.workUnitId)
        problem = "the receipt is for work unit " + wuKey(r.workUnitId);
    else if (r.resultDigest != p.digest)
        problem = "the receipt names another result digest (" +
                  net::toHex(r.resultDigest).substr(0, 16) + "...)";
    if (!problem.empty()) {
        settle(p, WorkUnitState::Rejected, problem, nullptr);
        return UploadQueue::Verdict::now();
    }
    settle(p, WorkUnitState::Accepted, {}, &*res);
    return UploadQueue::Verdict::now();
}

void ResultUploader::settle(const PendingResult& p, WorkUnitState state, const std::string& detail,
                            const UploadOutcome* outcome, const std::string& ledgerDetail) {
    if (m_shared.crashed.load())
        return;
    const std::string id = wuKey(p.workUnitId);
    LastUpload last;
    last.id = id;
    last.atMs = m_shared.now();
    last.state = state;
    last.detail = ledgerDetail.empty() ? detail : ledgerDetail;
    if (state == WorkUnitState::Accepted) {
        Receipt rec;
        rec.workUnitId = id;
        rec.roundApplied = outcome->receipt.round;
        rec.weight = outcome->receipt.weight;
        // Credit is the work done (tokens); the weight only says how much the result counted in
        // its round's average. An older coordinator sends no credit: its weight, as before.
        rec.credit = outcome->receipt.credit ? static_cast<double>(*outcome->receipt.credit)
                                             : outcome->receipt.weight;
        rec.receivedAtMs = m_shared.now();
        rec.signature.assign(outcome->receipt.signature.begin(), outcome->receipt.signature.end());
        rec.body.assign(outcome->receiptJson.begin(), outcome->receiptJson.end());
        if (auto st = m_shared.ledger.recordReceipt(rec); !st) {
            m_shared.log(EventLevel::Error, "ledger: cannot store the receipt of work unit " + id +
                                                ": " + st.error().message);
            return;  // stays pending; the upload is idempotent
        }
        last.round = rec.roundApplied;
        last.credit = rec.credit;
        m_shared.log(EventLevel::Info, "work unit " + id + " accepted into round " +
                                           std::to_string(rec.roundApplied) + " (weight " +
                                           std::to_string(static_cast<int64_t>(rec.weight)) +
                                           ", credit " +
                                           std::to_string(static_cast<int64_t>(rec.credit)) + ")");
    } else if (state == WorkUnitState::Abandoned) {
        last.detail = unitEndCode(classifyAbandonReason(detail));
        m_shared.transition(p.workUnitId, WorkUnitState::Abandoned, last.detail);
        m_shared.log(
            EventLevel::Warning,
            "work unit " + id + ": result not sent, the coordinator abandoned it: " + detail);
    } else {
        m_shared.transition(p.workUnitId, WorkUnitState::Rejected, last.detail);
        m_shared.log(EventLevel::Error, "work unit " + id + " was refused: " + detail);
    }
    removePendingResult(p);
    {
        std::lock_guard lock(m_shared.mu);
        m_shared.uploads.popLocked(p.workUnitId);
        m_shared.snap.lastUpload = last;
    }
    m_shared.refreshTotals();
    if (m_shared.deps.observer)
        m_shared.deps.observer->workUnitSettled(id, state);
    m_shared.notifyAll();
}

}  // namespace tandem::core
