// tandem-bench-diloco: DiLoCo against synchronous data-parallel training at equal tokens, in one
// process. K workers are simulated with K CPU backends; the pseudo-gradients go through the real
// codecs (fp32, fp16, int8), the coordinator's accumulate and its outer Nesterov step. Faults:
// uploads dropped at random, one result per round arriving one version late. Everything is
// deterministic in the seed. Prints a table of final validation losses and writes the loss curves
// (JSON and CSV) for docs/benchmarks.md and bench/plot_diloco.py.
//
// Dimensions: K workers, B batch per worker, T sequence, H inner steps per round, P parameters.
#include "aggregate.hpp"  // coordinator/: addScaled (the fp32 commit), rebaseOnto
#include "backend.hpp"
#include "codec.hpp"
#include "codec_int8.hpp"
#include "corpus.hpp"
#include "cpu_model.hpp"
#include "json_escape.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "outer.hpp"
#include "random.hpp"
#include "thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace tandem;

namespace {

const char* kUsage =
    "usage: tandem-bench-diloco [options]\n"
    "\n"
    "Trains the same model on the same token stream with synchronous data-parallel AdamW and\n"
    "with DiLoCo arms (K workers, H inner steps per round, outer Nesterov), at equal tokens, and\n"
    "reports final validation loss (mean and spread over seeds), loss curves and bytes sent.\n"
    "\n"
    "  --config NAME      tiny or small (or L=..,NH=..,C=..,T=..); repeatable (default both)\n"
    "  --arms LIST        comma-separated arms (default: the study's arms, see below)\n"
    "  --steps N          inner steps per worker = synchronous steps (default: tiny 400,\n"
    "                     small 200); a multiple of every H\n"
    "  --seeds N          seeds 1..N (default 3)\n"
    "  --workers K        simulated workers (default 4)\n"
    "  --batch B          sequences per worker step (default 4); sync uses K x B\n"
    "  --seq T            tokens per sequence (default: the config's maxSeqLen)\n"
    "  --lr X             peak inner learning rate (default: tiny 3e-3, small 1.5e-3)\n"
    "  --outer-lr X       outer learning rate (default 0.7)\n"
    "  --outer-momentum X outer Nesterov momentum (default 0.9)\n"
    "  --int8-block S     elements per int8 scale (default 256)\n"
    "  --eval-every N     validation every N steps, at round ends for DiLoCo (default 50)\n"
    "  --eval-batches N   validation batches (B sequences each) per curve point (default 8)\n"
    "  --final-batches N  validation batches for the final loss (default 32)\n"
    "  --threads N        threads per backend (default 1)\n"
    "  --jobs N           runs in parallel (default: hardware threads / threads)\n"
    "  --corpus PATH      text file or directory (default /usr/share/games/fortunes)\n"
    "  --json FILE        results with curves as JSON\n"
    "  --csv FILE         curves as CSV (config,arm,seed,step,tokens_per_worker,...)\n"
    "  --smoke            a few seconds: small model, 40 steps, 3 arms, 1 seed (for ctest)\n"
    "  --help             this text\n"
    "\n"
    "An arm is 'sync' or 'h<H>' followed by '-' options: fp32 (default), fp16, int8 (the\n"
    "pseudo-gradient encoding), drop<P> (P% of uploads lost), stale<S> (one result per round\n"
    "arrives S versions late), pipe (every upload arrives one version late, as when each\n"
    "worker starts its next unit from the weights it has while its upload is in flight), raw\n"
    "(late deltas added as they are; by default they are re-based onto the weights they land\n"
    "on, as the coordinator does; reb<X> re-bases by the fraction X), wus (the inner lr warms up "
    "and decays within each round,\n"
    "as work units did before the run-wide schedule), cst (the inner lr warms up once and then\n"
    "stays at its peak: the coordinator's schedule for a run of open length), olr<X> and\n"
    "mom<X> (outer lr and momentum for this arm).\n"
    "Default arms: sync,h10,h25,h50,h100,h50-fp16,h50-int8,h50-fp16-drop30,h50-fp16-stale1,\n"
    "h50-fp16-pipe,h50-fp16-pipe-raw\n";

const char* kDefaultArms =
    "sync,h10,h25,h50,h100,h50-fp16,h50-int8,h50-fp16-drop30,h50-fp16-stale1,h50-fp16-pipe,"
    "h50-fp16-pipe-raw";

enum class Encoding { Fp32, Fp16, Int8 };

const char* encodingName(Encoding e) {
    return e == Encoding::Fp32 ? "fp32" : e == Encoding::Fp16 ? "fp16" : "int8";
}

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
    bool roundSchedule = false;  // inner lr warms up and decays within each round
    bool constantLr = false;     // inner lr warms up once, then stays at its peak
    std::optional<float> outerLr, outerMomentum;
};

