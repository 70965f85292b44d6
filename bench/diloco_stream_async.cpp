// Streaming DiLoCo with workers that do not step together (async<S>): the rules a coordinator
// and its volunteers would follow (docs/benchmarks.md, "Streaming with workers at different
// speeds"), where diloco_stream.cpp steps every worker in lockstep.
//
// Every fragment has its own round, which steps that fragment alone and closes once q<Q>
// workers (default: all) have uploaded into it. A worker trains on its own parameters in units
// of U = H / F of its steps and uploads one fragment at the end of each unit, the fragments in
// turn (seq: rounds are one at a time, round r for fragment r mod F, and a worker uploads the
// open round's fragment): (the fragment's global values at its last merge - its own), weighted
// by the tokens it trained since its last accepted upload of that fragment; if the fragment
// was stepped since that merge, the upload is re-based onto the current values at half
// weight, or refused beyond one version (the coordinator's staleness bound and weight), and
// with fresh only uploads that are not late count towards the quorum; dl<X>
// also closes a round X units of the fastest worker after its first upload. A worker
// skips its turn while what it last sent of the fragment is not in a version it has merged.
// Then it starts its next unit, which was assigned before its own upload landed: it merges
// every fragment stepped before that upload and since its last merge. A merge replaces the
// worker's fragment by the global values; with carry it keeps what the worker has not sent:
// global + (own - own at its last accepted upload of the fragment, or at the merge before).
// With sized, a worker's unit is U x K x its speed / the workers' summed speed steps (rounded),
// as the coordinator sizes units from each worker's throughput so that they take the same
// time; a fragment's round then has the tokens of a lockstep sync.
// The first uploads come after F units, so with S = 1 the rounds are the lockstep arm's syncs
// and a sync reaches the workers tau = U steps later.
//
// Worker k's step takes 1 + (S - 1) k / (K - 1) time units: worker 0 is the fastest, worker
// K - 1 S times slower; with jit<X> each unit's step time is drawn within +-X of that. The run ends
// when the workers have trained K x steps steps together, the tokens of every other arm, and the
// inner lr follows that total (steps done / K). Then every worker merges what is pending and every
// fragment takes one last outer step on what the workers have not sent.
//
// Dimensions: K workers, B batch per worker, T sequence, H inner steps per round, U = H / F
// steps per unit, P parameters, F fragments.
#include "aggregate.hpp"
#include "diloco_study.hpp"
#include "model.hpp"
#include "outer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>

