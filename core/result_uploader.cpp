// The upload of a finished result, its receipt and settling the unit.
#include "result_uploader.hpp"

#include "unit_end.hpp"

#include <algorithm>
#include <climits>
#include <optional>
#include <thread>

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
    if (!p.pieces.empty())
        return runPieces(p);
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

namespace {

// Which of n pieces have an outcome recorded.
std::vector<bool> settledPieces(const std::vector<PieceOutcome>& outcomes, size_t n) {
    std::vector<bool> settled(n, false);
    for (const PieceOutcome& o : outcomes)
        if (o.shard >= 0 && static_cast<size_t>(o.shard) < n)
            settled[static_cast<size_t>(o.shard)] = true;
    return settled;
}

}  // namespace

int64_t ResultUploader::earliestRetry(int64_t workUnitId, const std::vector<bool>& settled) {
    const auto& retry = m_pieceRetry[workUnitId];
    int64_t next = INT64_MAX;
    for (size_t k = 0; k < settled.size() && k < retry.size(); ++k)
        if (!settled[k])
            next = std::min(next, retry[k].atMs);
    return next;
}

UploadQueue::Verdict ResultUploader::runPieces(const PendingResult& p) {
    const std::string id = wuKey(p.workUnitId);
    auto recorded = m_shared.ledger.pieceOutcomes(id);
    if (!recorded) {
        m_shared.log(EventLevel::Error, "ledger: cannot read the pieces of work unit " + id + ": " +
                                            recorded.error().message);
        return UploadQueue::Verdict::retryAt(m_shared.now() + m_shared.cfg.backoffInitialMs);
    }
    const std::vector<bool> settled = settledPieces(*recorded, p.pieces.size());
    auto& retry = m_pieceRetry[p.workUnitId];
    retry.resize(p.pieces.size());
    const int64_t nowMs = m_shared.now();
    std::vector<size_t> due;
    for (size_t k = 0; k < p.pieces.size(); ++k)
        if (!settled[k] && retry[k].atMs <= nowMs)
            due.push_back(k);
    if (due.empty()) {
        if (std::find(settled.begin(), settled.end(), false) == settled.end()) {
            settlePieces(p, *recorded);
            return UploadQueue::Verdict::now();
        }
        return UploadQueue::Verdict::retryAt(earliestRetry(p.workUnitId, settled));
    }

    // Every due piece at once, one thread each.
    m_shared.transition(p.workUnitId, WorkUnitState::Uploading);
    int64_t dueBytes = 0;
    for (size_t k : due)
        dueBytes += p.pieces[k].bytes;
    std::vector<int64_t> done(due.size(), 0);
    std::vector<double> rates(due.size(), 0);
    {
        std::lock_guard lock(m_shared.mu);
        m_shared.snap.upload = UploadInFlight{id, 0, dueBytes, 0};
    }
    const int64_t startMs = m_shared.now();
    std::vector<std::optional<ApiResult<UploadOutcome>>> results(due.size());
    {
        std::vector<std::thread> threads;
        threads.reserve(due.size());
        for (size_t i = 0; i < due.size(); ++i) {
            threads.emplace_back([&, i] {
                const PendingPiece& piece = p.pieces[due[i]];
                results[i] = m_shared.deps.api->uploadPiece(
                    piece.uploadUrl, piece.file, piece.shard, p.signature,
                    [&, i](int64_t bytesDone, int64_t, double rate) {
                        if (bytesDone > 0)
                            m_shared.hook("upload");
                        std::lock_guard lock(m_shared.mu);
                        done[i] = bytesDone;
                        rates[i] = rate;
                        if (m_shared.snap.upload) {
                            int64_t sum = 0;
                            double rateSum = 0;
                            for (size_t j = 0; j < done.size(); ++j) {
                                sum += done[j];
                                rateSum += rates[j];
                            }
                            m_shared.snap.upload->bytesDone = sum;
                            m_shared.snap.upload->bytesPerSecond = rateSum;
                        }
                        return !m_shared.uploads.stopRequestedLocked() && !m_shared.crashed.load();
                    });
            });
        }
        for (auto& t : threads)
            t.join();
    }
    if (m_shared.crashed.load())
        return UploadQueue::Verdict::stop();
    {
        std::lock_guard lock(m_shared.mu);
        m_shared.snap.upload.reset();
    }
    bool stopping;
    {
        std::lock_guard lock(m_shared.mu);
        stopping = m_shared.uploads.stopRequestedLocked();
    }
    const auto pinned = m_registrar.coordinatorKey();
    std::string lastFailure;
    for (size_t i = 0; i < due.size(); ++i) {
        const size_t k = due[i];
        const PendingPiece& piece = p.pieces[k];
        const std::string which = "piece " + std::to_string(k) + " of work unit " + id;
        const auto& res = *results[i];
        if (!res) {
            m_shared.recordTransfer(Direction::Up, "result", res.error().bytesTransferred, startMs,
                                    false, p.workUnitId,
                                    "piece " + std::to_string(k) + ": " + res.error().message);
            if (stopping)
                continue;
            if (res.error().transient) {
                ++retry[k].attempt;
                const int64_t delay =
                    backoffDelayMs(m_shared.cfg, retry[k].attempt, m_shared.jitterUnit(),
                                   res.error().retryAfterMs);
                retry[k].atMs = m_shared.now() + delay;
                lastFailure = res.error().message;
                m_shared.log(EventLevel::Warning,
                             "upload of " + which + " failed: " + res.error().message +
                                 " (retry in " + std::to_string(delay / 1000) + " s)");
                continue;
            }
            PieceOutcome refused;
            refused.shard = static_cast<int>(k);
            refused.atMs = m_shared.now();
            refused.detail = refusalDetail(res.error());
            m_shared.log(EventLevel::Error, which + " was refused: " + res.error().message);
            if (auto st = m_shared.ledger.recordPieceOutcome(id, refused); !st)
                m_shared.log(EventLevel::Error, "ledger: cannot record the refusal of " + which +
                                                    ": " + st.error().message);
            continue;
        }
        m_shared.hook("receipt");
        m_shared.recordTransfer(Direction::Up, "result", res->bytesSent, startMs, true,
                                p.workUnitId, {});
        const net::Receipt& r = res->receipt;
        std::string problem;
        if (!pinned || !r.verify(*pinned))
            problem = "the receipt is not signed by the coordinator key pinned at registration";
        else if (r.workUnitId != p.workUnitId)
            problem = "the receipt is for work unit " + wuKey(r.workUnitId);
        else if (r.resultDigest != p.digest)
            problem = "the receipt names another result digest (" +
                      net::toHex(r.resultDigest).substr(0, 16) + "...)";
        else if (r.shard != piece.shard)
            problem = "the receipt is for " +
                      (r.shard ? "piece " + std::to_string(*r.shard) : std::string("no piece"));
        PieceOutcome o;
        o.shard = piece.shard;
        o.atMs = m_shared.now();
        if (problem.empty()) {
            o.accepted = true;
            o.signature.assign(r.signature.begin(), r.signature.end());
            o.receiptJson.assign(res->receiptJson.begin(), res->receiptJson.end());
            m_shared.log(EventLevel::Info,
                         which + " accepted into round " + std::to_string(r.round));
        } else {
            o.detail = problem;
            m_shared.log(EventLevel::Error, which + " was refused: " + problem);
        }
        retry[k] = {};
        if (auto st = m_shared.ledger.recordPieceOutcome(id, o); !st) {
            // Not recorded: sent again later (idempotent, the same receipt back).
            m_shared.log(EventLevel::Error,
                         "ledger: cannot record " + which + ": " + st.error().message);
            retry[k].atMs = m_shared.now() + m_shared.cfg.backoffInitialMs;
        }
    }
    if (stopping) {
        m_shared.transition(p.workUnitId, WorkUnitState::Trained, "upload interrupted");
        return UploadQueue::Verdict::stop();
    }
    // Settled now? Else wait for the earliest piece's retry.
    auto after = m_shared.ledger.pieceOutcomes(id);
    if (after && after->size() == p.pieces.size()) {
        settlePieces(p, *after);
        return UploadQueue::Verdict::now();
    }
    int64_t next = earliestRetry(p.workUnitId, after ? settledPieces(*after, p.pieces.size())
                                                     : std::vector<bool>(p.pieces.size(), false));
    if (next == INT64_MAX)
        next = m_shared.now();
    m_shared.transition(p.workUnitId, WorkUnitState::Trained,
                        lastFailure.empty() ? "some pieces are still to be sent" : lastFailure);
    {
        std::lock_guard lock(m_shared.mu);
        m_shared.setNextLocked(NextAction(NextStep::RetryUploadAt, next, id));
    }
    return UploadQueue::Verdict::retryAt(next);
}