struct Options {
    std::vector<std::string> configs;
    std::vector<Arm> arms;
    int steps = 0;  // 0: per-config default
    int seeds = 3, workers = 4, batch = 4, seq = 0;
    float lr = 0;  // 0: per-config default
    OuterConfig outer;
    int int8Block = kInt8DefaultBlock;
    int evalEvery = 50, evalBatches = 8, finalBatches = 32;
    int threads = 1, jobs = 0;
    std::string corpus = "/usr/share/games/fortunes";
    std::string jsonPath, csvPath;
    bool smoke = false;
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
    int64_t parameters = 0, tokensPerWorker = 0;
    double bytesPerWorker = 0, finalLoss = 0, lastTrainLoss = 0, wallSeconds = 0;
    int rounds = 0, emptyRounds = 0, droppedUploads = 0, staleResults = 0;
    // ||mean of the round's deltas|| / mean of ||delta_k||: 1 when the workers agree, about
    // 1/sqrt(K) when their updates are mostly noise. Mean over rounds, and the last round's.
    double agreementMean = 0, agreementLast = 0;
    std::vector<CurvePoint> curve;
};

Expected<Arm> parseArm(const std::string& text) {
    Arm arm;
    arm.name = text;
    if (text == "sync") {
        arm.sync = true;
        return arm;
    }
    std::vector<std::string> parts;
    std::stringstream stream(text);
    for (std::string part; std::getline(stream, part, '-');)
        parts.push_back(part);
    auto bad = [&](const std::string& why) {
        return makeError("arm '" + text + "': " + why +
                         "; expected sync or h<H>[-fp32|-fp16|-int8][-drop<P>][-stale<S>]"
                         "[-pipe][-raw|-reb<X>][-wus][-cst][-olr<X>][-mom<X>]");
    };
    auto number = [](const std::string& s, double* out) {
        char* end = nullptr;
        *out = std::strtod(s.c_str(), &end);
        return !s.empty() && end != nullptr && *end == '\0' && std::isfinite(*out);
    };
    double value = 0;
    if (parts.empty() || parts[0].size() < 2 || parts[0][0] != 'h' ||
        !number(parts[0].substr(1), &value) || value < 1 || value != std::floor(value))
        return bad("it does not start with h<H>");
    arm.H = static_cast<int>(value);
    for (size_t i = 1; i < parts.size(); ++i) {
        const std::string& p = parts[i];
        if (p == "fp32") {
            arm.encoding = Encoding::Fp32;
        } else if (p == "fp16") {
            arm.encoding = Encoding::Fp16;
        } else if (p == "int8") {
            arm.encoding = Encoding::Int8;
        } else if (p.rfind("drop", 0) == 0 && number(p.substr(4), &value) && value >= 0 &&
                   value < 100) {
            arm.dropRate = value / 100.0;
        } else if (p.rfind("stale", 0) == 0 && number(p.substr(5), &value) && value >= 0 &&
                   value <= 8 && value == std::floor(value)) {
            arm.staleness = static_cast<int>(value);
        } else if (p == "pipe") {
            arm.pipelined = true;
        } else if (p == "raw") {
            arm.rebaseFraction = 0.0f;
        } else if (p.rfind("reb", 0) == 0 && number(p.substr(3), &value) && value >= 0 &&
                   value <= 1) {
            arm.rebaseFraction = static_cast<float>(value);
        } else if (p == "wus") {
            arm.roundSchedule = true;
        } else if (p == "cst") {
            arm.constantLr = true;
        } else if (p.rfind("olr", 0) == 0 && number(p.substr(3), &value) && value > 0) {
            arm.outerLr = static_cast<float>(value);
        } else if (p.rfind("mom", 0) == 0 && number(p.substr(3), &value) && value >= 0 &&
                   value < 1) {
            arm.outerMomentum = static_cast<float>(value);
        } else {
            return bad("unknown part '" + p + "'");
        }
    }
    return arm;
}

bool parseNumber(const char* text, const char* flag, double lo, double hi, double* value) {
    char* end = nullptr;
    const double parsed = std::strtod(text, &end);
    if (end == nullptr || *end != '\0' || !(parsed >= lo && parsed <= hi)) {
        std::fprintf(stderr, "tandem-bench-diloco: %s expects a number in [%g, %g], got '%s'\n",
                     flag, lo, hi, text);
        return false;
    }
    *value = parsed;
    return true;
}