namespace tandem::bench {

namespace {

constexpr int kMaxStaleness = 1;  // versions of a fragment; the coordinator's default bound

// The state one worker keeps besides its backend.
struct AsyncWorker {
    std::vector<float> held;  // (P) each fragment's global values at its last merge
    std::vector<float> sent;  // (P) its own values at its last accepted upload (or merge)
    std::vector<int64_t> heldVersion, lastUploadStep;  // (F)
    std::vector<char> sentSinceMerge;                  // (F) it uploads a fragment once a merge
    int64_t steps = 0, nextTime = 0, period = 0;
    int64_t unitPeriod = 0;  // its step time in this unit: period, or (jit) drawn around it
    int64_t unit = 0;        // steps per unit: U, or (sized) in proportion to its speed
};

}  // namespace

Expected<RunResult> runStreamingAsync(const RunContext& ctx, const Arm& arm, RunResult result) {
    const Options& o = *ctx.options;
    const int K = result.workers, B = result.batch, T = ctx.T, H = arm.H;
    const int F = arm.streamFragments, Q = arm.quorum > 0 ? arm.quorum : K;
    if (ctx.steps % H != 0 || H % F != 0)
        return makeError("async<S> needs H = " + std::to_string(H) +
                         " to be a multiple of F = " + std::to_string(F) + " and steps " +
                         std::to_string(ctx.steps) + " a multiple of H");
    if (Q > K)
        return makeError("q" + std::to_string(Q) + " is more than the " + std::to_string(K) +
                         " workers");
    const int U = H / F;
    const ParameterLayout layout(ctx.config);
    const int64_t P = layout.parameterCount();
    auto bounds = fragmentBounds(P, F);
    if (!bounds)
        return bounds.error();
    result.stream.fragments = F;
    result.stream.tau = U;
    result.stream.mix = 0;
    result.stream.spread = arm.asyncSpread;
    result.stream.quorum = Q;
    result.stream.carry = arm.carry;

    std::vector<float> theta(static_cast<size_t>(P)), velocity(static_cast<size_t>(P), 0.0f);
    initParameters(layout, theta, static_cast<uint64_t>(result.seed));
    std::vector<float> sum(static_cast<size_t>(P), 0.0f), local(static_cast<size_t>(P));
    std::vector<float> previous(static_cast<size_t>(P));
    const OuterConfig outer = armOuter(o, arm);
    ThreadPool pool(o.threads);
    auto made = makeWorkers(ctx, K, B, theta);
    if (!made)
        return made.error();
    std::vector<std::unique_ptr<Backend>> backends = std::move(*made);
    std::vector<BatchSampler> samplers = workerSamplers(ctx, K, result.seed);
    auto evaluator = makeWorker(ctx, B);
    if (!evaluator)
        return evaluator.error();
    std::vector<AsyncWorker> workers(static_cast<size_t>(K));
    for (int k = 0; k < K; ++k) {
        AsyncWorker& w = workers[static_cast<size_t>(k)];
        w.held = theta;
        w.sent = theta;
        w.heldVersion.assign(static_cast<size_t>(F), 0);
        w.lastUploadStep.assign(static_cast<size_t>(F), 0);
        w.sentSinceMerge.assign(static_cast<size_t>(F), 0);
        // Integer time (thousandths of the fastest step), so that ties are exact.
        w.period =
            K == 1 ? 1000 : std::llround(1000.0 * (1.0 + (arm.asyncSpread - 1.0) * k / (K - 1)));
    }
    // jit<X>: each unit's step time is the worker's x (1 + X u), u uniform in [-1, 1), as a
    // donor's computer slows down and speeds up with what else it runs.
    Rng jitter(0x717e4ull * static_cast<uint64_t>(result.seed) + 1);
    const auto drawPeriod = [&](AsyncWorker& w) {
        const double u = arm.jitter > 0 ? 2.0 * jitter.uniform() - 1.0 : 0.0;
        w.unitPeriod = std::max<int64_t>(1, std::llround(w.period * (1.0 + arm.jitter * u)));
    };
    for (AsyncWorker& w : workers) {
        drawPeriod(w);
        w.nextTime = w.unitPeriod;
    }
    // sized: units in proportion to speed, K x U steps in all (the tokens of a lockstep sync).
    double speeds = 0;
    for (const AsyncWorker& w : workers)
        speeds += 1.0 / static_cast<double>(w.period);
    for (AsyncWorker& w : workers)
        w.unit =
            arm.sizedUnits ? std::max<int64_t>(1, std::llround(U * K / (speeds * w.period))) : U;
    // Each fragment's version (its outer steps so far) and its values at each version that a
    // worker may still merge (the newest two).
    std::vector<int64_t> version(static_cast<size_t>(F), 0);
    std::map<std::pair<int, int64_t>, std::vector<float>> published;
    const auto range = [&](std::vector<float>& v, int p) {
        const int64_t begin = (*bounds)[static_cast<size_t>(p)];
        return std::span(v).subspan(
            static_cast<size_t>(begin),
            static_cast<size_t>((*bounds)[static_cast<size_t>(p) + 1] - begin));
    };

    const LrSchedule schedule{ctx.lr, ctx.lr / 10, std::max(1, ctx.steps / 10), ctx.steps};
    const LrSchedule constantSchedule{ctx.lr, ctx.lr, std::max(1, ctx.steps / 10), ctx.steps};
    const AdamWConfig adamw;
    const size_t n = static_cast<size_t>(B) * T;
    std::vector<int32_t> inputs(n), targets(n);
    const double stepTokens = static_cast<double>(B) * T;
    double bytesAll = 0;
    int64_t nextEval = o.evalEvery;
    auto point = [&](int64_t step) {
        return addCurvePoint(**evaluator, theta, ctx, step, B, bytesAll / K, &result);
    };
    if (auto st = point(0); !st)
        return st.error();

    // Each fragment's open round: its part of sum, its uploads and their weight. seq: only the
    // fragment of round `round` is open.
    int64_t round = 0;
    std::vector<int> uploads(static_cast<size_t>(F), 0);
    std::vector<double> weightSums(static_cast<size_t>(F), 0.0);
    // dl<X>: a round also closes X units of the fastest worker after its first upload.
    std::vector<int64_t> firstUploadAt(static_cast<size_t>(F), -1);
    const int64_t deadline = std::llround(arm.roundDeadline * U * 1000.0);
    int64_t now = 0;
    Upload up;
    const auto closeRound = [&](int p, int64_t atStep) {
        outerNesterovStep(range(theta, p), range(velocity, p), range(sum, p),
                          static_cast<float>(1.0 / weightSums[static_cast<size_t>(p)]), outer,
                          &pool);
        auto part = range(sum, p);
        std::fill(part.begin(), part.end(), 0.0f);
        const int64_t v = ++version[static_cast<size_t>(p)];
        auto fresh = range(theta, p);
        published[{p, v}].assign(fresh.begin(), fresh.end());
        published.erase({p, v - 2});
        if (result.stream.firstSyncs.size() < 32)
            result.stream.firstSyncs.emplace_back(atStep, p);
        ++result.stream.syncs;
        uploads[static_cast<size_t>(p)] = 0;
        weightSums[static_cast<size_t>(p)] = 0;
        firstUploadAt[static_cast<size_t>(p)] = -1;
        if (arm.sequentialRounds && p == round % F)
            ++round;
    };
    // Worker k uploads its fragment p (its values in `local`) into the open round's sum: from
    // its values at its last upload of p (fromSent, the run's end) or the global values it
    // merged. False when the coordinator refuses it (too stale) or there is nothing to send.
    const auto upload = [&](int k, int p, bool fromSent) -> Expected<bool> {
        AsyncWorker& w = workers[static_cast<size_t>(k)];
        const int64_t s = version[static_cast<size_t>(p)] - w.heldVersion[static_cast<size_t>(p)];
        if (s > kMaxStaleness) {
            ++result.droppedUploads;  // refused: its progress stays with the worker
            return false;
        }
        const int64_t steps = w.steps - w.lastUploadStep[static_cast<size_t>(p)];
        if (steps == 0)
            return false;
        auto base = fromSent ? range(w.sent, p) : range(w.held, p);
        auto bytes = encodeUpload(arm.encoding, o.int8Block, base, range(local, p), &up, &pool);
        if (!bytes)
            return bytes.error();
        bytesAll += static_cast<double>(*bytes);
        const double weight =
            lateWeight(static_cast<double>(steps) * stepTokens, static_cast<int>(s));
        auto part = range(sum, p);
        if (auto st = accumulateUpload(arm.encoding, o.int8Block, part, up,
                                       static_cast<float>(weight), &pool);
            !st)
            return st.error();
        if (s > 0) {
            ++result.staleResults;
            coord::rebaseOnto(part, range(w.held, p), range(theta, p), static_cast<float>(weight),
                              &pool);
        }
        weightSums[static_cast<size_t>(p)] += weight;
        if (firstUploadAt[static_cast<size_t>(p)] < 0)
            firstUploadAt[static_cast<size_t>(p)] = now;
        auto mine = range(local, p);
        std::copy(mine.begin(), mine.end(), range(w.sent, p).begin());
        w.lastUploadStep[static_cast<size_t>(p)] = w.steps;
        w.sentSinceMerge[static_cast<size_t>(p)] = 1;
        return true;
    };
    // Worker k merges the fragments whose version in `upTo` it has not merged yet; its values
    // are in `local` and go back to its backend.
    const auto merge = [&](int k, const std::vector<int64_t>& upTo) -> Status {
        AsyncWorker& w = workers[static_cast<size_t>(k)];
        Backend& backend = *backends[static_cast<size_t>(k)];
        std::vector<char> merged(static_cast<size_t>(F), 0);
        bool any = false;
        previous = local;
        for (int p = 0; p < F; ++p) {
            const int64_t v = upTo[static_cast<size_t>(p)];
            if (v <= w.heldVersion[static_cast<size_t>(p)])
                continue;
            const std::vector<float>& global = published.at({p, v});
            auto mine = range(local, p);
            auto sent = range(w.sent, p);
            for (size_t i = 0; i < mine.size(); ++i)
                mine[i] = arm.carry ? global[i] + (mine[i] - sent[i]) : global[i];
            std::copy(global.begin(), global.end(), range(w.held, p).begin());
            std::copy(global.begin(), global.end(), sent.begin());
            w.heldVersion[static_cast<size_t>(p)] = v;
            w.sentSinceMerge[static_cast<size_t>(p)] = 0;
            ++result.stream.merges;
            merged[static_cast<size_t>(p)] = 1;
            any = true;
        }
        if (!any)
            return {};
        if (auto st = backend.loadParameters(local); !st)
            return st;
        // Read back what the worker now holds: a merge changes only its fragments.
        if (auto st = backend.storeParameters(local); !st)
            return st;
        for (int p = 0; p < F; ++p) {
            auto before = range(previous, p), after = range(local, p);
            for (size_t i = 0; i < before.size(); ++i)
                if (std::memcmp(&before[i], &after[i], sizeof(float)) != 0)
                    ++(merged[static_cast<size_t>(p)] ? result.stream.changedInside
                                                      : result.stream.changedOutside);
        }
        return {};
    };

    const int64_t budget = static_cast<int64_t>(K) * ctx.steps;
    for (int64_t total = 0; total < budget;) {
        int k = 0;
        for (int j = 1; j < K; ++j)
            if (workers[static_cast<size_t>(j)].nextTime < workers[static_cast<size_t>(k)].nextTime)
                k = j;
        AsyncWorker& w = workers[static_cast<size_t>(k)];
        now = w.nextTime;
        if (arm.roundDeadline > 0)
            for (int p = 0; p < F; ++p)
                if (firstUploadAt[static_cast<size_t>(p)] >= 0 &&
                    now >= firstUploadAt[static_cast<size_t>(p)] + deadline)
                    closeRound(p, total / K);
        Backend& backend = *backends[static_cast<size_t>(k)];
        samplers[static_cast<size_t>(k)].next(B, T, inputs, targets);
        auto loss = backend.forward(inputs, targets, B, T);
        if (!loss)
            return loss.error();
        if (k == 0)
            result.lastTrainLoss = *loss;
        if (auto st = backend.backward(); !st)
            return st.error();
        const int64_t at = total / K;
        const float lr = arm.constantLr ? constantSchedule.at(at) : schedule.at(at);
        if (auto st = backend.adamwStep(adamw, lr); !st)
            return st.error();
        ++total;
        ++w.steps;
        const bool unitEnd = w.steps % w.unit == 0;
        if (unitEnd)
            drawPeriod(w);
        w.nextTime += w.unitPeriod;
        if (unitEnd) {
            if (auto st = backend.storeParameters(local); !st)
                return st.error();
            // Its next unit was assigned before this upload lands.
            const std::vector<int64_t> assigned = version;
            // Its fragment: its own turn, or (seq) the open round's. Not twice between two of
            // its merges of the fragment (what it sent is in a version it has not merged yet).
            const int64_t units = w.steps / w.unit;
            const int p = static_cast<int>(arm.sequentialRounds ? round % F : units % F);
            if (units >= F && !w.sentSinceMerge[static_cast<size_t>(p)]) {
                // fresh: only uploads based on the fragment's current values count.
                const bool onTime =
                    version[static_cast<size_t>(p)] == w.heldVersion[static_cast<size_t>(p)];
                auto sent = upload(k, p, false);
                if (!sent)
                    return makeError("worker " + std::to_string(k) + ", fragment " +
                                     std::to_string(p) + ": " + sent.error().message);
                if (*sent && (onTime || !arm.freshQuorum) && ++uploads[static_cast<size_t>(p)] >= Q)
                    closeRound(p, (total + K - 1) / K);
            } else if (units >= F) {
                ++result.stream.skipped;
            }
            if (auto st = merge(k, assigned); !st)
                return st.error();
        }
        if (total % K == 0 && total / K >= nextEval && total < budget) {
            if (auto st = point(total / K); !st)
                return st.error();
            while (nextEval <= total / K)
                nextEval += o.evalEvery;
        }
    }
    // The end: every worker merges what is pending, then each fragment's last outer step
    // takes what the workers have not sent (the open round's uploads included).
    for (int k = 0; k < K; ++k) {
        if (auto st = backends[static_cast<size_t>(k)]->storeParameters(local); !st)
            return st.error();
        if (auto st = merge(k, version); !st)
            return st.error();
    }
    for (int p = 0; p < F; ++p) {
        for (int k = 0; k < K; ++k) {
            if (auto st = backends[static_cast<size_t>(k)]->storeParameters(local); !st)
                return st.error();
            if (auto sent = upload(k, p, true); !sent)
                return sent.error();
        }
        if (weightSums[static_cast<size_t>(p)] > 0)
            closeRound(p, ctx.steps);
    }
    const auto [fewest, most] = std::minmax_element(
        workers.begin(), workers.end(),
        [](const AsyncWorker& a, const AsyncWorker& b) { return a.steps < b.steps; });
    result.stream.stepsMin = fewest->steps;
    result.stream.stepsMax = most->steps;
    if (auto st = point(ctx.steps); !st)
        return st.error();
    result.rounds = static_cast<int>(result.stream.syncs);
    result.bytesPerWorker = bytesAll / K;
    return result;
}

}  // namespace tandem::bench
