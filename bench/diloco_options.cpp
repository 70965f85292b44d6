// tandem-bench-diloco's command line: options, arms and their defaults.
#include "diloco_study.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace tandem::bench {
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
    "  --first-seed S     seeds S..S+N-1 instead (more seeds of an arm already run)\n"
    "  --workers K        simulated workers (default 4)\n"
    "  --batch B          sequences per worker step (default 4); sync uses K x B\n"
    "  --seq T            tokens per sequence (default: the config's maxSeqLen)\n"
    "  --lr X             peak inner learning rate (default: tiny 3e-3, small 1.5e-3)\n"
    "  --outer-lr X       outer learning rate (default 0.35, the coordinator's)\n"
    "  --outer-momentum X outer Nesterov momentum (default 0.9)\n"
    "  --int8-block S     elements per int8 scale (default 256)\n"
    "  --eval-every N     validation every N steps, at round ends for DiLoCo (default 50)\n"
    "  --eval-batches N   validation batches (B sequences each) at every curve point, the\n"
    "                     final one included (default 32)\n"
    "  --threads N        threads per backend (default 1)\n"
    "  --jobs N           runs in parallel (default: hardware threads / threads)\n"
    "  --corpus PATH      text file or directory (default /usr/share/games/fortunes)\n"
    "  --json FILE        results with curves as JSON\n"
    "  --csv FILE         curves as CSV (config,arm,seed,step,tokens_per_worker,...)\n"
    "  --max-rise F       exit 1 when a run's validation loss rises more than F (0.05 = 5%)\n"
    "                     above its running minimum: the check of long runs that must not diverge\n"
    "  --smoke            a few seconds: small model, 40 steps, 3 arms, 1 seed (for ctest)\n"
    "  --help             this text\n"
    "\n"
    "An arm is 'sync' or 'h<H>' followed by '-' options: fp32 (default), fp16, int8 (the\n"
    "pseudo-gradient encoding), drop<P> (P% of uploads lost), stale<S> (one result per round\n"
    "arrives S versions late), pipe (every upload arrives one version late, as when each\n"
    "worker starts its next unit from the weights it has while its upload is in flight), raw\n"
    "(late deltas added as they are; by default they are re-based onto the weights they land\n"
    "on, as the coordinator does; reb<X> re-bases by the fraction X; sreb<X> uploads the\n"
    "progress from the unit's own start and re-bases from there by X), wus (the inner lr\n"
    "warms up and decays within each round, as work units did before the run-wide schedule),\n"
    "cst (the inner lr warms up once and then stays at its peak: the coordinator's schedule\n"
    "for a run of open length), olr<X> and mom<X> (outer lr and momentum for this arm),\n"
    "eager<X> (with pipe: a worker's next unit starts from (1-X) x the assigned weights + X x\n"
    "its own last end point), nest<C> (with pipe: that start moves on by C x -lr mu^2 v, the\n"
    "known part of the next outer step), pred (with pipe: start at\n"
    "theta - lr ((1 + mu) d~ + mu^2 v), d~ = (own delta + (K - 1) x the last round's mean) / K,\n"
    "re-based as usual), shift<F> (without pipe: a unit starts from the version before, with\n"
    "eager<X> blended, and moves onto the current version after F x H steps: the overlap with\n"
    "a result that is on time), look (with pipe: the eager updates of arXiv 2502.12996: a\n"
    "worker's next unit starts one tentative outer step ahead, with the last round's mean\n"
    "delta in which its own part is replaced by its fresh delta; it uploads its progress from\n"
    "that start, not re-based), keep (a worker whose upload was dropped starts its next unit\n"
    "from its own end point, as in DiLoCo), tokw (a round's mean divides by the weight of\n"
    "every upload due, so lost ones count as zero), wdint8 and wdfp16 (the coordinator's\n"
    "--weight-deltas: each version moves by the quantized outer update, with error\n"
    "feedback), stream<F> (Streaming DiLoCo, arXiv 2501.18512: F fragments of the\n"
    "parameters, fragment p has its own outer step every H steps at offset p x H / F, the\n"
    "first after H + p x H / F steps, all of them once more at the end; its new global\n"
    "fragment reaches the workers tau<S> steps later (default H / F rounded) and is merged\n"
    "as A x local + (1 - A) x global (mix<A>, default 0.5; 0 replaces); alone, or with\n"
    "fp16/int8, cst, olr, mom, the options of any arm, and per fragment upload drop<P>, keep\n"
    "(a worker whose fragment upload was lost keeps its own fragment at that merge), tokw and\n"
    "stale<S> (one upload per fragment sync arrives S syncs of that fragment later, re-based);\n"
    "with async<S> the workers do not step together: worker k's step takes\n"
    "1 + (S - 1) k / (K - 1) time units, every fragment has its own round, closed at q<Q>\n"
    "uploads (default: all workers; fresh: counting only those that are not late), a worker\n"
    "uploads its fragments in turn, one at the end of each unit of H / F steps (seq: one\n"
    "round open at a time, and the worker uploads its fragment), and merges new fragments\n"
    "when it starts the next unit (replacing its own; carry: keeping what it has not\n"
    "sent); sized: a worker's unit is H / F x K x its speed /\n"
    "the workers' summed speed, so that units take the same time; dl<X>: a round also closes\n"
    "X units of the fastest worker after its first upload; jit<X>: each unit's step time is\n"
    "drawn within +-X of the worker's; the run ends at the tokens of the other arms).\n"
    "Any arm, sync too: lr<X> (peak inner lr,\n"
    "e.g. lr0.006), m<K> (workers), b<B> (sequences per worker step), s<N> (steps per\n"
    "worker). 'vs sync' compares with the best sync arm that trained the same number of tokens\n"
    "in all.\n"
    "Default arms: sync,h10,h25,h50,h100,h50-fp16,h50-int8,h50-fp16-drop30,h50-fp16-stale1,\n"
    "h50-fp16-pipe,h50-fp16-pipe-raw\n";

