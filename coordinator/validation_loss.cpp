#include "validation_loss.hpp"

#include "backend.hpp"
#include "coordinator_impl.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace tandem::coord {

Expected<double> validationLoss(const ModelConfig& model, std::span<const float> weights,
                                std::span<const uint8_t> text, int batches, int batch,
                                int threads) {
    const TokenView one(text);
    return validationLoss(model, weights, std::span(&one, 1), batches, batch, threads);
}

Expected<double> validationLoss(const ModelConfig& model, std::span<const float> weights,
                                std::span<const TokenView> pieces, int batches, int batch,
                                int threads) {
    const int T = model.maxSeqLen;
    const int B = std::max(1, batch);
    const int64_t windows = int64_t{B} * std::max(1, batches);
    // Window starts over the pieces laid end to end; a window never crosses a piece's end.
    std::vector<int64_t> startEnds;
    int64_t starts = 0;
    for (const TokenView& p : pieces) {
        starts += std::max<int64_t>(0, p.count - T);
        startEnds.push_back(starts);
    }
    if (starts < 1)
        return makeError("the validation text is shorter than one window");
    auto backend = makeCpuBackend("cpu", std::max(1, threads));
    if (!backend)
        return backend.error();
    if (auto st = (*backend)->allocate(model, B, T); !st)
        return st.error();
    if (auto st = (*backend)->loadParameters(weights); !st)
        return st.error();
    std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
    double total = 0;
    int count = 0;
    for (int64_t w0 = 0; w0 < windows; w0 += B) {
        for (int b = 0; b < B; ++b) {
            const int64_t w = w0 + b;
            const int64_t at = windows > 1 ? w * (starts - 1) / (windows - 1) : 0;
            const size_t i = static_cast<size_t>(
                std::upper_bound(startEnds.begin(), startEnds.end(), at) - startEnds.begin());
            const TokenView& text = pieces[i];
            const int64_t off = at - (i == 0 ? 0 : startEnds[i - 1]);
            for (int t = 0; t < T; ++t) {
                inputs[static_cast<size_t>(b) * T + t] = text[off + t];
                targets[static_cast<size_t>(b) * T + t] = text[off + t + 1];
            }
        }
        auto loss = (*backend)->forward(inputs, targets, B, T);
        if (!loss)
            return loss.error();
        total += *loss;
        ++count;
    }
    return total / count;
}

Expected<double> Coordinator::Impl::evaluate(std::span<const float> weights) const {
    return validationLoss(run.model, weights, data.validation(), cfg.validationBatches,
                          cfg.validationBatch, cfg.threads);
}

void Coordinator::Impl::recordValidationLoss(int64_t round, double loss) {
    auto u = db.prepare("UPDATE rounds SET val_loss = ? WHERE run_id = ? AND round = ?");
    if (u)
        (void)u->bind(1, loss).bind(2, runId).bind(3, round).run();
    ++pageEvents;  // the public page's loss curve
}

void Coordinator::Impl::evaluateJob(const EvalJob& job, bool newest) {
    const auto start = std::chrono::steady_clock::now();
    auto loss = evaluate(job.weights);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    {
        std::lock_guard lock(mu);
        if (!loss) {
            log("round " + std::to_string(job.round) +
                ": validation failed: " + loss.error().message);
            return;
        }
        recordValidationLoss(job.round, *loss);
        log("round " + std::to_string(job.round) + ": validation loss " + fmt(*loss, 6));
    }
    // Samples of the newest version only: when rounds close faster than this thread keeps up,
    // older versions are skipped. The validation pass measured the CPU's speed.
    if (newest) {
        const double positions = static_cast<double>(cfg.validationBatches) *
                                 std::max(1, cfg.validationBatch) * run.model.maxSeqLen;
        sampleVersion(job.round + 1, job.weights, positions / std::max(1e-6, took.count()));
    }
}

void Coordinator::Impl::validatorLoop() {
    std::unique_lock lock(mu);
    while (true) {
        evalCv.wait(lock, [&] { return stopping || !evalQueue.empty(); });
        if (stopping)
            break;
        EvalJob job = std::move(evalQueue.front());
        evalQueue.pop_front();
        ++evalBusy;
        const bool newest = evalQueue.empty();
        lock.unlock();
        evaluateJob(job, newest);
        lock.lock();
        --evalBusy;
        evalDoneCv.notify_all();
    }
}

void Coordinator::Impl::waitForValidation() {
    std::unique_lock lock(mu);
    if (!cfg.backgroundThreads) {
        // No validator thread: evaluate here.
        while (!evalQueue.empty()) {
            EvalJob job = std::move(evalQueue.front());
            evalQueue.pop_front();
            const bool newest = evalQueue.empty();
            lock.unlock();
            evaluateJob(job, newest);
            lock.lock();
        }
        return;
    }
    evalDoneCv.wait(lock, [&] { return stopping || (evalQueue.empty() && evalBusy == 0); });
}

}  // namespace tandem::coord