// Returns 0 to go on, -1 to exit 0, otherwise the exit code.
int parseOptions(int argc, char** argv, Options* o) {
    std::string arms;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::fputs(kUsage, stdout);
            return -1;
        }
        if (flag == "--smoke") {
            o->smoke = true;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "tandem-bench-diloco: %s needs a value (see --help)\n",
                         flag.c_str());
            return 2;
        }
        const char* value = argv[++i];
        double x = 0;
        auto integer = [&](double lo, double hi, int* out) {
            if (!parseNumber(value, flag.c_str(), lo, hi, &x) || x != std::floor(x))
                return false;
            *out = static_cast<int>(x);
            return true;
        };
        bool ok = true;
        if (flag == "--config") {
            o->configs.push_back(value);
        } else if (flag == "--arms") {
            arms = value;
        } else if (flag == "--steps") {
            ok = integer(1, 1e7, &o->steps);
        } else if (flag == "--seeds") {
            ok = integer(1, 1000, &o->seeds);
        } else if (flag == "--workers") {
            ok = integer(1, 64, &o->workers);
        } else if (flag == "--batch") {
            ok = integer(1, 4096, &o->batch);
        } else if (flag == "--seq") {
            ok = integer(1, 1 << 16, &o->seq);
        } else if (flag == "--lr") {
            ok = parseNumber(value, flag.c_str(), 1e-8, 10, &x);
            o->lr = static_cast<float>(x);
        } else if (flag == "--outer-lr") {
            ok = parseNumber(value, flag.c_str(), 1e-6, 10, &x);
            o->outer.lr = static_cast<float>(x);
        } else if (flag == "--outer-momentum") {
            ok = parseNumber(value, flag.c_str(), 0, 0.999, &x);
            o->outer.momentum = static_cast<float>(x);
        } else if (flag == "--int8-block") {
            ok = integer(1, 1 << 20, &o->int8Block);
        } else if (flag == "--eval-every") {
            ok = integer(1, 1e7, &o->evalEvery);
        } else if (flag == "--eval-batches") {
            ok = integer(1, 10000, &o->evalBatches);
        } else if (flag == "--final-batches") {
            ok = integer(1, 10000, &o->finalBatches);
        } else if (flag == "--threads") {
            ok = integer(1, 256, &o->threads);
        } else if (flag == "--jobs") {
            ok = integer(1, 256, &o->jobs);
        } else if (flag == "--corpus") {
            o->corpus = value;
        } else if (flag == "--json") {
            o->jsonPath = value;
        } else if (flag == "--csv") {
            o->csvPath = value;
        } else {
            std::fprintf(stderr, "tandem-bench-diloco: unknown option '%s' (see --help)\n",
                         flag.c_str());
            return 2;
        }
        if (!ok)
            return 2;
    }
    if (o->smoke) {
        // Seconds, not minutes: a narrow model, few steps, every code path once.
        if (o->configs.empty())
            o->configs.push_back("L=1,NH=2,C=64,T=32");
        if (arms.empty())
            arms = "sync,h10-fp16,h10-int8-drop30-stale1";
        if (o->steps == 0)
            o->steps = 40;
        o->seeds = std::min(o->seeds, 1);
        o->evalEvery = 10;
        o->evalBatches = 2;
        o->finalBatches = 4;
    }
    if (o->configs.empty())
        o->configs = {"tiny", "small"};
    if (arms.empty())
        arms = kDefaultArms;
    std::stringstream stream(arms);
    for (std::string name; std::getline(stream, name, ',');) {
        auto arm = parseArm(name);
        if (!arm) {
            std::fprintf(stderr, "tandem-bench-diloco: %s\n", arm.error().message.c_str());
            return 2;
        }
        o->arms.push_back(*arm);
    }
    if (o->jobs == 0)
        o->jobs = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / o->threads);
    return 0;
}

int defaultSteps(const std::string& configName) {
    return configName == "small" ? 200 : 400;
}
float defaultLr(const std::string& configName) {
    return configName == "small" ? 1.5e-3f : 3e-3f;
}

// Fixed held-out windows, the same for every arm and seed: paired comparisons.
struct EvalSet {
    int B = 0, T = 0;
    std::vector<std::vector<int32_t>> inputs, targets;  // batches of (B,T)
};

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

struct RunContext {
    const Options* options = nullptr;
    std::string configName;
    ModelConfig config;
    int T = 0, steps = 0;
    float lr = 0;
    std::span<const uint8_t> train;
    const EvalSet* eval = nullptr;
};

uint64_t workerDataSeed(int seed, int worker) {
    return 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(seed) + 1000u + worker;
}

// One encoded upload: what one worker sent for one round.
struct Upload {
    std::vector<float> fp32;     // (P)
    std::vector<uint16_t> fp16;  // (P)
    std::vector<int8_t> int8;    // (P)
    std::vector<float> scales;   // (NB)
    double weight = 0;           // tokens trained
};

// Encodes theta (P) - end (P) into up; returns the bytes it occupies on the wire.
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

// sum (P) += weight * decode(up): the coordinator's commit of an accepted upload.
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

