// tandem-bench-diloco's parts: the arms and options (diloco_options.cpp), the simulated runs
// (diloco_runs.cpp) and the report (diloco_report.cpp); tandem_bench_diloco.cpp holds main().
//
// Dimensions: K workers, B batch per worker, T sequence, H inner steps per round, P parameters.
#pragma once

#include "backend.hpp"
#include "codec_int8.hpp"  // kInt8DefaultBlock
#include "corpus.hpp"      // BatchSampler
#include "diloco_byzantine.hpp"
#include "expected.hpp"
#include "model_config.hpp"
#include "optimizer.hpp"
#include "random.hpp"
#include "thread_pool.hpp"
#include "weight_delta.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tandem::bench {

enum class Encoding { Fp32, Fp16, Int8 };
const char* encodingName(Encoding e);

struct Arm {
    std::string name;
    bool sync = false;
    int H = 0;
    Encoding encoding = Encoding::Fp32;
    double dropRate = 0;
    int staleness = 0;
    bool pipelined = false;  // every upload lands one round late (workers overlap uploads)
    // How much of (base - current) a late delta is re-based by: 1 counts it from the weights it
    // lands on, 0 adds it as it is (raw).
    float rebaseFraction = 1.0f;
    // sreb<X>: a late delta is the unit's progress from its own start (start - end), re-based
    // from that start by the fraction X (reb<X> re-bases from the assigned weights).
    bool startRebase = false;
    bool roundSchedule = false;  // inner lr warms up and decays within each round
    bool constantLr = false;     // inner lr warms up once, then stays at its peak
    std::optional<float> outerLr, outerMomentum;
    // Fair comparisons: this arm's peak inner lr (lr<X>), workers (m<K>), sequences per worker
    // step (b<B>; sync steps over K x B) and steps per worker (s<N>); unset: the run's.
    std::optional<float> innerLr;
    int workers = 0, batch = 0, steps = 0;
    // The eager variant (eager<X>): with pipe, a worker's next unit starts from
    // (1 - X) x the weights it is assigned + X x its own last end point, as the worker does
    // with the manifest's start_blend; its delta stays relative to the assigned weights.
    float startBlend = 0;
    // The momentum lookahead (nest<C>): with pipe, an overlapped unit's start moves on by
    // C x the part of the next outer step that is already known, -lr mu^2 v (the coordinator's
    // velocity when the unit is assigned), so that a late result is trained about where the
    // weights will be when it lands; its delta is re-based like any late result.
    float momentumLookahead = 0;
    // The eager updates of Kale et al. (look, arXiv 2502.12996): with pipe, a worker's next
    // unit starts one tentative outer step ahead of the assigned weights, the step the
    // coordinator would take if this round's mean were the last round's with the worker's own
    // part replaced by its fresh delta; it uploads its progress from that start, which the
    // coordinator commits as it is (not re-based).
    bool lookahead = false;
    // pred: with pipe, an overlapped unit starts at a guess of the weights its result will
    // land on, theta - lr ((1 + mu) d~ + mu^2 v) with d~ = (1/K) (theta - its own last end
    // point) + (1 - 1/K) x the last round's mean delta; its upload is re-based as usual.
    bool predictStart = false;
    // shift<F>: the overlap without late results. A unit starts from the version before the
    // current one (with eager<X>: blended with the worker's own last end point), the version
    // its predecessor's result makes arrives after F x H of its steps, and the worker then
    // moves its parameters by (that version - its start) and trains on: its result is relative
    // to that version, on time.
    float shiftFraction = 0;
    // Dropped uploads: keep (DiLoCo): the worker whose upload was lost starts its next unit
    // from its own end point (start_blend 1); tokw: the round's mean divides by the weight of
    // every upload that was due, so a round that lost some moves less.
    bool keepOnDrop = false, dueWeight = false;
    Attack attack = Attack::None;  // what 20% of the workers (at least one) upload instead
    GateRule gate = GateRule::None;
    // wd<CODEC> (wdint8, wdfp16): the coordinator's canonical quantized outer update with error
    // feedback (kernels/weight_delta.hpp), as with tandem-coordinator --weight-deltas.
    WeightDeltaCodec weightDeltas = WeightDeltaCodec::Off;
    // Streaming DiLoCo (stream<F>, diloco_stream.cpp): the parameters in F fragments, each with
    // its own outer step every H steps at offset p x H / F; the new global fragment reaches the
    // workers tau<S> steps later (default H / F rounded) and is merged as
    // mix x local + (1 - mix) x global (mix<A>, default 0.5). 0: not streaming.
    int streamFragments = 0;
    std::optional<int> streamTau;
    float streamMix = 0.5f;
    // Workers that do not step together (async<S>, diloco_stream_async.cpp): worker k's step
    // takes 1 + (S - 1) k / (K - 1) time units, each fragment has its own round, closed at
    // q<Q> uploads (0: all workers), a worker uploads its next fragment in turn at the end of
    // each unit of H / F steps (seq: rounds one at a time, and the open round's fragment), and
    // its merges replace (carry: keep what it has not sent); sized: a worker's unit is
    // U x K x its speed / the summed speed steps, so that units take the same time; dl<X>: a
    // round also closes X units of the fastest worker after its first upload; jit<X>: each
    // unit's step time is the worker's x (1 + X u), u uniform in [-1, 1). 0: lockstep.
    float asyncSpread = 0, roundDeadline = 0, jitter = 0;
    int quorum = 0;
    // fresh: only uploads that are not late count towards q<Q>.
    bool carry = false, sequentialRounds = false, sizedUnits = false, freshQuorum = false;
};