void ResultUploader::settlePieces(const PendingResult& p,
                                  const std::vector<PieceOutcome>& outcomes) {
    const std::string id = wuKey(p.workUnitId);
    m_pieceRetry.erase(p.workUnitId);
    const PieceOutcome* first = nullptr;
    std::string refusedText;
    std::string firstRefusal;
    for (const PieceOutcome& o : outcomes) {
        if (o.accepted) {
            if (!first)
                first = &o;
            continue;
        }
        if (firstRefusal.empty())
            firstRefusal = o.detail;
        refusedText +=
            (refusedText.empty() ? "" : ", ") + std::to_string(o.shard) + " (" + o.detail + ")";
    }
    if (first) {
        const std::string json(first->receiptJson.begin(), first->receiptJson.end());
        auto receipt = net::Receipt::fromJson(json);
        if (!receipt) {
            settle(p, WorkUnitState::Rejected,
                   "the stored receipt of piece " + std::to_string(first->shard) +
                       " cannot be read: " + receipt.error().message,
                   nullptr);
            return;
        }
        if (!refusedText.empty())
            m_shared.log(EventLevel::Warning,
                         "work unit " + id + ": " + std::to_string(outcomes.size()) +
                             " pieces, these were refused: " + refusedText + "; the others count");
        UploadOutcome outcome;
        outcome.receipt = std::move(*receipt);
        outcome.receiptJson = json;
        settle(p, WorkUnitState::Accepted, {}, &outcome);
        return;
    }
    settle(p, WorkUnitState::Rejected, "every piece was refused: " + refusedText, nullptr,
           firstRefusal);
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
