// tandem-bench-diloco: DiLoCo against synchronous data-parallel training at equal tokens, in one
// process. K workers are simulated with K CPU backends; the pseudo-gradients go through the real
// codecs (fp32, fp16, int8), the coordinator's accumulate and its outer Nesterov step. Faults:
// uploads dropped at random, one result per round arriving one version late. Everything is
// deterministic in the seed. Prints a table of final validation losses and writes the loss curves
// (JSON and CSV) for docs/benchmarks.md and bench/plot_diloco.py.
//
// The parts: diloco_study.hpp.
#include "corpus.hpp"
#include "cpu_model.hpp"
#include "diloco_study.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <vector>

using namespace tandem;
using namespace tandem::bench;

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
            const int steps = arm.steps > 0 ? arm.steps : ctx.steps;
            if (!arm.sync && steps % arm.H != 0) {
                std::fprintf(stderr,
                             "tandem-bench-diloco: %s: %d steps is not a multiple of H = %d "
                             "(arm %s); expected whole rounds\n",
                             name.c_str(), steps, arm.H, arm.name.c_str());
                return 2;
            }
            // The held-out batches have --batch sequences; a backend holds at most its own B.
            if (arm.batch > 0 && arm.batch < options.batch) {
                std::fprintf(stderr,
                             "tandem-bench-diloco: arm %s: b%d is below --batch %d, the "
                             "validation batch; lower --batch instead\n",
                             arm.name.c_str(), arm.batch, options.batch);
                return 2;
            }
        }
        evalSets.push_back(std::make_unique<EvalSet>(
            makeEvalSet(heldOut, options.batch, ctx.T, options.evalBatches)));
        ctx.eval = evalSets.back().get();
        contexts.push_back(ctx);
        for (const Arm& arm : options.arms)
            for (int seed = options.firstSeed; seed < options.firstSeed + options.seeds; ++seed)
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
                "  %-6s %-26s seed %d  val loss %.4f  (%.3f -> %.4f train)  %.1f B/token "
                " %d dropped %d late  agreement %.2f  rise %.1f%%  %.1f s%s\n",
                r->configName.c_str(), r->arm.c_str(), r->seed, r->finalLoss,
                r->curve.front().valLoss, r->lastTrainLoss,
                r->bytesPerWorker / static_cast<double>(r->tokensPerWorker), r->droppedUploads,
                r->staleResults, r->agreementMean, 100.0 * r->maxRise, r->wallSeconds,
                t.arm->gate == bench::GateRule::None
                    ? ""
                    : ("  gate: " + std::to_string(r->gateRefused) + " refused, " +
                       std::to_string(r->gateDownWeighted) + " down-weighted")
                          .c_str());
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
    std::printf("%-8s %-26s %5s %9s %8s %17s %9s %12s  %s\n", "config", "arm", "seeds", "mean",
                "std", "min..max", "vs sync", "B/tok/wkr", "sync arm");
    for (const Summary& s : summary)
        std::printf("%-8s %-26s %5d %9.4f %8.4f %8.4f..%-8.4f %+8.2f%% %12.2f  %s\n",
                    s.configName.c_str(), s.arm.c_str(), s.seeds, s.mean, s.stddev, s.min, s.max,
                    100.0 * s.vsSync, s.bytesPerToken, s.vsSyncArm.c_str());
    // Long runs check that no run diverged: the loss never rose far above its best.
    if (options.maxRise >= 0) {
        for (const RunResult& r : ordered) {
            if (!(r.maxRise <= options.maxRise)) {
                std::fprintf(stderr,
                             "tandem-bench-diloco: %s %s seed %d: the validation loss rose %.1f%% "
                             "above its running minimum; at most %.1f%% expected\n",
                             r.configName.c_str(), r.arm.c_str(), r.seed, 100.0 * r.maxRise,
                             100.0 * options.maxRise);
                return 1;
            }
        }
    }
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