struct Options {
    std::vector<std::string> configs;
    std::vector<Arm> arms;
    int steps = 0;  // 0: per-config default
    int seeds = 3, workers = 4, batch = 4, seq = 0;
    int firstSeed = 1;  // seeds firstSeed .. firstSeed + seeds - 1
    float lr = 0;       // 0: per-config default
    OuterConfig outer;
    int int8Block = kInt8DefaultBlock;
    // Every curve point, the last included, on the same evalBatches held-out batches.
    int evalEvery = 50, evalBatches = 32;
    int threads = 1, jobs = 0;
    std::string corpus = "/usr/share/games/fortunes";
    std::string jsonPath, csvPath;
    bool smoke = false;
    double maxRise = -1;  // >= 0: fail when a run's loss rises this far above its running minimum
};

struct CurvePoint {
    int64_t step = 0;             // inner steps per worker
    int64_t tokensPerWorker = 0;  // step x B x T
    double bytesPerWorker = 0;    // uploaded so far by one worker (mean over workers)
    double valLoss = 0;
};

struct RunResult {
    std::string configName, arm;
    ModelConfig config;
    int seed = 0, H = 0, staleness = 0, T = 0;
    Encoding encoding = Encoding::Fp32;
    double dropRate = 0;
    bool sync = false;
    int workers = 0, batch = 0;  // this arm's K and B (sync: B is the per-worker share)
    float innerLr = 0;
    int64_t parameters = 0, tokensPerWorker = 0, tokensTotal = 0;
    double bytesPerWorker = 0, finalLoss = 0, lastTrainLoss = 0, wallSeconds = 0;
    int rounds = 0, emptyRounds = 0, droppedUploads = 0, staleResults = 0;
    int gateRefused = 0, gateDownWeighted = 0;  // uploads, under arm.gate
    // ||mean of the round's deltas|| / mean of ||delta_k||: 1 when the workers agree, about
    // 1/sqrt(K) when their updates are mostly noise. Mean over rounds, and the last round's.
    double agreementMean = 0, agreementLast = 0;
    // The largest rise of the validation loss above its running minimum, as a fraction (0.05:
    // a point 5% above the best before it): 0 for a curve that never went up.
    double maxRise = 0;
    std::vector<CurvePoint> curve;
    // Bitwise changes of the workers' parameters at the merges of streaming arms (each
    // worker's parameters read back before and after): inside the merged fragment, and
    // outside it (always 0 where a merge touches only its own fragment).
    struct Stream {
        int fragments = 0, tau = 0;
        float mix = 0;
        int64_t syncs = 0, merges = 0, changedInside = 0, changedOutside = 0;
        int64_t keptOwn = 0;  // worker merges skipped under keep (that worker's upload was lost)
        std::vector<std::pair<int64_t, int>> firstSyncs;  // (step, fragment), the first 32
        // async<S>: the spread, quorum and carry; unit ends without an upload (the worker had
        // uploaded into the open round, or its fragment since its merge); the steps of the
        // slowest and the fastest worker.
        double spread = 0;
        int quorum = 0;
        bool carry = false;
        int64_t skipped = 0, stepsMin = 0, stepsMax = 0;
    } stream;
};

// Fixed held-out windows, the same for every arm and seed: paired comparisons.
struct EvalSet {
    int B = 0, T = 0;
    std::vector<std::vector<int32_t>> inputs, targets;  // batches of (B,T)
};

struct RunContext {
    const Options* options = nullptr;
    std::string configName;
    ModelConfig config;
    int T = 0, steps = 0;
    float lr = 0;
    std::span<const uint8_t> train;
    const EvalSet* eval = nullptr;
};

// Shared by the simulated DiLoCo runs (diloco_runs.cpp, diloco_stream.cpp).
// One encoded upload: what one worker sent for one round (or one fragment).
struct Upload {
    std::vector<float> fp32;     // (n)
    std::vector<uint16_t> fp16;  // (n)
    std::vector<int8_t> int8;    // (n)
    std::vector<float> scales;   // (NB)
    double weight = 0;           // tokens trained
};
// Encodes theta (n) - end (n) into up; returns the bytes it occupies on the wire.
Expected<int64_t> encodeUpload(Encoding encoding, int int8Block, std::span<const float> theta,
                               std::span<const float> end, Upload* up, ThreadPool* pool);
