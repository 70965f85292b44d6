// tandem-bench-diloco's runs: DiLoCo against synchronous data-parallel training at equal tokens, in
// one process. K workers are simulated with K CPU backends; the pseudo-gradients go through the
// real codecs (fp32, fp16, int8), the coordinator's accumulate and its outer Nesterov step. Faults:
// uploads dropped at random, one result per round arriving one version late. Everything is
// deterministic in the seed. Prints a table of final validation losses and writes the loss curves
// (JSON and CSV) for docs/benchmarks.md and bench/plot_diloco.py.
//
// Dimensions: K workers, B batch per worker, T sequence, H inner steps per round, P parameters.
#include "aggregate.hpp"  // addScaled (the coordinator's fp32 commit), rebaseOnto
#include "codec.hpp"
#include "codec_int8.hpp"
#include "corpus.hpp"
#include "diloco_byzantine.hpp"
#include "diloco_study.hpp"
#include "model.hpp"
#include "outer.hpp"
#include "random.hpp"
#include "thread_pool.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

namespace tandem::bench {

EvalSet makeEvalSet(std::span<const uint8_t> heldOut, int B, int T, int batches) {
    EvalSet set;
    set.B = B;
    set.T = T;
    BatchSampler sampler(heldOut, 777);
    for (int i = 0; i < batches; ++i) {
        std::vector<int32_t> in(static_cast<size_t>(B) * T), tg(static_cast<size_t>(B) * T);
        sampler.next(B, T, in, tg);
        set.inputs.push_back(std::move(in));
        set.targets.push_back(std::move(tg));
    }
    return set;
}

Expected<double> evaluate(Backend& backend, const EvalSet& set, int batches) {
    double sum = 0;
    batches = std::min<int>(batches, static_cast<int>(set.inputs.size()));
    for (int i = 0; i < batches; ++i) {
        auto loss = backend.forward(set.inputs[i], set.targets[i], set.B, set.T);
        if (!loss)
            return loss.error();
        sum += *loss;
    }
    return sum / batches;
}

uint64_t workerDataSeed(int seed, int worker) {
    return 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(seed) + 1000u + worker;
}

Expected<int64_t> encodeUpload(Encoding encoding, int int8Block, std::span<const float> theta,
                               std::span<const float> end, Upload* up, ThreadPool* pool) {
    const int64_t P = static_cast<int64_t>(theta.size());
    switch (encoding) {
        case Encoding::Fp32:
            up->fp32.resize(static_cast<size_t>(P));
            for (int64_t i = 0; i < P; ++i) {
                up->fp32[i] = theta[i] - end[i];
                if (!std::isfinite(up->fp32[i]))
                    return makeError("pseudo-gradient is not finite at parameter " +
                                     std::to_string(i));
            }
            return P * 4;
        case Encoding::Fp16: {
            up->fp16.resize(static_cast<size_t>(P));
            auto st = encodeDeltaFp16(theta, end, up->fp16, pool);
            if (!st)
                return st.error();
            return P * 2;
        }
        case Encoding::Int8: {
            up->int8.resize(static_cast<size_t>(P));
            up->scales.resize(static_cast<size_t>(int8BlockCount(P, int8Block)));
            auto st = encodeDeltaInt8(theta, end, int8Block, up->int8, up->scales, pool);
            if (!st)
                return st.error();
            return int8EncodedBytes(P, int8Block);
        }
    }
    return makeError("unknown encoding");
}

Status accumulateUpload(Encoding encoding, int int8Block, std::span<float> sum, const Upload& up,
                        float weight, ThreadPool* pool) {
    switch (encoding) {
        case Encoding::Fp32:
            coord::addScaled(sum, up.fp32, weight, pool);
            return {};
        case Encoding::Fp16:
            accumulateFp16(sum, up.fp16, weight, pool);
            return {};
        case Encoding::Int8:
            return accumulateInt8(sum, up.int8, up.scales, int8Block, weight, pool);
    }
    return makeError("unknown encoding");
}

void drawLosses(Rng& faults, const Arm& arm, std::span<char> lost, std::vector<int>* onTime,
                RunResult* result) {
    for (size_t k = 0; k < lost.size(); ++k) {
        lost[k] = arm.dropRate > 0 && faults.uniform() < arm.dropRate;
        if (lost[k])
            ++result->droppedUploads;
        else
            onTime->push_back(static_cast<int>(k));
    }
}

int drawLate(Rng& faults, const Arm& arm, std::vector<int>* onTime, RunResult* result) {
    if (arm.staleness == 0 || onTime->empty())
        return -1;
    const size_t pick = faults.below(onTime->size());
    const int k = (*onTime)[pick];
    onTime->erase(onTime->begin() + static_cast<std::ptrdiff_t>(pick));
    ++result->staleResults;
    return k;
}

double lateWeight(double tokens, int s) {
    return tokens * std::pow(0.5, s);
}

Status addCurvePoint(Backend& evaluator, std::span<const float> theta, const RunContext& ctx,
                     int64_t step, int B, double bytesPerWorker, RunResult* result) {
    if (auto st = evaluator.loadParameters(theta); !st)
        return st;
    auto loss = evaluate(evaluator, *ctx.eval, ctx.options->evalBatches);
    if (!loss)
        return loss.error();
    result->curve.push_back({step, step * B * ctx.T, bytesPerWorker, *loss});
    return {};
}

Expected<std::unique_ptr<Backend>> makeWorker(const RunContext& ctx, int B) {
    auto made = makeCpuBackend("cpu", ctx.options->threads);
    if (!made)
        return made.error();
    if (auto st = (*made)->allocate(ctx.config, B, ctx.T); !st)
        return st.error();
    return std::move(*made);
}

Expected<std::vector<std::unique_ptr<Backend>>> makeWorkers(const RunContext& ctx, int K, int B,
                                                            std::span<const float> theta) {
    std::vector<std::unique_ptr<Backend>> workers;
    for (int k = 0; k < K; ++k) {
        auto made = makeWorker(ctx, B);
        if (!made)
            return made.error();
        if (auto st = (*made)->loadParameters(theta); !st)
            return st.error();
        workers.push_back(std::move(*made));
    }
    return workers;
}

std::vector<BatchSampler> workerSamplers(const RunContext& ctx, int K, int seed) {
    std::vector<BatchSampler> samplers;
    for (int k = 0; k < K; ++k)
        samplers.emplace_back(ctx.train, workerDataSeed(seed, k));
    return samplers;
}

OuterConfig armOuter(const Options& o, const Arm& arm) {
    OuterConfig outer = o.outer;
    if (arm.outerLr)
        outer.lr = *arm.outerLr;
    if (arm.outerMomentum)
        outer.momentum = *arm.outerMomentum;
    return outer;
}

namespace {

// Synchronous data-parallel AdamW: one step over the K workers' micro-batches at once. The mean
// loss over K x B sequences is the mean of the K micro-batch means, so its gradient is exactly
// the average of the K workers' gradients (what an all-reduce would produce).
Expected<RunResult> runSync(const RunContext& ctx, RunResult result) {
    const Options& o = *ctx.options;
    const int K = result.workers, B = result.batch, T = ctx.T;
    auto made = makeWorker(ctx, K * B);
    if (!made)
        return made.error();
    Backend& backend = **made;
    const ParameterLayout layout(ctx.config);
    std::vector<float> theta(static_cast<size_t>(layout.parameterCount()));
    initParameters(layout, theta, static_cast<uint64_t>(result.seed));
    if (auto st = backend.loadParameters(theta); !st)
        return st.error();
    std::vector<BatchSampler> samplers = workerSamplers(ctx, K, result.seed);
    const size_t micro = static_cast<size_t>(B) * T;
    std::vector<int32_t> inputs(K * micro), targets(K * micro);
    const LrSchedule schedule{ctx.lr, ctx.lr / 10, std::max(1, ctx.steps / 10), ctx.steps};
    const AdamWConfig adamw;
    const double bytesPerStep = 4.0 * static_cast<double>(result.parameters);  // fp32 gradient

    auto point = [&](int64_t step) -> Status {
        auto loss = evaluate(backend, *ctx.eval, o.evalBatches);
        if (!loss)
            return loss.error();
        result.curve.push_back(
            {step, step * B * T, bytesPerStep * static_cast<double>(step), *loss});
        return {};
    };
    if (auto st = point(0); !st)
        return st.error();
    for (int step = 0; step < ctx.steps; ++step) {
        for (int k = 0; k < K; ++k)
            samplers[k].next(B, T, std::span(inputs).subspan(k * micro, micro),
                             std::span(targets).subspan(k * micro, micro));
        auto loss = backend.forward(inputs, targets, K * B, T);
        if (!loss)
            return loss.error();
        result.lastTrainLoss = *loss;
        if (auto st = backend.backward(); !st)
            return st.error();
        if (auto st = backend.adamwStep(adamw, schedule.at(step)); !st)
            return st.error();
        if ((step + 1) % o.evalEvery == 0 && step + 1 < ctx.steps)
            if (auto st = point(step + 1); !st)
                return st.error();
    }
    if (auto st = point(ctx.steps); !st)
        return st.error();
    result.rounds = ctx.steps;
    result.bytesPerWorker = bytesPerStep * ctx.steps;
    return result;
}

// DiLoCo: K workers train H steps from the global weights, keep their AdamW moments, upload
// theta_start - theta_end; the coordinator commits each accepted upload with weight = tokens
// (x 0.5^s when s versions late, the coordinator's staleWeightFactor), divides by the weight sum
// and takes the outer Nesterov step.
Expected<RunResult> runDiloco(const RunContext& ctx, const Arm& arm, RunResult result) {
    const Options& o = *ctx.options;
    const int K = result.workers, B = result.batch, T = ctx.T, H = arm.H;
    if (ctx.steps % H != 0)
        return makeError("steps " + std::to_string(ctx.steps) +
                         " is not a multiple of H = " + std::to_string(H));
    const ParameterLayout layout(ctx.config);
    const int64_t P = layout.parameterCount();
    std::vector<float> theta(static_cast<size_t>(P)), velocity(static_cast<size_t>(P), 0.0f);
    std::vector<float> sum(static_cast<size_t>(P)), end(static_cast<size_t>(P));
    // wd<CODEC>: the weights a step starts from and the error-feedback residual.
    std::vector<float> stepStart, residual;
    if (arm.weightDeltas != WeightDeltaCodec::Off)
        residual.assign(static_cast<size_t>(P), 0.0f);
    initParameters(layout, theta, static_cast<uint64_t>(result.seed));
    const OuterConfig outer = armOuter(o, arm);
    ThreadPool pool(o.threads);

    auto made = makeWorkers(ctx, K, B, theta);
    if (!made)
        return made.error();
    std::vector<std::unique_ptr<Backend>> workers = std::move(*made);
    std::vector<BatchSampler> samplers = workerSamplers(ctx, K, result.seed);
    std::vector<Upload> uploads(static_cast<size_t>(K));
    // Byzantine arms: the last 20% of the workers (at least one) attack; every upload passes
    // the gate, attackers' first (the ratchet attack wants to be first).
    const bool byzantine = arm.attack != Attack::None || arm.gate != GateRule::None;
    const int attackers = arm.attack == Attack::None ? 0 : std::max(1, (K + 4) / 5);
    ByzantineGate gate(arm.gate, P);
    Rng attackRng(0xb12ull * static_cast<uint64_t>(result.seed) + 1);
    std::vector<std::vector<float>> deltas(byzantine ? static_cast<size_t>(K) : 0);
    std::vector<float> before;
    // Late results in flight: (arrives at round, upload, staleness).
    struct Late {
        int arrivesAtRound;
        int staleness;
        Upload upload;
        std::shared_ptr<const std::vector<float>> base;  // (P) the weights it was trained from
    };
    std::vector<Late> inFlight;
    Rng faults(0xfa17ull * static_cast<uint64_t>(result.seed) + static_cast<uint64_t>(H));
    const LrSchedule schedule{ctx.lr, ctx.lr / 10, std::max(1, ctx.steps / 10), ctx.steps};
    // What the coordinator puts in a work unit's manifest.
    const LrSchedule roundSchedule{ctx.lr, ctx.lr / 10, std::min(H / 10, 100), H};
    const LrSchedule constantSchedule{ctx.lr, ctx.lr, std::max(1, ctx.steps / 10), ctx.steps};
    const AdamWConfig adamw;
    const size_t n = static_cast<size_t>(B) * T;
    std::vector<int32_t> inputs(n), targets(n);
    double bytesAll = 0;  // summed over workers
    int64_t nextEval = o.evalEvery;

    // Worker 0's own weights are kept in ownEnd where a later round needs them.
    auto point = [&](int64_t step) {
        return addCurvePoint(*workers[0], theta, ctx, step, B, bytesAll / K, &result);
    };
    if (auto st = point(0); !st)
        return st.error();
    const int rounds = ctx.steps / H;
    // A worker's own last end point, where its next unit may start from (eager, keep).
    const bool keepsEnds = arm.startBlend > 0 || arm.keepOnDrop || arm.predictStart;
    std::vector<std::vector<float>> ownEnd(keepsEnds ? static_cast<size_t>(K) : 0);
    std::vector<char> lastDropped(static_cast<size_t>(K), 0);
    std::vector<float> start(static_cast<size_t>(P));
    std::vector<float> prevTheta;  // shift<F>: the version before theta
    // look (eager updates): the mean delta of the last round that committed anything, and each
    // worker's own last two deltas (its progress from its start), fresh and the one before.
    const size_t lookP = arm.lookahead || arm.predictStart ? static_cast<size_t>(P) : 0;
    std::vector<float> lastMean(lookP, 0.0f);
    std::vector<std::vector<float>> ownFresh(arm.lookahead ? static_cast<size_t>(K) : 0,
                                             std::vector<float>(lookP, 0.0f));
    std::vector<std::vector<float>> ownPrev = ownFresh;
    const double unitTokens = static_cast<double>(H) * B * T;
    // sreb<X>: each upload is relative to its unit's own start, its base for re-basing.
    std::vector<std::shared_ptr<const std::vector<float>>> unitStart(static_cast<size_t>(K));
    // Pipelined: one more close after the last unit commits the uploads still in flight, so
    // that every trained token reaches the weights as in the other arms.
    const int closes = arm.pipelined ? rounds + 1 : rounds;
    for (int r = 0; r < closes; ++r) {
        double workerNorms = 0;
        std::vector<int> onTime;
        const bool trains = r < rounds;
        for (int k = 0; trains && k < K; ++k) {
            Backend& w = *workers[k];
            // Where this unit starts: the assigned weights theta, or a blend with the worker's
            // own last end point (the manifest's start_blend).
            const float blend = r == 0                                   ? 0.0f
                                : arm.pipelined || arm.shiftFraction > 0 ? arm.startBlend
                                : arm.keepOnDrop && lastDropped[k]       ? 1.0f
                                                                         : 0.0f;
            const bool shifts = arm.shiftFraction > 0 && r > 0;
            // Whether the unit starts from `start` rather than from theta.
            const bool startMoved = shifts || arm.lookahead || (arm.predictStart && r > 0) ||
                                    blend > 0 || (arm.momentumLookahead > 0 && r > 0);
            if (shifts) {
                const auto& mine = blend > 0 ? ownEnd[static_cast<size_t>(k)] : prevTheta;
                for (int64_t i = 0; i < P; ++i)
                    start[i] = prevTheta[i] + blend * (mine[i] - prevTheta[i]);
                if (auto st = w.loadParameters(start); !st)
                    return st.error();
            } else if (arm.lookahead) {
                // The outer step (v = mu v + d; theta -= lr (d + mu v)) taken tentatively with
                // d = the last mean + this worker's share x (its fresh delta - its last one).
                const float share = 1.0f / static_cast<float>(K);
                const float mu = outer.momentum;
                const auto& fresh = ownFresh[static_cast<size_t>(k)];
                const auto& prev = ownPrev[static_cast<size_t>(k)];
                for (int64_t i = 0; i < P; ++i) {
                    const float d = lastMean[i] + share * (fresh[i] - prev[i]);
                    start[i] = theta[i] - outer.lr * ((1 + mu) * d + mu * mu * velocity[i]);
                }
                if (auto st = w.loadParameters(start); !st)
                    return st.error();
            } else if (arm.predictStart && r > 0) {
                const float share = 1.0f / static_cast<float>(K);
                const float mu = outer.momentum;
                const auto& mine = ownEnd[static_cast<size_t>(k)];
                for (int64_t i = 0; i < P; ++i) {
                    const float d = share * (theta[i] - mine[i]) + (1 - share) * lastMean[i];
                    start[i] = theta[i] - outer.lr * ((1 + mu) * d + mu * mu * velocity[i]);
                }
                if (auto st = w.loadParameters(start); !st)
                    return st.error();
            } else if (blend > 0 || (arm.momentumLookahead > 0 && r > 0)) {
                // nest<C>: plus C x the known part of the next outer step, -lr mu^2 v.
                const float ahead =
                    arm.momentumLookahead * outer.lr * outer.momentum * outer.momentum;
                const auto& mine = blend > 0 ? ownEnd[static_cast<size_t>(k)] : theta;
                // A blend of 1 (keep) starts at the own end point exactly: theta + (mine -
                // theta) can be an ulp away from it.
                for (int64_t i = 0; i < P; ++i) {
                    const float base =
                        blend == 1.0f ? mine[i] : theta[i] + blend * (mine[i] - theta[i]);
                    start[i] = base - ahead * velocity[i];
                }
                if (auto st = w.loadParameters(start); !st)
                    return st.error();
            } else if (auto st = w.loadParameters(theta); !st) {
                return st.error();
            }
            const int shiftStep = static_cast<int>(std::lround(arm.shiftFraction * H));
            for (int h = 0; h < H; ++h) {
                if (shifts && h == shiftStep) {
                    // The current version arrived: keep the progress, move onto it.
                    if (auto st = w.storeParameters(end); !st)
                        return st.error();
                    for (int64_t i = 0; i < P; ++i)
                        end[i] += theta[i] - start[i];
                    if (auto st = w.loadParameters(end); !st)
                        return st.error();
                }
                samplers[k].next(B, T, inputs, targets);
                auto loss = w.forward(inputs, targets, B, T);
                if (!loss)
                    return loss.error();
                if (k == 0)
                    result.lastTrainLoss = *loss;
                if (auto st = w.backward(); !st)
                    return st.error();
                const int64_t step = int64_t{r} * H + h;
                const float lr = arm.roundSchedule ? roundSchedule.at(h)
                                 : arm.constantLr  ? constantSchedule.at(step)
                                                   : schedule.at(step);
                if (auto st = w.adamwStep(adamw, lr); !st)
                    return st.error();
            }
            if (auto st = w.storeParameters(end); !st)
                return st.error();
            if (keepsEnds)
                ownEnd[static_cast<size_t>(k)] = end;
            // What the upload is relative to: the assigned weights theta (the coordinator knows
            // them and re-bases from them), or for look the worker's own start (its progress).
            if (arm.startRebase)
                unitStart[static_cast<size_t>(k)] =
                    std::make_shared<const std::vector<float>>(startMoved ? start : theta);
            const std::vector<float>& from = arm.lookahead     ? start
                                             : arm.startRebase ? *unitStart[static_cast<size_t>(k)]
                                                               : theta;
            if (arm.lookahead) {
                auto& fresh = ownFresh[static_cast<size_t>(k)];
                ownPrev[static_cast<size_t>(k)].swap(fresh);
                for (int64_t i = 0; i < P; ++i)
                    fresh[i] = start[i] - end[i];
            }
            if (byzantine) {
                auto& d = deltas[static_cast<size_t>(k)];
                d.resize(static_cast<size_t>(P));
                for (int64_t i = 0; i < P; ++i)
                    d[i] = theta[i] - end[i];
                if (k >= K - attackers) {
                    gate.attack(arm.attack, d, r, attackRng);
                    for (int64_t i = 0; i < P; ++i)
                        end[i] = theta[i] - d[i];
                }
            }
            // A NaN upload never gets past the coordinator's stream (non_finite), and the
            // worker's encoder refuses one: it is judged (refused) without being encoded.
            const bool unencodable = arm.attack == Attack::Nan && k >= K - attackers;
            auto bytes = unencodable ? Expected<int64_t>(4 * P)
                                     : encodeUpload(arm.encoding, o.int8Block, from, end,
                                                    &uploads[k], &pool);
            if (!bytes)
                return makeError("round " + std::to_string(r) + ", worker " + std::to_string(k) +
                                 ": " + bytes.error().message);
            bytesAll += static_cast<double>(*bytes);
            double squares = 0;
            for (int64_t i = 0; i < P; ++i) {
                const double d = static_cast<double>(from[i]) - end[i];
                squares += d * d;
            }
            workerNorms += std::sqrt(squares) / K;
            uploads[k].weight = unitTokens;
        }
        // Fates of this round's uploads: lost, late, or on time.
        if (trains)
            drawLosses(faults, arm, lastDropped, &onTime, &result);
        // The weights of this round, shared by its late uploads (to re-base them on arrival).
        const auto base = std::make_shared<const std::vector<float>>(theta);
        if (arm.pipelined) {
            for (int k : onTime)
                inFlight.push_back({r + 1, 1, uploads[k],
                                    arm.startRebase ? unitStart[static_cast<size_t>(k)] : base});
            result.staleResults += static_cast<int>(onTime.size());
            onTime.clear();
        } else if (const int late = drawLate(faults, arm, &onTime, &result); late >= 0) {
            inFlight.push_back({r + arm.staleness, arm.staleness, uploads[late], base});
        }
        // The coordinator's round: commit in arrival order, then the outer step.
        std::fill(sum.begin(), sum.end(), 0.0f);
        double weightSum = 0;
        for (auto it = inFlight.begin(); it != inFlight.end();) {
            if (it->arrivesAtRound != r) {
                ++it;
                continue;
            }
            const double w = lateWeight(it->upload.weight, it->staleness);
            if (auto st = accumulateUpload(arm.encoding, o.int8Block, sum, it->upload,
                                           static_cast<float>(w), &pool);
                !st)
                return st.error();
            if (arm.rebaseFraction > 0 && !arm.lookahead)
                coord::rebaseOnto(sum, *it->base, theta, static_cast<float>(w) * arm.rebaseFraction,
                                  &pool);
            weightSum += w;
            it = inFlight.erase(it);
        }
        if (byzantine)
            std::stable_partition(onTime.begin(), onTime.end(),
                                  [&](int k) { return k >= K - attackers; });
        for (int k : onTime) {
            double w = uploads[k].weight;
            if (byzantine) {
                w *= gate.judge(r, deltas[static_cast<size_t>(k)], theta);
                if (w == 0)
                    continue;
            }
            if (auto st = accumulateUpload(arm.encoding, o.int8Block, sum, uploads[k],
                                           static_cast<float>(w), &pool);
                !st)
                return st.error();
            weightSum += w;
        }
        if (weightSum > 0 && workerNorms > 0) {
            double squares = 0;
            for (float x : sum)
                squares += static_cast<double>(x) * x;
            result.agreementLast = std::sqrt(squares) / weightSum / workerNorms;
            result.agreementMean += result.agreementLast / rounds;
        }
        if (byzantine)
            before = theta;
        if ((arm.lookahead || arm.predictStart) && weightSum > 0)
            for (int64_t i = 0; i < P; ++i)
                lastMean[i] = static_cast<float>(sum[i] / weightSum);
        // tokw: the uploads that were lost count as zero deltas.
        const double divisor = arm.dueWeight ? std::max(weightSum, K * unitTokens) : weightSum;
        if (arm.shiftFraction > 0)
            prevTheta = theta;
        if (weightSum > 0) {
            if (arm.weightDeltas != WeightDeltaCodec::Off)
                stepStart = theta;
            outerNesterovStep(theta, velocity, sum, static_cast<float>(1.0 / divisor), outer,
                              &pool);
            // wd<CODEC>: the version moves by the quantized update, the rest carried over.
            if (arm.weightDeltas != WeightDeltaCodec::Off)
                if (auto q =
                        quantizeWithFeedback(stepStart, theta, residual, arm.weightDeltas, &pool);
                    !q)
                    return q.error();
        } else {
            ++result.emptyRounds;  // nothing arrived: the version does not move
        }
        if (byzantine)
            gate.endRound(before, theta);
        const int64_t step = int64_t{r + 1} * H;
        if (step >= nextEval && r + 1 < rounds) {
            if (auto st = point(step); !st)
                return st.error();
            while (nextEval <= step)
                nextEval += o.evalEvery;
        }
    }
    if (auto st = point(ctx.steps); !st)
        return st.error();
    result.rounds = rounds;
    result.bytesPerWorker = bytesAll / K;
    result.gateRefused = gate.refused;
    result.gateDownWeighted = gate.downWeighted;
    return result;
}

}  // namespace

Expected<RunResult> runOne(const RunContext& base, const Arm& arm, int seed) {
    RunContext ctx = base;  // with this arm's steps and inner lr
    if (arm.steps > 0)
        ctx.steps = arm.steps;
    if (arm.innerLr)
        ctx.lr = *arm.innerLr;
    RunResult result;
    result.workers = arm.workers > 0 ? arm.workers : ctx.options->workers;
    result.batch = arm.batch > 0 ? arm.batch : ctx.options->batch;
    result.innerLr = ctx.lr;
    result.configName = ctx.configName;
    result.config = ctx.config;
    result.arm = arm.name;
    result.seed = seed;
    result.sync = arm.sync;
    result.H = arm.sync ? 1 : arm.H;
    result.encoding = arm.encoding;
    result.dropRate = arm.dropRate;
    result.staleness = arm.staleness;
    result.T = ctx.T;
    result.parameters = ctx.config.parameterCount();
    result.tokensPerWorker = int64_t{ctx.steps} * result.batch * ctx.T;
    result.tokensTotal = result.tokensPerWorker * result.workers;
    const auto start = std::chrono::steady_clock::now();
    auto done = arm.sync                  ? runSync(ctx, std::move(result))
                : arm.asyncSpread > 0     ? runStreamingAsync(ctx, arm, std::move(result))
                : arm.streamFragments > 0 ? runStreaming(ctx, arm, std::move(result))
                                          : runDiloco(ctx, arm, std::move(result));
    if (done)
        done->maxRise = maxRise(done->curve);
    if (done)
        done->wallSeconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return done;
}

double maxRise(const std::vector<CurvePoint>& curve) {
    double best = 0, rise = 0;
    for (size_t i = 0; i < curve.size(); ++i) {
        const double loss = curve[i].valLoss;
        if (!std::isfinite(loss))
            return 1e9;  // a NaN or infinite loss: diverged
        best = i == 0 ? loss : std::min(best, loss);
        rise = std::max(rise, loss / best - 1.0);
    }
    return rise;
}

}  // namespace tandem::bench