const char* kDefaultArms =
    "sync,h10,h25,h50,h100,h50-fp16,h50-int8,h50-fp16-drop30,h50-fp16-stale1,h50-fp16-pipe,"
    "h50-fp16-pipe-raw";

}  // namespace

const char* encodingName(Encoding e) {
    return e == Encoding::Fp32 ? "fp32" : e == Encoding::Fp16 ? "fp16" : "int8";
}

Expected<Arm> parseArm(const std::string& text) {
    Arm arm;
    arm.name = text;
    std::vector<std::string> parts;
    std::stringstream stream(text);
    for (std::string part; std::getline(stream, part, '-');)
        parts.push_back(part);
    auto bad = [&](const std::string& why) {
        return makeError(
            "arm '" + text + "': " + why +
            "; expected sync[-lr<X>][-m<K>][-b<B>][-s<N>] or h<H>[-fp32|-fp16|-int8][-drop<P>]"
            "[-stale<S>][-pipe][-raw|-reb<X>|-sreb<X>][-eager<X>][-nest<C>][-look|-pred][-shift<F>]"
            "[-keep][-tokw][-wus][-cst][-stream<F>[-tau<S>][-mix<A>]|[-async<S>[-q<Q>][-fresh][-dl<"
            "X>][-jit<X>][-carry][-seq][-sized]]]"
            "[-olr<X>]"
            "[-mom<X>][-lr<X>][-m<K>][-b<B>][-s<N>][-byz<ATTACK>][-gate|-oldgate][-wdint8|-wdfp16]"
            " (ATTACK: scaled, noise, flip, zero, nan, replay, ratchet)");
    };
    auto number = [](const std::string& s, double* out) {
        char* end = nullptr;
        *out = std::strtod(s.c_str(), &end);
        return !s.empty() && end != nullptr && *end == '\0' && std::isfinite(*out);
    };
    double value = 0;
    auto whole = [&](const std::string& p, const char* prefix, double hi, int* out) {
        const size_t n = std::char_traits<char>::length(prefix);
        if (p.rfind(prefix, 0) != 0 || !number(p.substr(n), &value) || value < 1 || value > hi ||
            value != std::floor(value))
            return false;
        *out = static_cast<int>(value);
        return true;
    };
    // Parts that any arm may have; false when p is none of them.
    auto common = [&](const std::string& p) {
        if (p.rfind("lr", 0) == 0 && number(p.substr(2), &value) && value > 0 && value <= 1) {
            arm.innerLr = static_cast<float>(value);
            return true;
        }
        return whole(p, "m", 64, &arm.workers) || whole(p, "b", 4096, &arm.batch) ||
               whole(p, "s", 1e7, &arm.steps);
    };
    if (!parts.empty() && parts[0] == "sync") {
        arm.sync = true;
        for (size_t i = 1; i < parts.size(); ++i)
            if (!common(parts[i]))
                return bad("unknown part '" + parts[i] + "' for sync");
        return arm;
    }
    if (parts.empty() || parts[0].size() < 2 || parts[0][0] != 'h' ||
        !number(parts[0].substr(1), &value) || value < 1 || value != std::floor(value))
        return bad("it does not start with h<H>");
    arm.H = static_cast<int>(value);
    bool mixSet = false;
    for (size_t i = 1; i < parts.size(); ++i) {
        const std::string& p = parts[i];
        if (common(p)) {
        } else if (p == "keep") {
            arm.keepOnDrop = true;
        } else if (p == "tokw") {
            arm.dueWeight = true;
        } else if (p.rfind("eager", 0) == 0 && number(p.substr(5), &value) && value >= 0 &&
                   value <= 1) {
            arm.startBlend = static_cast<float>(value);
        } else if (p.rfind("nest", 0) == 0 && number(p.substr(4), &value) && value >= 0 &&
                   value <= 4) {
            arm.momentumLookahead = static_cast<float>(value);
        } else if (p.rfind("shift", 0) == 0 && number(p.substr(5), &value) && value > 0 &&
                   value <= 1) {
            arm.shiftFraction = static_cast<float>(value);
        } else if (p.rfind("stream", 0) == 0 && number(p.substr(6), &value) && value >= 1 &&
                   value <= 256 && value == std::floor(value)) {
            arm.streamFragments = static_cast<int>(value);
        } else if (p.rfind("tau", 0) == 0 && number(p.substr(3), &value) && value >= 0 &&
                   value == std::floor(value)) {
            arm.streamTau = static_cast<int>(value);
        } else if (p.rfind("mix", 0) == 0 && number(p.substr(3), &value) && value >= 0 &&
                   value <= 1) {
            arm.streamMix = static_cast<float>(value);
            mixSet = true;
        } else if (p.rfind("async", 0) == 0 && number(p.substr(5), &value) && value >= 1 &&
                   value <= 16) {
            arm.asyncSpread = static_cast<float>(value);
        } else if (p.rfind("q", 0) == 0 && number(p.substr(1), &value) && value >= 1 &&
                   value == std::floor(value)) {
            arm.quorum = static_cast<int>(value);
        } else if (p == "carry") {
            arm.carry = true;
        } else if (p == "seq") {
            arm.sequentialRounds = true;
        } else if (p == "sized") {
            arm.sizedUnits = true;
        } else if (p == "fresh") {
            arm.freshQuorum = true;
        } else if (p.rfind("jit", 0) == 0 && number(p.substr(3), &value) && value > 0 &&
                   value < 1) {
            arm.jitter = static_cast<float>(value);
        } else if (p.rfind("dl", 0) == 0 && number(p.substr(2), &value) && value > 0 &&
                   value <= 1000) {
            arm.roundDeadline = static_cast<float>(value);
        } else if (p == "pred") {
            arm.predictStart = true;
        } else if (p == "look") {
            arm.lookahead = true;
        } else if (p == "fp32") {
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
        } else if (p.rfind("sreb", 0) == 0 && number(p.substr(4), &value) && value >= 0 &&
                   value <= 1) {
            arm.rebaseFraction = static_cast<float>(value);
            arm.startRebase = true;
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
        } else if (p.rfind("byz", 0) == 0 && parseAttack(p.substr(3), &arm.attack)) {
        } else if (p.rfind("wd", 0) == 0 && parseWeightDeltaCodec(p.substr(2)) && p != "wdoff") {
            arm.weightDeltas = *parseWeightDeltaCodec(p.substr(2));
        } else if (p == "gate") {
            arm.gate = GateRule::Robust;
        } else if (p == "oldgate") {
            arm.gate = GateRule::Old;
        } else {
            return bad("unknown part '" + p + "'");
        }
    }
    if (arm.streamFragments == 0 && (arm.streamTau || mixSet || arm.asyncSpread > 0))
        return bad("tau<S>, mix<A> and async<S> are options of stream<F>");
    if (arm.asyncSpread == 0 &&
        (arm.quorum > 0 || arm.carry || arm.sequentialRounds || arm.sizedUnits ||
         arm.roundDeadline > 0 || arm.jitter > 0 || arm.freshQuorum))
        return bad("q<Q>, fresh, dl<X>, jit<X>, carry, seq and sized are options of async<S>");
    if (arm.asyncSpread > 0) {
        if (arm.streamTau || mixSet || arm.dropRate > 0 || arm.staleness > 0 || arm.keepOnDrop ||
            arm.dueWeight)
            return bad(
                "async<S> sets its own schedule (a fragment's new values reach a worker at its "
                "next unit, and replace its own unless carry) and draws no faults: it takes "
                "none of tau, mix, drop, stale, keep or tokw");
        if (arm.H % arm.streamFragments != 0)
            return bad("async<S> needs H to be a multiple of F: a unit is H / F steps");
    }
    if (arm.streamFragments > 0) {
        if (arm.pipelined || arm.rebaseFraction != 1.0f || arm.startBlend > 0 ||
            arm.momentumLookahead > 0 || arm.lookahead || arm.predictStart ||
            arm.shiftFraction > 0 || arm.roundSchedule || arm.attack != Attack::None ||
            arm.gate != GateRule::None || arm.weightDeltas != WeightDeltaCodec::Off)
            return bad(
                "stream<F> overlaps by its own schedule (every fragment merged tau steps after "
                "its sync): it takes none of pipe, raw/reb/sreb, eager, nest, look, pred, "
                "shift, wus, byz, gate or wd");
        if (arm.streamFragments > arm.H)
            return bad("stream<F> needs F <= H: fragments sync at distinct steps p x H / F");
        if (!arm.streamTau)
            arm.streamTau =
                static_cast<int>(std::lround(static_cast<double>(arm.H) / arm.streamFragments));
        if (*arm.streamTau > arm.H)
            return bad(
                "tau<S> must be at most H: a fragment's new global arrives before its "
                "next sync");
    }
    if ((arm.attack != Attack::None || arm.gate != GateRule::None) &&
        (arm.pipelined || arm.staleness > 0))
        return bad("Byzantine workers and the gate are simulated for on-time uploads only");
    if (arm.shiftFraction > 0 && (arm.pipelined || arm.staleness > 0 || arm.dropRate > 0 ||
                                  arm.momentumLookahead > 0 || arm.predictStart))
        return bad(
            "shift<F> simulates on-time uploads whose next unit moves onto the new "
            "version after F x H steps: it takes neither pipe, stale, drop, nest nor pred");
    if (arm.startBlend > 0 && !arm.pipelined && arm.shiftFraction == 0)
        return bad("eager<X> blends the start of overlapped units: it needs pipe");
    if (arm.predictStart &&
        (!arm.pipelined || arm.lookahead || arm.startBlend > 0 || arm.momentumLookahead > 0))
        return bad(
            "pred guesses the start of overlapped units: it needs pipe, and neither look, "
            "eager<X> nor nest<C>");
    if (arm.momentumLookahead > 0 && (!arm.pipelined || arm.lookahead))
        return bad("nest<C> moves the start of overlapped units: it needs pipe and not look");
    if (arm.startRebase && (!arm.pipelined || arm.lookahead))
        return bad(
            "sreb<X> re-bases late results from their unit's start: it needs pipe and "
            "not look");
    if (arm.lookahead && (!arm.pipelined || arm.startBlend > 0 || arm.rebaseFraction != 1.0f))
        return bad(
            "look starts overlapped units a tentative outer step ahead: it needs pipe, "
            "and neither eager<X> nor raw/reb<X> (its uploads are never re-based)");
    if (arm.dueWeight && (arm.pipelined || arm.staleness > 0))
        return bad("tokw is simulated for on-time uploads only");
    return arm;
}

namespace {

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
}  // namespace

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
        } else if (flag == "--first-seed") {
            ok = integer(1, 1000000, &o->firstSeed);
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
        } else if (flag == "--threads") {
            ok = integer(1, 256, &o->threads);
        } else if (flag == "--jobs") {
            ok = integer(1, 256, &o->jobs);
        } else if (flag == "--max-rise") {
            ok = parseNumber(value, flag.c_str(), 0, 1e6, &o->maxRise);
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
            arms =
                "sync,h10-fp16,h10-int8-drop30-stale1,h10-fp16-pipe-eager0.5,h10-drop30-keep-m2,"
                "h10-fp16-pipe-look";
        if (o->steps == 0)
            o->steps = 40;
        o->seeds = std::min(o->seeds, 1);
        o->evalEvery = 10;
        o->evalBatches = 4;
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

}  // namespace tandem::bench
