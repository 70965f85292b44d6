// The validation loss of each round's weights.
#include "coordinator_impl.hpp"

#include "backend.hpp"

namespace tandem::coord {

std::optional<double> Coordinator::Impl::evaluate(std::span<const float> weights,
                                                  std::string* error) {
    const int T = run.model.maxSeqLen;
    const int B = std::max(1, cfg.validationBatch);
    const int64_t windows = int64_t{B} * std::max(1, cfg.validationBatches);
    const int64_t len = static_cast<int64_t>(validation.size());
    if (len < T + 1) {
        *error = "the validation text is shorter than one window";
        return std::nullopt;
    }
    auto backend = makeCpuBackend("cpu", std::max(1, cfg.threads));
    if (!backend) {
        *error = backend.error().message;
        return std::nullopt;
    }
    if (auto st = (*backend)->allocate(run.model, B, T); !st) {
        *error = st.error().message;
        return std::nullopt;
    }
    if (auto st = (*backend)->loadParameters(weights); !st) {
        *error = st.error().message;
        return std::nullopt;
    }
    std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
    double total = 0;
    int batches = 0;
    // Fixed, evenly spaced windows: every round is measured on the same text.
    for (int64_t w0 = 0; w0 < windows; w0 += B) {
        for (int b = 0; b < B; ++b) {
            const int64_t w = w0 + b;
            const int64_t off = windows > 1 ? w * (len - T - 1) / (windows - 1) : 0;
            for (int t = 0; t < T; ++t) {
                inputs[static_cast<size_t>(b) * T + t] = validation[static_cast<size_t>(off + t)];
                targets[static_cast<size_t>(b) * T + t] =
                    validation[static_cast<size_t>(off + t + 1)];
            }
        }
        auto loss = (*backend)->forward(inputs, targets, B, T);
        if (!loss) {
            *error = loss.error().message;
            return std::nullopt;
        }
        total += *loss;
        ++batches;
    }
    return total / batches;
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
        lock.unlock();
        std::string error;
        auto loss = evaluate(job.weights, &error);
        lock.lock();
        --evalBusy;
        if (loss) {
            auto u = db.prepare("UPDATE rounds SET val_loss = ? WHERE run_id = ? AND round = ?");
            if (u)
                (void)u->bind(1, *loss).bind(2, runId).bind(3, job.round).run();
            log("round " + std::to_string(job.round) + ": validation loss " + fmt(*loss, 6));
        } else {
            log("round " + std::to_string(job.round) + ": validation failed: " + error);
        }
        evalDoneCv.notify_all();
    }
}

void Coordinator::waitForValidation() {
    Impl& c = *m_impl;
    std::unique_lock lock(c.mu);
    if (!c.cfg.backgroundThreads) {
        // No validator thread: evaluate here.
        while (!c.evalQueue.empty()) {
            EvalJob job = std::move(c.evalQueue.front());
            c.evalQueue.pop_front();
            std::string error;
            auto loss = c.evaluate(job.weights, &error);
            if (loss) {
                auto u =
                    c.db.prepare("UPDATE rounds SET val_loss = ? WHERE run_id = ? AND round = ?");
                if (u)
                    (void)u->bind(1, *loss).bind(2, c.runId).bind(3, job.round).run();
            } else {
                c.log("validation failed: " + error);
            }
        }
        return;
    }
    c.evalDoneCv.wait(lock, [&] { return c.stopping || (c.evalQueue.empty() && c.evalBusy == 0); });
}

}  // namespace tandem::coord