Expected<std::unique_ptr<Backend>> makeWorker(const RunContext& ctx, int B) {
    auto made = makeCpuBackend("cpu", ctx.options->threads);
    if (!made)
        return made.error();
    if (auto st = (*made)->allocate(ctx.config, B, ctx.T); !st)
        return st.error();
    return std::move(*made);
}

// Synchronous data-parallel AdamW: one step over the K workers' micro-batches at once. The mean
// loss over K x B sequences is the mean of the K micro-batch means, so its gradient is exactly
// the average of the K workers' gradients (what an all-reduce would produce).
Expected<RunResult> runSync(const RunContext& ctx, RunResult result) {
    const Options& o = *ctx.options;
    const int K = o.workers, B = o.batch, T = ctx.T;
    auto made = makeWorker(ctx, K * B);
    if (!made)
        return made.error();
    Backend& backend = **made;
    const ParameterLayout layout(ctx.config);
    std::vector<float> theta(static_cast<size_t>(layout.parameterCount()));
    initParameters(layout, theta, static_cast<uint64_t>(result.seed));
    if (auto st = backend.loadParameters(theta); !st)
        return st.error();
    std::vector<BatchSampler> samplers;
    for (int k = 0; k < K; ++k)
        samplers.emplace_back(ctx.train, workerDataSeed(result.seed, k));
    const size_t micro = static_cast<size_t>(B) * T;
    std::vector<int32_t> inputs(K * micro), targets(K * micro);
    const LrSchedule schedule{ctx.lr, ctx.lr / 10, std::max(1, ctx.steps / 10), ctx.steps};
    const AdamWConfig adamw;
    const double bytesPerStep = 4.0 * static_cast<double>(result.parameters);  // fp32 gradient

    auto point = [&](int64_t step, int batches) -> Status {
        auto loss = evaluate(backend, *ctx.eval, batches);
        if (!loss)
            return loss.error();
        result.curve.push_back(
            {step, step * B * T, bytesPerStep * static_cast<double>(step), *loss});
        return {};
    };
    if (auto st = point(0, o.evalBatches); !st)
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
            if (auto st = point(step + 1, o.evalBatches); !st)
                return st.error();
    }
    if (auto st = point(ctx.steps, o.finalBatches); !st)
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
    const int K = o.workers, B = o.batch, T = ctx.T, H = arm.H;
    if (ctx.steps % H != 0)
        return makeError("steps " + std::to_string(ctx.steps) +
                         " is not a multiple of H = " + std::to_string(H));
    const ParameterLayout layout(ctx.config);
    const int64_t P = layout.parameterCount();
    std::vector<float> theta(static_cast<size_t>(P)), velocity(static_cast<size_t>(P), 0.0f);
    std::vector<float> sum(static_cast<size_t>(P)), end(static_cast<size_t>(P));
    initParameters(layout, theta, static_cast<uint64_t>(result.seed));
    OuterConfig outer = o.outer;
    if (arm.outerLr)
        outer.lr = *arm.outerLr;
    if (arm.outerMomentum)
        outer.momentum = *arm.outerMomentum;
    ThreadPool pool(o.threads);

    std::vector<std::unique_ptr<Backend>> workers;
    std::vector<BatchSampler> samplers;
    for (int k = 0; k < K; ++k) {
        auto made = makeWorker(ctx, B);
        if (!made)
            return made.error();
        if (auto st = (*made)->loadParameters(theta); !st)
            return st.error();
        workers.push_back(std::move(*made));
        samplers.emplace_back(ctx.train, workerDataSeed(result.seed, k));
    }
    std::vector<Upload> uploads(static_cast<size_t>(K));
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

    auto point = [&](int64_t step, int batches) -> Status {
        auto loss = evaluate(*workers[0], *ctx.eval, batches);
        if (!loss)
            return loss.error();
        result.curve.push_back({step, step * B * T, bytesAll / K, *loss});
        return {};
    };
    if (auto st = point(0, o.evalBatches); !st)
        return st.error();
    const int rounds = ctx.steps / H;
    for (int r = 0; r < rounds; ++r) {
        double workerNorms = 0;
        for (int k = 0; k < K; ++k) {
            Backend& w = *workers[k];
            for (int h = 0; h < H; ++h) {
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
            auto bytes = encodeUpload(arm.encoding, o.int8Block, theta, end, &uploads[k], &pool);
            if (!bytes)
                return makeError("round " + std::to_string(r) + ", worker " + std::to_string(k) +
                                 ": " + bytes.error().message);
            bytesAll += static_cast<double>(*bytes);
            double squares = 0;
            for (int64_t i = 0; i < P; ++i) {
                const double d = static_cast<double>(theta[i]) - end[i];
                squares += d * d;
            }
            workerNorms += std::sqrt(squares) / K;
            uploads[k].weight = static_cast<double>(H) * B * T;
        }
        // Fates of this round's uploads: lost, late, or on time.
        std::vector<int> onTime;
        for (int k = 0; k < K; ++k) {
            if (arm.dropRate > 0 && faults.uniform() < arm.dropRate) {
                ++result.droppedUploads;
                continue;
            }
            onTime.push_back(k);
        }
        // The weights of this round, shared by its late uploads (to re-base them on arrival).
        const auto base = std::make_shared<const std::vector<float>>(theta);
        if (arm.pipelined) {
            for (int k : onTime)
                inFlight.push_back({r + 1, 1, uploads[k], base});
            result.staleResults += static_cast<int>(onTime.size());
            onTime.clear();
        } else if (arm.staleness > 0 && !onTime.empty()) {
            const size_t pick = faults.below(onTime.size());
            inFlight.push_back({r + arm.staleness, arm.staleness, uploads[onTime[pick]], base});
            onTime.erase(onTime.begin() + static_cast<std::ptrdiff_t>(pick));
            ++result.staleResults;
        }
        // The coordinator's round: commit in arrival order, then the outer step.
        std::fill(sum.begin(), sum.end(), 0.0f);
        double weightSum = 0;
        for (auto it = inFlight.begin(); it != inFlight.end();) {
            if (it->arrivesAtRound != r) {
                ++it;
                continue;
            }
            const double w = it->upload.weight * std::pow(0.5, it->staleness);
            if (auto st = accumulateUpload(arm.encoding, o.int8Block, sum, it->upload,
                                           static_cast<float>(w), &pool);
                !st)
                return st.error();
            if (arm.rebaseFraction > 0)
                coord::rebaseOnto(sum, *it->base, theta, static_cast<float>(w) * arm.rebaseFraction,
                                  &pool);
            weightSum += w;
            it = inFlight.erase(it);
        }
        for (int k : onTime) {
            const double w = uploads[k].weight;
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
        if (weightSum > 0) {
            outerNesterovStep(theta, velocity, sum, static_cast<float>(1.0 / weightSum), outer,
                              &pool);
        } else {
            ++result.emptyRounds;  // nothing arrived: the version does not move
        }
        for (auto& w : workers)
            if (auto st = w->loadParameters(theta); !st)
                return st.error();
        const int64_t step = int64_t{r + 1} * H;
        if (step >= nextEval && r + 1 < rounds) {
            if (auto st = point(step, o.evalBatches); !st)
                return st.error();
            while (nextEval <= step)
                nextEval += o.evalEvery;
        }
    }
    if (auto st = point(ctx.steps, o.finalBatches); !st)
        return st.error();
    result.rounds = rounds;
    result.bytesPerWorker = bytesAll / K;
    return result;
}

Expected<RunResult> runOne(const RunContext& ctx, const Arm& arm, int seed) {
    RunResult result;
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
    result.tokensPerWorker = int64_t{ctx.steps} * ctx.options->batch * ctx.T;
    const auto start = std::chrono::steady_clock::now();
    auto done = arm.sync ? runSync(ctx, std::move(result)) : runDiloco(ctx, arm, std::move(result));
    if (done)
        done->wallSeconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return done;
}

struct Summary {
    std::string configName, arm;
    int seeds = 0;
    double mean = 0, stddev = 0, min = 0, max = 0, bytesPerToken = 0, vsSync = 0;
    double wallSeconds = 0;
};

std::vector<Summary> summarize(const std::vector<std::string>& configs,
                               const std::vector<Arm>& arms,
                               const std::vector<RunResult>& results) {
    std::vector<Summary> out;
    for (const std::string& c : configs) {
        double syncMean = 0;
        for (const Arm& a : arms) {
            Summary s;
            s.configName = c;
            s.arm = a.name;
            std::vector<double> losses;
            for (const RunResult& r : results) {
                if (r.configName != c || r.arm != a.name)
                    continue;
                losses.push_back(r.finalLoss);
                s.bytesPerToken = r.bytesPerWorker / static_cast<double>(r.tokensPerWorker);
                s.wallSeconds += r.wallSeconds;
            }
            if (losses.empty())
                continue;
            s.seeds = static_cast<int>(losses.size());
            for (double l : losses)
                s.mean += l / static_cast<double>(losses.size());
            for (double l : losses)
                s.stddev += (l - s.mean) * (l - s.mean);
            s.stddev = losses.size() > 1 ? std::sqrt(s.stddev / (losses.size() - 1)) : 0.0;
            s.min = *std::min_element(losses.begin(), losses.end());
            s.max = *std::max_element(losses.begin(), losses.end());
            if (a.sync)
                syncMean = s.mean;
            out.push_back(s);
        }
        for (Summary& s : out)
            if (s.configName == c && syncMean > 0)
                s.vsSync = s.mean / syncMean - 1.0;
    }
    return out;
}

bool writeJsonTo(const std::string& path, const Options& o, const std::string& cpu,
                 const std::vector<RunResult>& results, const std::vector<Summary>& summary,
                 size_t runsPlanned) {
    std::ofstream file(path);
    if (!file)
        return false;
    char buf[2048];
    std::snprintf(buf, sizeof buf, "{\n  \"runsDone\": %zu,\n  \"runsPlanned\": %zu,\n",
                  results.size(), runsPlanned);
    file << buf;
    std::snprintf(buf, sizeof buf,
                  "  \"benchmark\": \"diloco\",\n  \"cpu\": \"%s\",\n"
                  "  \"hardwareThreads\": %u,\n  \"workers\": %d,\n  \"batchPerWorker\": %d,\n"
                  "  \"outerLr\": %g,\n  \"outerMomentum\": %g,\n  \"int8Block\": %d,\n"
                  "  \"staleWeightFactor\": 0.5,\n  \"evalBatches\": %d,\n"
                  "  \"finalBatches\": %d,\n  \"smoke\": %s,\n",
                  bench::jsonEscape(cpu).c_str(), std::thread::hardware_concurrency(), o.workers,
                  o.batch, o.outer.lr, o.outer.momentum, o.int8Block, o.evalBatches, o.finalBatches,
                  o.smoke ? "true" : "false");
    file << buf << "  \"summary\": [\n";
    for (size_t i = 0; i < summary.size(); ++i) {
        const Summary& s = summary[i];
        std::snprintf(buf, sizeof buf,
                      "    {\"config\": \"%s\", \"arm\": \"%s\", \"seeds\": %d, "
                      "\"finalLossMean\": %.6f, \"finalLossStd\": %.6f, \"finalLossMin\": %.6f, "
                      "\"finalLossMax\": %.6f, \"vsSync\": %.6f, "
                      "\"bytesPerWorkerPerToken\": %.6f, \"wallSeconds\": %.2f}%s\n",
                      bench::jsonEscape(s.configName).c_str(), bench::jsonEscape(s.arm).c_str(),
                      s.seeds, s.mean, s.stddev, s.min, s.max, s.vsSync, s.bytesPerToken,
                      s.wallSeconds, i + 1 < summary.size() ? "," : "");
        file << buf;
    }
    file << "  ],\n  \"runs\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
        const RunResult& r = results[i];
        std::snprintf(
            buf, sizeof buf,
            "    {\"config\": \"%s\", \"model\": \"%s\", \"arm\": \"%s\", \"seed\": %d, "
            "\"sync\": %s, \"H\": %d, \"encoding\": \"%s\", \"dropRate\": %g, \"staleness\": %d, "
            "\"parameters\": %lld, \"seqLen\": %d, \"tokensPerWorker\": %lld, "
            "\"bytesPerWorker\": %.0f, \"bytesPerWorkerPerToken\": %.6f, \"rounds\": %d, "
            "\"emptyRounds\": %d, \"droppedUploads\": %d, \"staleResults\": %d, "
            "\"agreementMean\": %.4f, \"agreementLast\": %.4f, "
            "\"finalLoss\": %.6f, \"lastTrainLoss\": %.6f, \"wallSeconds\": %.2f,\n"
            "     \"curve\": [",
            bench::jsonEscape(r.configName).c_str(), r.config.describe().c_str(),
            bench::jsonEscape(r.arm).c_str(), r.seed, r.sync ? "true" : "false", r.H,
            r.sync ? "fp32" : encodingName(r.encoding), r.dropRate, r.staleness,
            static_cast<long long>(r.parameters), r.T, static_cast<long long>(r.tokensPerWorker),
            r.bytesPerWorker, r.bytesPerWorker / static_cast<double>(r.tokensPerWorker), r.rounds,
            r.emptyRounds, r.droppedUploads, r.staleResults, r.agreementMean, r.agreementLast,
            r.finalLoss, r.lastTrainLoss, r.wallSeconds);
        file << buf;
        for (size_t j = 0; j < r.curve.size(); ++j) {
            const CurvePoint& p = r.curve[j];
            std::snprintf(buf, sizeof buf,
                          "%s{\"step\": %lld, \"tokensPerWorker\": %lld, \"bytesPerWorker\": "
                          "%.0f, \"valLoss\": %.6f}",
                          j ? ", " : "", static_cast<long long>(p.step),
                          static_cast<long long>(p.tokensPerWorker), p.bytesPerWorker, p.valLoss);
            file << buf;
        }
        file << "]}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    file << "  ]\n}\n";
    file.close();
    return static_cast<bool>(file);
}

