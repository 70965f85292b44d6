#include "samples.hpp"

#include "coordinator_impl.hpp"
#include "run_data.hpp"

#include <algorithm>
#include <chrono>

namespace tandem::coord {

int64_t samplingPositions(const ModelConfig& model, std::span<const int64_t> promptTokens,
                          int newTokens) {
    int64_t total = 0;
    for (int64_t p : promptTokens)
        for (int n = 0; n < newTokens; ++n)
            total += std::min<int64_t>(p + n, model.maxSeqLen);
    return total;
}

Expected<std::vector<ModelSample>> writeSamples(const ModelConfig& model,
                                                std::span<const float> weights,
                                                const Tokenizer& tokenizer,
                                                const SampleConfig& config, int64_t version,
                                                int threads) {
    auto backend = makeCpuBackend("cpu", std::max(1, threads));
    if (!backend)
        return backend.error();
    if (auto st = (*backend)->allocate(model, 1, model.maxSeqLen); !st)
        return st.error();
    if (auto st = (*backend)->loadParameters(weights); !st)
        return st.error();
    const auto& prompts = config.promptsToWrite();
    std::vector<ModelSample> samples;
    for (size_t i = 0; i < prompts.size(); ++i) {
        const auto start = std::chrono::steady_clock::now();
        auto ids = tokenizer.encode(prompts[i]);
        if (!ids)
            return ids.error();
        SampleSettings settings{config.tokens, config.topK, config.seed + i};
        auto written = sampleContinuation(**backend, model, *ids, settings);
        if (!written)
            return makeError("sampling the prompt \"" + prompts[i] +
                             "\": " + written.error().message);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        samples.push_back({version, prompts[i], tokenizer.decode(*written), took.count()});
    }
    return samples;
}

// ---- the validator thread's part

void Coordinator::Impl::sampleVersion(int64_t sampled, std::span<const float> weights,
                                      double forwardPositionsPerSecond) {
    const SampleConfig& sc = cfg.samples;
    if (sc.maxSeconds <= 0 || sc.tokens <= 0 || !tokenizer)
        return;  // without a tokenizer, restore() said why once
    const auto& prompts = sc.promptsToWrite();
    std::vector<int64_t> promptTokens;
    for (const std::string& p : prompts) {
        auto ids = tokenizer->encode(p);
        promptTokens.push_back(ids ? static_cast<int64_t>(ids->size()) : 1);
    }
    const double predicted =
        static_cast<double>(samplingPositions(run.model, promptTokens, sc.tokens)) /
        std::max(1e-9, forwardPositionsPerSecond);
    if (predicted > sc.maxSeconds) {
        if (!samplesTooSlowLogged)
            log("samples are off for this model: writing them would take about " +
                fmt(predicted, 3) + " s on this CPU, more than --sample-seconds (" +
                fmt(sc.maxSeconds, 3) + ")");
        samplesTooSlowLogged = true;
        return;
    }
    auto samples = writeSamples(run.model, weights, *tokenizer, sc, sampled, cfg.threads);
    if (!samples) {
        log("version " + std::to_string(sampled) + ": samples failed: " + samples.error().message);
        return;
    }
    std::lock_guard lock(mu);
    Transaction tx(db);
    Status stored = tx.started();
    for (size_t i = 0; stored && i < samples->size(); ++i) {
        const ModelSample& s = (*samples)[i];
        auto ins = db.prepare(
            "INSERT INTO samples(run_id, version, prompt_index, prompt, text, seconds, "
            "created_unix) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id, version, prompt_index) "
            "DO UPDATE SET prompt = excluded.prompt, text = excluded.text, seconds = "
            "excluded.seconds, created_unix = excluded.created_unix");
        if (!ins) {
            stored = ins.error();
            break;
        }
        stored = ins->bind(1, runId)
                     .bind(2, sampled)
                     .bind(3, static_cast<int64_t>(i))
                     .bind(4, s.prompt)
                     .bind(5, s.text)
                     .bind(6, s.seconds)
                     .bind(7, now())
                     .run();
    }
    if (stored)
        stored = tx.commit();
    ++pageEvents;  // the public page shows the newest sample
    if (!stored)
        log("version " + std::to_string(sampled) +
            ": samples not stored: " + stored.error().message);
}

std::vector<ModelSample> Coordinator::Impl::latestSamples(int64_t limit) {
    std::vector<ModelSample> out;
    auto q = db.prepare(
        "SELECT version, prompt, text, seconds FROM samples WHERE run_id = ? ORDER BY version "
        "DESC, prompt_index LIMIT ?");
    if (!q)
        return out;
    q->bind(1, runId).bind(2, limit);
    while (q->step())
        out.push_back({q->integer(0), q->text(1), q->text(2), q->real(3)});
    return out;
}

}  // namespace tandem::coord
