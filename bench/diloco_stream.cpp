// Streaming DiLoCo (Douillard et al., 2025, arXiv 2501.18512) in tandem-bench-diloco: the
// parameters in F fragments, each synchronised every H steps on a staggered schedule, so that
// only P / F values are on the wire at a time and a fragment's new global version can reach the
// workers tau ~ H / F steps after its sync instead of a whole unit later.
//
// Fragments are contiguous parameter ranges whose bounds are multiples of 256 values (the
// coordinator's planned aggregation shards, and the int8 codec's default block, so a fragment
// encodes exactly as its part of the whole model); `tiny` has two layers, too few for the
// paper's layer fragments at F = 5 or 10.
//
// Schedule: fragment p (offset o_p = p x H / F rounded) syncs at steps H + o_p + n H, and every
// fragment once more after the last step, so each has as many outer steps and uploads as
// DiLoCo's rounds and every trained token reaches the weights. At a sync every worker uploads
// (the global fragment it holds - its local fragment) in the arm's codec; the coordinator
// averages them and takes its outer Nesterov step on that fragment. tau steps later every worker
// merges local = mix x local + (1 - mix) x global (mix 0: replaces); its AdamW moments stay as
// they are. At a step with both, syncs come before merges (with tau = H, the whole model late
// by a unit, the sync uploads against the version before). stream1-tau0-mix0 is DiLoCo.
//
// Faults, per fragment upload, with DiLoCo's rules (diloco_runs.cpp), drawn in the same order,
// so that with one fragment each arm is its DiLoCo arm to the bit: drop<P> loses an upload
// (keep: its worker skips that sync's merge and trains on from its own fragment; tokw: the
// fragment's mean divides by the weight of every upload due); stale<S> delivers one upload of
// each sync at the fragment's S-th sync after, with weight 2^-S, re-based onto the fragment's
// global values of then. A sync that receives nothing takes no outer step.
//
// Dimensions: K workers, B batch per worker, T sequence, H inner steps per round, P parameters,
// F fragments.
#include "aggregate.hpp"
#include "diloco_study.hpp"
#include "model.hpp"
#include "outer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

namespace tandem::bench {

namespace {

constexpr int64_t kFragmentAlignment = 256;  // values; = kInt8DefaultBlock

}  // namespace

Expected<std::vector<int64_t>> fragmentBounds(int64_t P, int F) {
    std::vector<int64_t> bounds = {0};
    for (int p = 1; p < F; ++p) {
        const double exact = static_cast<double>(P) * p / F;
        bounds.push_back(std::llround(exact / kFragmentAlignment) * kFragmentAlignment);
    }
    bounds.push_back(P);
    for (int p = 0; p < F; ++p)
        if (bounds[static_cast<size_t>(p) + 1] <= bounds[static_cast<size_t>(p)])
            return makeError(std::to_string(P) + " parameters do not make " + std::to_string(F) +
                             " fragments of whole " + std::to_string(kFragmentAlignment) +
                             "-value blocks");
    return bounds;
}

namespace {

// Values whose bits differ between a and b, inside [begin, end) and outside it.
void countChanges(std::span<const float> a, std::span<const float> b, int64_t begin, int64_t end,
                  RunResult::Stream* stats) {
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0)
            continue;
        const auto at = static_cast<int64_t>(i);
        ++(at >= begin && at < end ? stats->changedInside : stats->changedOutside);
    }
}

}  // namespace