// Written after every finished run (through a temporary file and a rename, so a reader never
// sees half a file): an interrupted study keeps what it measured.
bool writeJson(const std::string& path, const Options& o, const std::string& cpu,
               const std::vector<RunResult>& results, const std::vector<Summary>& summary,
               size_t runsPlanned) {
    const std::string temporary = path + ".tmp";
    if (!writeJsonTo(temporary, o, cpu, results, summary, runsPlanned))
        return false;
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    return !ec;
}

bool writeCsv(const std::string& path, const std::vector<RunResult>& results) {
    std::ofstream file(path);
    if (!file)
        return false;
    file << "config,arm,seed,step,tokens_per_worker,bytes_per_worker,val_loss\n";
    char buf[512];
    for (const RunResult& r : results) {
        for (const CurvePoint& p : r.curve) {
            std::snprintf(buf, sizeof buf, "%s,%s,%d,%lld,%lld,%.0f,%.6f\n", r.configName.c_str(),
                          r.arm.c_str(), r.seed, static_cast<long long>(p.step),
                          static_cast<long long>(p.tokensPerWorker), p.bytesPerWorker, p.valLoss);
            file << buf;
        }
    }
    return static_cast<bool>(file);
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    if (const int code = parseOptions(argc, argv, &options); code != 0)
        return code < 0 ? 0 : code;

    const std::vector<std::filesystem::path> paths = {options.corpus};
    std::error_code ec;
    if (!std::filesystem::exists(options.corpus, ec)) {
        // 77: ctest's "skipped" for the smoke test on machines without the fortunes package.
        std::fprintf(stderr,
                     "tandem-bench-diloco: SKIP: corpus %s not found (Debian's fortunes package "
                     "is not installed; scripts/setup installs it)\n",
                     options.corpus.c_str());
        return 77;
    }
    auto corpus = loadTextCorpus(paths);
    if (!corpus) {
        std::fprintf(stderr, "tandem-bench-diloco: %s\n", corpus.error().message.c_str());
        return 1;
    }
    // The last 10% is held out: no worker ever trains on it.
    const size_t split = corpus->size() * 9 / 10;
    const std::span<const uint8_t> train(corpus->data(), split);
    const std::span<const uint8_t> heldOut(corpus->data() + split, corpus->size() - split);

    struct Task {
        size_t context;
        const Arm* arm;
        int seed;
    };
    std::vector<RunContext> contexts;
    std::vector<std::unique_ptr<EvalSet>> evalSets;
    std::vector<Task> tasks;
    for (const std::string& name : options.configs) {
        auto config = ModelConfig::parse(name);
        if (!config) {
            std::fprintf(stderr, "tandem-bench-diloco: %s\n", config.error().message.c_str());
            return 2;
        }
        RunContext ctx;
        ctx.options = &options;
        ctx.configName = name;
        ctx.config = *config;
        ctx.T = options.seq > 0 ? std::min(options.seq, config->maxSeqLen) : config->maxSeqLen;
        ctx.steps = options.steps > 0 ? options.steps : defaultSteps(name);
        ctx.lr = options.lr > 0 ? options.lr : defaultLr(name);
        ctx.train = train;
        for (const Arm& arm : options.arms) {
            if (!arm.sync && ctx.steps % arm.H != 0) {
                std::fprintf(stderr,
                             "tandem-bench-diloco: %s: --steps %d is not a multiple of H = %d "
                             "(arm %s); expected whole rounds\n",
                             name.c_str(), ctx.steps, arm.H, arm.name.c_str());
                return 2;
            }
        }
        evalSets.push_back(std::make_unique<EvalSet>(makeEvalSet(
            heldOut, options.batch, ctx.T, std::max(options.evalBatches, options.finalBatches))));
        ctx.eval = evalSets.back().get();
        contexts.push_back(ctx);
        for (const Arm& arm : options.arms)
            for (int seed = 1; seed <= options.seeds; ++seed)
                tasks.push_back({contexts.size() - 1, &arm, seed});
    }
    // Largest runs first, so parallel jobs finish together.
    std::stable_sort(tasks.begin(), tasks.end(), [&](const Task& a, const Task& b) {
        return contexts[a.context].config.parameterCount() >
               contexts[b.context].config.parameterCount();
    });

    const std::string cpu = bench::cpuModel();
    std::printf("CPU: %s, %u hardware threads; %d job(s) x %d thread(s)\n", cpu.c_str(),
                std::thread::hardware_concurrency(), options.jobs, options.threads);
    std::printf(
        "K=%d workers, B=%d sequences per worker step (sync: %d), outer lr %g momentum "
        "%g, corpus %zu bytes (%zu held out)\n",
        options.workers, options.batch, options.workers * options.batch, options.outer.lr,
        options.outer.momentum, corpus->size(), heldOut.size());
    for (const RunContext& c : contexts)
        std::printf(
            "%s: %s, %lld parameters, T=%d, %d steps per worker (%lld tokens per worker), "
            "peak lr %g\n",
            c.configName.c_str(), c.config.describe().c_str(),
            static_cast<long long>(c.config.parameterCount()), c.T, c.steps,
            static_cast<long long>(c.steps) * options.batch * c.T, c.lr);
    std::fflush(stdout);

    std::vector<std::optional<RunResult>> results(tasks.size());
    // Finished runs in the order of the command line (config, arm, seed) and their summary.
    auto collect = [&] {
        std::vector<RunResult> ordered;
        for (auto& r : results)
            if (r)
                ordered.push_back(*r);
        auto key = [&](const RunResult& r) {
            const auto ci =
                std::find(options.configs.begin(), options.configs.end(), r.configName) -
                options.configs.begin();
            const auto ai = std::find_if(options.arms.begin(), options.arms.end(),
                                         [&](const Arm& x) { return x.name == r.arm; }) -
                            options.arms.begin();
            return std::tuple(ci, ai, r.seed);
        };
        std::sort(ordered.begin(), ordered.end(),
                  [&](const RunResult& a, const RunResult& b) { return key(a) < key(b); });
        return ordered;
    };
    auto writeOutputs = [&](const std::vector<RunResult>& ordered) {
        const std::vector<Summary> summary = summarize(options.configs, options.arms, ordered);
        if (!options.jsonPath.empty() &&
            !writeJson(options.jsonPath, options, cpu, ordered, summary, tasks.size())) {
            std::fprintf(stderr, "tandem-bench-diloco: could not write %s\n",
                         options.jsonPath.c_str());
            return false;
        }
        if (!options.csvPath.empty() && !writeCsv(options.csvPath, ordered)) {
            std::fprintf(stderr, "tandem-bench-diloco: could not write %s\n",
                         options.csvPath.c_str());
            return false;
        }
        return true;
    };
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex printMutex;
    auto worker = [&] {
        for (size_t i = next++; i < tasks.size() && !failed; i = next++) {
            const Task& t = tasks[i];
            auto r = runOne(contexts[t.context], *t.arm, t.seed);
            std::lock_guard lock(printMutex);
            if (!r) {
                std::fprintf(stderr, "tandem-bench-diloco: %s %s seed %d: %s\n",
                             contexts[t.context].configName.c_str(), t.arm->name.c_str(), t.seed,
                             r.error().message.c_str());
                failed = true;
                continue;
            }
            r->finalLoss = r->curve.back().valLoss;
            std::printf(
                "  %-6s %-22s seed %d  val loss %.4f  (%.3f -> %.4f train)  %.1f B/token "
                " %d dropped %d late  agreement %.2f  %.1f s\n",
                r->configName.c_str(), r->arm.c_str(), r->seed, r->finalLoss,
                r->curve.front().valLoss, r->lastTrainLoss,
                r->bytesPerWorker / static_cast<double>(r->tokensPerWorker), r->droppedUploads,
                r->staleResults, r->agreementMean, r->wallSeconds);
            std::fflush(stdout);
            results[i] = std::move(*r);
            if (!writeOutputs(collect()))
                failed = true;
        }
    };
    const auto wallStart = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int j = 1; j < std::min<int>(options.jobs, static_cast<int>(tasks.size())); ++j)
        threads.emplace_back(worker);
    worker();
    for (auto& t : threads)
        t.join();
    if (failed)
        return 1;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();

    const std::vector<RunResult> ordered = collect();
    const std::vector<Summary> summary = summarize(options.configs, options.arms, ordered);

    std::printf(
        "\nfinal validation loss (mean +- sample std over seeds; min..max), at equal "
        "tokens; wall %.0f s\n",
        wall);
    std::printf("%-8s %-22s %5s %9s %8s %17s %9s %12s\n", "config", "arm", "seeds", "mean", "std",
                "min..max", "vs sync", "B/tok/wkr");
    for (const Summary& s : summary)
        std::printf("%-8s %-22s %5d %9.4f %8.4f %8.4f..%-8.4f %+8.2f%% %12.2f\n",
                    s.configName.c_str(), s.arm.c_str(), s.seeds, s.mean, s.stddev, s.min, s.max,
                    100.0 * s.vsSync, s.bytesPerToken);
    // The smoke run checks itself too: finite losses that went down in every run.
    if (options.smoke) {
        for (const RunResult& r : ordered) {
            const double first = r.curve.front().valLoss, last = r.finalLoss;
            if (!std::isfinite(first) || !std::isfinite(last) || !(last < first - 0.05)) {
                std::fprintf(stderr,
                             "tandem-bench-diloco: smoke: %s %s: validation loss %g -> %g; "
                             "expected finite and decreasing\n",
                             r.configName.c_str(), r.arm.c_str(), first, last);
                return 1;
            }
        }
    }
    return 0;
}
