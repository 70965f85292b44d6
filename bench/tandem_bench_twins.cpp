// tandem-bench-twins: how far apart two honest results of the same work unit are (the same start
// weights, data range, seed, H and learning rates), trained on different backends or by workers
// whose carried AdamW moments differ, beside the distance of attacks, in the coordinator's
// measure (coordinator/replication.hpp: ||a - b|| / max(||a||, ||b||) of the decoded fp16
// deltas). The default --replicate-tolerance is chosen from these figures (docs/benchmarks.md,
// "Replication spot-checks").
//
// Dimensions: P parameters.
#include "backend.hpp"
#include "codec.hpp"
#include "corpus.hpp"
#include "cpu_model.hpp"
#include "cuda/cuda_backend.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "random.hpp"
#include "replication.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

using namespace tandem;

namespace {

struct Options {
    std::string config = "tiny";
    int batch = 8;
    int steps = 50;  // H of the unit
    int warm = 150;  // steps trained before, so that the unit starts mid-run
    int threads = 2;
    std::string corpus = "/usr/share/games/fortunes";
};

int usage(const char* why) {
    std::fprintf(stderr,
                 "tandem-bench-twins: %s\n"
                 "usage: tandem-bench-twins [--config NAME] [--batch B] [--steps H] [--warm N]\n"
                 "                          [--threads N] [--corpus PATH]\n",
                 why);
    return 2;
}

struct Unit {
    TokenView tokens;
    uint64_t seed = 0;
    int H = 0, B = 0, T = 0;
    LrSchedule lr;
    int64_t lrStart = 0;
};

// Trains `unit` from `start` with `moments` on a fresh backend; returns the fp16 delta decoded
// as the coordinator decodes it, and the moments at the end.
Expected<std::pair<std::vector<float>, OptimizerState>> train(
    const std::string& backendName, int threads, const ModelConfig& config,
    const std::vector<float>& start, const OptimizerState& moments, const Unit& unit) {
    auto backend = makeBackendByName(backendName, threads);
    if (!backend)
        return backend.error();
    Backend& b = **backend;
    if (auto st = b.allocate(config, unit.B, unit.T); !st)
        return st.error();
    if (auto st = b.loadParameters(start); !st)
        return st.error();
    if (auto st = b.loadOptimizerState(moments); !st)
        return st.error();
    BatchSampler sampler(unit.tokens, unit.seed);
    std::vector<int32_t> inputs(static_cast<size_t>(unit.B) * unit.T), targets(inputs.size());
    const AdamWConfig adamw;
    for (int h = 0; h < unit.H; ++h) {
        sampler.next(unit.B, unit.T, inputs, targets);
        if (auto loss = b.forward(inputs, targets, unit.B, unit.T); !loss)
            return loss.error();
        if (auto st = b.backward(); !st)
            return st.error();
        if (auto st = b.adamwStep(adamw, unit.lr.at(unit.lrStart + h)); !st)
            return st.error();
    }
    std::vector<uint16_t> halves(start.size());
    if (auto st = b.encodePseudoGradient(start, halves); !st)
        return st.error();
    std::vector<float> delta(start.size(), 0.0f);
    accumulateFp16(delta, halves, 1.0f);
    auto state = b.storeOptimizerState();
    if (!state)
        return state.error();
    return std::pair{std::move(delta), std::move(*state)};
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        ab += double(a[i]) * b[i];
        aa += double(a[i]) * a[i];
        bb += double(b[i]) * b[i];
    }
    return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0;
}

