// The upload thread: results waiting for their receipt.
#include "engine_impl.hpp"

#include <algorithm>
#include <chrono>

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

void Engine::Impl::uploadMain() {
    int attempt = 0;
    int64_t retryAtMs = 0;
    for (;;) {
        PendingResult p;
        {
            std::unique_lock lock(mu);
            if (uploadStop || crashed.load())
                return;
            // Pause and snooze stop compute and downloads; finished results still go out
            // (a result only ages toward the staleness bound while it waits).
            if (queue.empty() || now() < retryAtMs) {
                cv.wait_for(lock, std::chrono::milliseconds(
                                      std::clamp<int64_t>(cfg.pollIntervalMs, 1, 1000)));
                continue;
            }
            p = queue.front();
        }
        RulesVerdict v = ruleGate.checkUpload(p.bytes);
        if (!v.allowed()) {
            {
                std::lock_guard lock(mu);
                snap.nextAction =
                    "upload of work unit " + wuKey(p.workUnitId) + " waits: " + v.reason();
            }
            std::unique_lock lock(mu);
            cv.wait_for(
                lock, std::chrono::milliseconds(std::clamp<int64_t>(cfg.pollIntervalMs, 1, 1000)));
            continue;
        }
        // Ask first whether the result is still wanted (a heartbeat): a unit the coordinator
        // abandoned meanwhile (too stale, lease expired) is not worth the uplink.
        if (!p.stillWantedChecked) {
            net::ProgressReport report;
            report.step = p.steps;
            report.loss = p.lossLast;
            auto reply = deps.api->reportProgress(p.workUnitId, report);
            if (crashed.load())
                return;
            {
                std::lock_guard lock(mu);
                if (!queue.empty() && queue.front().workUnitId == p.workUnitId)
                    queue.front().stillWantedChecked = true;
            }
            if (reply && reply->action == "abandon") {
                settle(p, WorkUnitState::Abandoned,
                       reply->reason.empty() ? "the coordinator abandoned it" : reply->reason,
                       nullptr);
                continue;
            }
        }
        transition(p.workUnitId, WorkUnitState::Uploading);
        {
            std::lock_guard lock(mu);
            snap.upload = UploadInFlight{wuKey(p.workUnitId), 0, p.bytes, 0};
        }
        const int64_t startMs = now();
        auto res = deps.api->uploadResult(p.uploadUrl, p.file, p.signature,
                                          [&](int64_t done, int64_t total, double rate) {
                                              if (done > 0)
                                                  hook("upload");
                                              std::lock_guard lock(mu);
                                              if (snap.upload) {
                                                  snap.upload->bytesDone = done;
                                                  if (total > 0)
                                                      snap.upload->bytesTotal = total;
                                                  snap.upload->bytesPerSecond = rate;
                                              }
                                              return !uploadStop && !crashed.load();
                                          });
        if (crashed.load())
            return;
        {
            std::lock_guard lock(mu);
            snap.upload.reset();
        }
        if (!res) {
            recordTransfer(Direction::Up, "result", res.error().bytesTransferred, startMs, false,
                           p.workUnitId, res.error().message);
            bool stopping;
            {
                std::lock_guard lock(mu);
                stopping = uploadStop;
            }
            if (stopping) {
                transition(p.workUnitId, WorkUnitState::Trained, "upload interrupted");
                return;
            }
            if (res.error().transient) {
                ++attempt;
                const double u = jitterUnit();
                const int64_t delay = backoffDelayMs(cfg, attempt, u, res.error().retryAfterMs);
                retryAtMs = now() + delay;
                transition(p.workUnitId, WorkUnitState::Trained, res.error().message);
                log(EventLevel::Warning, "upload of work unit " + wuKey(p.workUnitId) +
                                             " failed: " + res.error().message + " (retry in " +
                                             std::to_string(delay / 1000) + " s)");
                {
                    std::lock_guard lock(mu);
                    snap.nextAction = "retry the upload of work unit " + wuKey(p.workUnitId) +
                                      " at " + describe(retryAtMs);
                }
                continue;
            }
            settle(p, WorkUnitState::Rejected, res.error().message, nullptr);
            attempt = 0;
            continue;
        }
        hook("receipt");
        recordTransfer(Direction::Up, "result", res->bytesSent, startMs, true, p.workUnitId, {});
        attempt = 0;
        retryAtMs = 0;
        const net::Receipt& r = res->receipt;
        std::string problem;
        if (const auto pinned = registrar.coordinatorKey(); !pinned || !r.verify(*pinned))
            problem = "the receipt is not signed by the coordinator key pinned at registration";
        else if (r.workUnitId != p.workUnitId)
            problem = "the receipt is for work unit " + wuKey(r.workUnitId);
        else if (r.resultDigest != p.digest)
            problem = "the receipt names another result digest (" +
                      net::toHex(r.resultDigest).substr(0, 16) + "...)";
        if (!problem.empty()) {
            settle(p, WorkUnitState::Rejected, problem, nullptr);
            continue;
        }
        settle(p, WorkUnitState::Accepted, {}, &*res);
    }
}

void Engine::Impl::settle(const PendingResult& p, WorkUnitState state, const std::string& detail,
                          const UploadOutcome* outcome) {
    if (crashed.load())
        return;
    const std::string id = wuKey(p.workUnitId);
    LastUpload last;
    last.id = id;
    last.atMs = now();
    last.state = state;
    last.detail = detail;
    if (state == WorkUnitState::Accepted) {
        Receipt rec;
        rec.workUnitId = id;
        rec.roundApplied = outcome->receipt.round;
        rec.weight = outcome->receipt.weight;
        rec.credit = outcome->receipt.weight;
        rec.receivedAtMs = now();
        rec.signature.assign(outcome->receipt.signature.begin(), outcome->receipt.signature.end());
        rec.body.assign(outcome->receiptJson.begin(), outcome->receiptJson.end());
        if (auto st = ledger.recordReceipt(rec); !st) {
            log(EventLevel::Error,
                "ledger: cannot store the receipt of work unit " + id + ": " + st.error().message);
            return;  // stays pending; the upload is idempotent
        }
        last.round = rec.roundApplied;
        last.credit = rec.credit;
        log(EventLevel::Info, "work unit " + id + " accepted into round " +
                                  std::to_string(rec.roundApplied) + " (weight " +
                                  std::to_string(static_cast<int64_t>(rec.weight)) + ")");
    } else if (state == WorkUnitState::Abandoned) {
        transition(p.workUnitId, WorkUnitState::Abandoned, detail);
        log(EventLevel::Warning,
            "work unit " + id + ": result not sent, the coordinator abandoned it: " + detail);
    } else {
        transition(p.workUnitId, WorkUnitState::Rejected, detail);
        log(EventLevel::Error, "work unit " + id + " was refused: " + detail);
    }
    removePendingResult(p);
    {
        std::lock_guard lock(mu);
        if (!queue.empty() && queue.front().workUnitId == p.workUnitId)
            queue.pop_front();
        snap.lastUpload = last;
    }
    refreshTotals();
    if (deps.observer)
        deps.observer->workUnitSettled(id, state);
    notifyAll();
}

}  // namespace tandem::core