// sum (n) += weight * decode(up): the coordinator's commit of an accepted upload.
Status accumulateUpload(Encoding encoding, int int8Block, std::span<float> sum, const Upload& up,
                        float weight, ThreadPool* pool);
// The fates of K uploads due together, drawn alike in every simulated run (a streaming arm with
// one fragment ends on its DiLoCo arm's bits only with the same draws): each is lost with
// probability arm.dropRate (lost[k], counted in result->droppedUploads), the others are
// appended to onTime in order.
void drawLosses(Rng& faults, const Arm& arm, std::span<char> lost, std::vector<int>* onTime,
                RunResult* result);
// stale<S>: takes one upload, drawn, out of onTime and returns it (counted in
// result->staleResults); -1 when S = 0 or onTime is empty.
int drawLate(Rng& faults, const Arm& arm, std::vector<int>* onTime, RunResult* result);
// The commit weight of an upload of `tokens` that lands s versions late (the coordinator's
// staleWeightFactor, 0.5 per version).
double lateWeight(double tokens, int s);
// A CPU backend for B sequences of ctx.T tokens.
Expected<std::unique_ptr<Backend>> makeWorker(const RunContext& ctx, int B);
// K such backends, each holding theta.
Expected<std::vector<std::unique_ptr<Backend>>> makeWorkers(const RunContext& ctx, int K, int B,
                                                            std::span<const float> theta);
// The batch samplers of K workers (workerDataSeed).
std::vector<BatchSampler> workerSamplers(const RunContext& ctx, int K, int seed);
// The run's outer step with the arm's olr<X> and mom<X>.
OuterConfig armOuter(const Options& o, const Arm& arm);
// Mean validation loss over the first `batches` batches of set.
Expected<double> evaluate(Backend& backend, const EvalSet& set, int batches);
// One curve point: theta loaded into evaluator, its validation loss at `step` (B sequences per
// worker step) appended to result->curve with the bytes one worker has uploaded so far.
Status addCurvePoint(Backend& evaluator, std::span<const float> theta, const RunContext& ctx,
                     int64_t step, int B, double bytesPerWorker, RunResult* result);
// The seed of worker k's batch sampler: the same token stream for a worker in every arm.
uint64_t workerDataSeed(int seed, int worker);
// Streaming DiLoCo (arm.streamFragments > 0): diloco_stream.cpp, with async<S>
// diloco_stream_async.cpp.
Expected<RunResult> runStreaming(const RunContext& ctx, const Arm& arm, RunResult result);
Expected<RunResult> runStreamingAsync(const RunContext& ctx, const Arm& arm, RunResult result);
// Bounds (F + 1) of F contiguous fragments of about P / F values, inner bounds multiples of 256
// values (the int8 codec's block).
Expected<std::vector<int64_t>> fragmentBounds(int64_t P, int F);

// Parses an arm name such as h50-fp16-pipe; the message says what was expected.
Expected<Arm> parseArm(const std::string& text);
// Fills o from the command line: 0 to go on, -1 after --help, 2 on a usage error.
int parseOptions(int argc, char** argv, Options* o);
int defaultSteps(const std::string& configName);
float defaultLr(const std::string& configName);

EvalSet makeEvalSet(std::span<const uint8_t> heldOut, int B, int T, int batches);
// One run of one arm and seed: its curve, final loss and counters.
Expected<RunResult> runOne(const RunContext& ctx, const Arm& arm, int seed);
// The largest rise of the curve's loss above its running minimum (RunResult::maxRise).
double maxRise(const std::vector<CurvePoint>& curve);

struct Summary {
    std::string configName, arm;
    int seeds = 0;
    int64_t tokensTotal = 0;
    double mean = 0, stddev = 0, min = 0, max = 0, bytesPerToken = 0;
    // Against the best synchronous arm (lowest mean) with the same tokens in all; NaN when
    // there is none. vsSyncArm names it.
    double vsSync = 0;
    std::string vsSyncArm;
    double wallSeconds = 0;
};

std::vector<Summary> summarize(const std::vector<std::string>& configs,
                               const std::vector<Arm>& arms, const std::vector<RunResult>& results);
// Written through a temporary file and a rename, so a reader never sees half a file.
bool writeJson(const std::string& path, const Options& o, const std::string& cpu,
               const std::vector<RunResult>& results, const std::vector<Summary>& summary,
               size_t runsPlanned);
bool writeCsv(const std::string& path, const std::vector<RunResult>& results);

}  // namespace tandem::bench