void row(const char* what, const std::vector<float>& a, const std::vector<float>& b) {
    std::printf("%-58s %9.5f %9.5f\n", what, coord::twinDistance(a, b), cosine(a, b));
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (i + 1 >= argc)
            return usage(("missing value after " + flag).c_str());
        const char* v = argv[++i];
        if (flag == "--config")
            o.config = v;
        else if (flag == "--batch")
            o.batch = std::atoi(v);
        else if (flag == "--steps")
            o.steps = std::atoi(v);
        else if (flag == "--warm")
            o.warm = std::atoi(v);
        else if (flag == "--threads")
            o.threads = std::atoi(v);
        else if (flag == "--corpus")
            o.corpus = v;
        else
            return usage(("unknown option " + flag).c_str());
    }
    if (o.batch < 1 || o.steps < 1 || o.warm < 1 || o.threads < 1)
        return usage("--batch, --steps, --warm and --threads must be at least 1");
    auto config = ModelConfig::parse(o.config);
    if (!config)
        return usage(config.error().message.c_str());
    const std::filesystem::path corpusPath = o.corpus;
    auto corpus = loadTextCorpus(std::span(&corpusPath, 1));
    if (!corpus) {
        std::fprintf(stderr, "tandem-bench-twins: %s\n", corpus.error().message.c_str());
        return 1;
    }
    const ParameterLayout layout(*config);
    const int64_t P = layout.parameterCount();
    std::vector<float> theta(static_cast<size_t>(P));
    initParameters(layout, theta, 1);
    const int T = config->maxSeqLen;
    const int64_t quarter = static_cast<int64_t>(corpus->size() / 4);
    auto slice = [&](int k) {
        return TokenView(std::span<const uint8_t>(corpus->data() + k * quarter, quarter));
    };
    // The run's schedule (the coordinator's defaults: warmup 100, then constant 6e-4).
    const LrSchedule lr{6e-4f, 6e-4f, 100, 100};
    OptimizerState fresh;
    fresh.m.assign(static_cast<size_t>(P), 0.0f);
    fresh.v.assign(static_cast<size_t>(P), 0.0f);
    auto fail = [](const Error& e) {
        std::fprintf(stderr, "tandem-bench-twins: %s\n", e.message.c_str());
        return 1;
    };

    // Mid-run weights: --warm steps from the initialisation.
    Unit warm{slice(0), 11, o.warm, o.batch, T, lr, 0};
    auto warmed = train("cpu", o.threads, *config, theta, fresh, warm);
    if (!warmed)
        return fail(warmed.error());
    for (int64_t i = 0; i < P; ++i)
        theta[size_t(i)] -= warmed->first[size_t(i)];
    // Two workers' histories: each trained a different unit from these weights before.
    const int64_t at = o.warm;
    Unit pastA{slice(1), 21, o.steps, o.batch, T, lr, at};
    Unit pastB{slice(2), 22, o.steps, o.batch, T, lr, at};
    auto histA = train("cpu", o.threads, *config, theta, fresh, pastA);
    auto histB = train("cpu", o.threads, *config, theta, fresh, pastB);
    if (!histA || !histB)
        return fail(!histA ? histA.error() : histB.error());
    const OptimizerState& movedA = histA->second;
    const OptimizerState& movedB = histB->second;

    // The unit both twins train, and another unit for comparison.
    const Unit unit{slice(3), 31, o.steps, o.batch, T, lr, at + o.steps};
    const Unit other{slice(1), 32, o.steps, o.batch, T, lr, at + o.steps};
    auto run = [&](const char* backend, const OptimizerState& m, const Unit& u) {
        return train(backend, o.threads, *config, theta, m, u);
    };
    auto ref = run("cpu-reference", fresh, unit);
    auto cpu = run("cpu", fresh, unit);
    auto cpu1 = train("cpu", 1, *config, theta, fresh, unit);
    auto emu = run("cuda-emulated", fresh, unit);
    auto cpuA = run("cpu", movedA, unit);
    auto cpuB = run("cpu", movedB, unit);
    auto emuB = run("cuda-emulated", movedB, unit);
    auto otherUnit = run("cpu", fresh, other);
    for (auto* r : {&ref, &cpu, &cpu1, &emu, &cpuA, &cpuB, &emuB, &otherUnit})
        if (!*r)
            return fail(r->error());

    std::printf(
        "tandem-bench-twins: %s (%lld parameters), B=%d T=%d, H=%d after %d steps, %s, "
        "%d threads\n",
        o.config.c_str(), static_cast<long long>(P), o.batch, T, o.steps, o.warm,
        bench::cpuModel().c_str(), o.threads);
    std::printf("%-58s %9s %9s\n", "pair (fp16 deltas of one unit)", "distance", "cosine");
    row("cpu vs cpu (same moments)", cpu->first, cpu->first);
    row("cpu 1 thread vs cpu 2 threads (fresh moments)", cpu1->first, cpu->first);
    row("cpu-reference vs cpu (fresh moments)", ref->first, cpu->first);
    row("cpu vs cuda-emulated (fresh moments)", cpu->first, emu->first);
    row("cpu-reference vs cuda-emulated (fresh moments)", ref->first, emu->first);
    row("cpu, worker A's moments vs worker B's", cpuA->first, cpuB->first);
    row("cpu A's moments vs cuda-emulated B's moments", cpuA->first, emuB->first);
    row("cpu fresh moments vs A's moments (a new worker)", cpu->first, cpuA->first);
    // Attacks on B's honest result, against A's honest one.
    const auto& honest = cpuB->first;
    auto scaled = [&](float k) {
        std::vector<float> v(honest);
        for (float& x : v)
            x *= k;
        return v;
    };
    row("attack: sign flipped", cpuA->first, scaled(-1));
    row("attack: scaled x 2", cpuA->first, scaled(2));
    row("attack: scaled x 0.5", cpuA->first, scaled(0.5f));
    row("attack: scaled x 1.5", cpuA->first, scaled(1.5f));
    {
        Rng rng(7);
        double norm = 0;
        for (float x : honest)
            norm += double(x) * x;
        std::vector<float> noise(honest.size());
        for (float& x : noise)
            x = static_cast<float>(rng.normal() * std::sqrt(norm / double(P)));
        row("attack: Gaussian noise of the same norm", cpuA->first, noise);
        std::vector<float> mixed(honest);
        for (size_t i = 0; i < mixed.size(); ++i)
            mixed[i] += 0.5f * noise[i];
        row("attack: honest + noise of half its norm", cpuA->first, mixed);
    }
    row("attack: another unit's honest result", cpuA->first, otherUnit->first);
    return 0;
}