Expected<RunResult> runStreaming(const RunContext& ctx, const Arm& arm, RunResult result) {
    const Options& o = *ctx.options;
    const int K = result.workers, B = result.batch, T = ctx.T, H = arm.H;
    const int F = arm.streamFragments, tau = arm.streamTau.value_or(0);
    const float mix = arm.streamMix;
    if (ctx.steps % H != 0)
        return makeError("steps " + std::to_string(ctx.steps) +
                         " is not a multiple of H = " + std::to_string(H));
    const ParameterLayout layout(ctx.config);
    const int64_t P = layout.parameterCount();
    auto bounds = fragmentBounds(P, F);
    if (!bounds)
        return bounds.error();
    std::vector<int> offsets(static_cast<size_t>(F));
    for (int p = 0; p < F; ++p)
        offsets[static_cast<size_t>(p)] =
            static_cast<int>(std::lround(static_cast<double>(p) * H / F));
    result.stream.fragments = F;
    result.stream.tau = tau;
    result.stream.mix = mix;

    // theta: the coordinator's global weights; held: the global fragments the workers have
    // merged (all workers merge at the same steps), what their uploads are relative to.
    std::vector<float> theta(static_cast<size_t>(P)), velocity(static_cast<size_t>(P), 0.0f);
    initParameters(layout, theta, static_cast<uint64_t>(result.seed));
    std::vector<float> held = theta, sum(static_cast<size_t>(P)), local(static_cast<size_t>(P));
    std::vector<float> previous(static_cast<size_t>(P));  // a worker's before a merge
    const OuterConfig outer = armOuter(o, arm);
    ThreadPool pool(o.threads);

    auto made = makeWorkers(ctx, K, B, theta);
    if (!made)
        return made.error();
    std::vector<std::unique_ptr<Backend>> workers = std::move(*made);
    std::vector<BatchSampler> samplers = workerSamplers(ctx, K, result.seed);
    // The workers' parameters live in their backends between merges: evaluate elsewhere.
    auto evaluator = makeWorker(ctx, B);
    if (!evaluator)
        return evaluator.error();
    // uploads[p x K + k]: worker k's upload of fragment p at that fragment's latest sync.
    std::vector<Upload> uploads(static_cast<size_t>(F) * K);
    Rng faults(0xfa17ull * static_cast<uint64_t>(result.seed) + static_cast<uint64_t>(H));
    struct Late {
        int fragment;
        int64_t arrivesAtSync;  // of its fragment, counted from 0
        Upload upload;
        std::vector<float> base;  // the fragment's global values it is relative to
    };
    std::vector<Late> inFlight;
    std::vector<int64_t> syncsOf(static_cast<size_t>(F), 0);
    const LrSchedule schedule{ctx.lr, ctx.lr / 10, std::max(1, ctx.steps / 10), ctx.steps};
    const LrSchedule constantSchedule{ctx.lr, ctx.lr, std::max(1, ctx.steps / 10), ctx.steps};
    const AdamWConfig adamw;
    const size_t n = static_cast<size_t>(B) * T;
    std::vector<int32_t> inputs(n), targets(n);
    const double unitTokens = static_cast<double>(H) * B * T;
    double bytesAll = 0;  // summed over workers
    int64_t nextEval = o.evalEvery;
    auto point = [&](int64_t step) {
        return addCurvePoint(**evaluator, theta, ctx, step, B, bytesAll / K, &result);
    };
    if (auto st = point(0); !st)
        return st.error();

    struct Merge {
        int64_t atStep;
        int fragment;
        std::vector<float> global;  // the fragment's new global values
        std::vector<char> keeps;    // (K) workers that keep their own fragment (keep)
    };
    std::vector<Merge> pending;
    const auto range = [&](std::vector<float>& v, int p) {
        const int64_t begin = (*bounds)[static_cast<size_t>(p)];
        return std::span(v).subspan(
            static_cast<size_t>(begin),
            static_cast<size_t>((*bounds)[static_cast<size_t>(p) + 1] - begin));
    };
    for (int64_t t = 1; t <= ctx.steps; ++t) {
        for (int k = 0; k < K; ++k) {
            Backend& w = *workers[static_cast<size_t>(k)];
            samplers[static_cast<size_t>(k)].next(B, T, inputs, targets);
            auto loss = w.forward(inputs, targets, B, T);
            if (!loss)
                return loss.error();
            if (k == 0)
                result.lastTrainLoss = *loss;
            if (auto st = w.backward(); !st)
                return st.error();
            const float lr = arm.constantLr ? constantSchedule.at(t - 1) : schedule.at(t - 1);
            if (auto st = w.adamwStep(adamw, lr); !st)
                return st.error();
        }
        // The fragments whose sync is due after step t: on schedule, or all after the last.
        std::vector<int> due;
        for (int p = 0; p < F; ++p) {
            const int64_t offset = offsets[static_cast<size_t>(p)];
            if (t == ctx.steps || (t >= H + offset && (t - offset) % H == 0))
                due.push_back(p);
        }
        if (!due.empty()) {
            std::fill(sum.begin(), sum.end(), 0.0f);
            std::vector<double> norms(static_cast<size_t>(F), 0.0);
            for (int k = 0; k < K; ++k) {
                if (auto st = workers[static_cast<size_t>(k)]->storeParameters(local); !st)
                    return st.error();
                for (int p : due) {
                    Upload& up = uploads[static_cast<size_t>(p) * K + k];
                    auto bytes = encodeUpload(arm.encoding, o.int8Block, range(held, p),
                                              range(local, p), &up, &pool);
                    if (!bytes)
                        return makeError("step " + std::to_string(t) + ", worker " +
                                         std::to_string(k) + ", fragment " + std::to_string(p) +
                                         ": " + bytes.error().message);
                    bytesAll += static_cast<double>(*bytes);
                    up.weight = unitTokens;
                    double squares = 0;
                    for (int64_t i = (*bounds)[static_cast<size_t>(p)];
                         i < (*bounds)[static_cast<size_t>(p) + 1]; ++i) {
                        const double d = static_cast<double>(held[i]) - local[i];
                        squares += d * d;
                    }
                    norms[static_cast<size_t>(p)] += std::sqrt(squares) / K;
                }
            }
            for (int p : due) {
                const int64_t sync = syncsOf[static_cast<size_t>(p)]++;
                Upload* fragmentUploads = &uploads[static_cast<size_t>(p) * K];
                // Fates: lost, late, or on time. keep: the workers whose upload was lost skip
                // this sync's merge.
                std::vector<char> lost(static_cast<size_t>(K), 0);
                std::vector<int> onTime;
                drawLosses(faults, arm, lost, &onTime, &result);
                if (const int late = drawLate(faults, arm, &onTime, &result); late >= 0) {
                    auto base = range(held, p);
                    inFlight.push_back({p, sync + arm.staleness, fragmentUploads[late],
                                        std::vector<float>(base.begin(), base.end())});
                }
                std::vector<char> keeps =
                    arm.keepOnDrop ? lost : std::vector<char>(static_cast<size_t>(K), 0);
                // The fragment's round: late arrivals (re-based) first, then the on-time ones.
                auto part = range(sum, p);
                double weightSum = 0;
                for (auto it = inFlight.begin(); it != inFlight.end();) {
                    if (it->fragment != p || it->arrivesAtSync != sync) {
                        ++it;
                        continue;
                    }
                    const double w = lateWeight(it->upload.weight, arm.staleness);
                    if (auto st = accumulateUpload(arm.encoding, o.int8Block, part, it->upload,
                                                   static_cast<float>(w), &pool);
                        !st)
                        return st.error();
                    coord::rebaseOnto(part, it->base, range(theta, p), static_cast<float>(w),
                                      &pool);
                    weightSum += w;
                    it = inFlight.erase(it);
                }
                for (int k : onTime) {
                    const Upload& up = fragmentUploads[k];
                    if (auto st = accumulateUpload(arm.encoding, o.int8Block, part, up,
                                                   static_cast<float>(up.weight), &pool);
                        !st)
                        return st.error();
                    weightSum += up.weight;
                }
                if (weightSum > 0 && norms[static_cast<size_t>(p)] > 0) {
                    double squares = 0;
                    for (float x : part)
                        squares += static_cast<double>(x) * x;
                    result.agreementLast =
                        std::sqrt(squares) / weightSum / norms[static_cast<size_t>(p)];
                    result.agreementMean += result.agreementLast;
                }
                // tokw: the uploads that were lost count as zero deltas.
                const double divisor =
                    arm.dueWeight ? std::max(weightSum, K * unitTokens) : weightSum;
                if (weightSum > 0)
                    outerNesterovStep(range(theta, p), range(velocity, p), part,
                                      static_cast<float>(1.0 / divisor), outer, &pool);
                else
                    ++result.emptyRounds;
                auto fresh = range(theta, p);
                pending.push_back(
                    {t + tau, p, std::vector<float>(fresh.begin(), fresh.end()), std::move(keeps)});
                if (result.stream.firstSyncs.size() < 32)
                    result.stream.firstSyncs.emplace_back(t, p);
                ++result.stream.syncs;
            }
        }
        // Merges that arrive after step t (those of syncs at t - tau), in the order of the syncs.
        for (auto it = pending.begin(); it != pending.end();) {
            if (it->atStep != t) {
                ++it;
                continue;
            }
            const int p = it->fragment;
            std::copy(it->global.begin(), it->global.end(), range(held, p).begin());
            for (int k = 0; k < K; ++k) {
                if (it->keeps[static_cast<size_t>(k)]) {
                    ++result.stream.keptOwn;  // keep: its upload was lost, it trains on alone
                    continue;
                }
                Backend& w = *workers[static_cast<size_t>(k)];
                if (auto st = w.storeParameters(previous); !st)
                    return st.error();
                local = previous;
                auto mine = range(local, p);
                if (mix == 0.0f) {
                    std::copy(it->global.begin(), it->global.end(), mine.begin());
                } else {
                    for (size_t i = 0; i < mine.size(); ++i)
                        mine[i] = mix * mine[i] + (1 - mix) * it->global[i];
                }
                if (auto st = w.loadParameters(local); !st)
                    return st.error();
                // Read back what the worker now holds: what the merge changed, bit by bit.
                if (auto st = w.storeParameters(local); !st)
                    return st.error();
                countChanges(previous, local, (*bounds)[static_cast<size_t>(p)],
                             (*bounds)[static_cast<size_t>(p) + 1], &result.stream);
            }
            ++result.stream.merges;
            it = pending.erase(it);
        }
        if (t >= nextEval && t < ctx.steps) {
            if (auto st = point(t); !st)
                return st.error();
            while (nextEval <= t)
                nextEval += o.evalEvery;
        }
    }
    if (auto st = point(ctx.steps); !st)
        return st.error();
    if (result.stream.syncs > 0)
        result.agreementMean /= static_cast<double>(result.stream.syncs);
    result.rounds = ctx.steps / H;
    result.bytesPerWorker = bytesAll / K;
    return result;
}

}  // namespace tandem::bench
