// What a worker saves per work unit by keeping the AdamW moments in memory between units
// (core/unit_runner.hpp) instead of the round trip through optimizer.ckpt it made at every unit:
// read the weights and moments out of the backend, write them atomically with fsync
// (core::saveMoments), read them back for the next unit (core::carriedMoments) and load them.
// Beside it, the median training step, so that the share of a unit's wall time is known.
#include "backend.hpp"
#include "checkpoint.hpp"
#include "cpu_model.hpp"
#include "model.hpp"
#include "unit_files.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: tandem-bench-unit-io [--config NAME] [--batch B] [--steps H] [--threads N]\n"
    "                            [--repeats N] [--dir DIR] [--json FILE]\n"
    "\n"
    "Times the per-unit moments round trip the worker no longer makes (store, save with fsync,\n"
    "load back) and a training step, on the CPU backend. --dir is where optimizer.ckpt goes (give\n"
    "the disk the worker's data directory is on; default ./bench-unit-io.tmp, removed after).\n"
    "--steps H is the inner steps of a unit for the share of its wall time (default 50).\n";

double msSince(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty()      ? 0
           : v.size() % 2 ? v[v.size() / 2]
                          : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int fail(const std::string& what) {
    std::fprintf(stderr, "tandem-bench-unit-io: %s\n", what.c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    std::string config = "tiny", json;
    int batch = 8, steps = 50, threads = 2, repeats = 5;
    fs::path dir = "bench-unit-io.tmp";
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (i + 1 >= argc)
            return fail(flag + " needs a value (see --help)");
        const std::string value = argv[++i];
        auto number = [&](int* out) {
            char* end = nullptr;
            const long v = std::strtol(value.c_str(), &end, 10);
            if (!end || *end || v < 1 || v > 1'000'000)
                return false;
            *out = static_cast<int>(v);
            return true;
        };
        bool ok = true;
        if (flag == "--config")
            config = value;
        else if (flag == "--batch")
            ok = number(&batch);
        else if (flag == "--steps")
            ok = number(&steps);
        else if (flag == "--threads")
            ok = number(&threads);
        else if (flag == "--repeats")
            ok = number(&repeats);
        else if (flag == "--dir")
            dir = value;
        else if (flag == "--json")
            json = value;
        else
            return fail("unknown option " + flag + " (see --help)");
        if (!ok)
            return fail(flag + " expects a whole number from 1, got '" + value + "'");
    }
    auto model = ModelConfig::parse(config);
    if (!model)
        return fail("--config: " + model.error().message);
    auto backend = makeCpuBackend("cpu", threads);
    if (!backend)
        return fail(backend.error().message);
    Backend& b = **backend;
    const int T = model->maxSeqLen;
    if (auto st = b.allocate(*model, batch, T); !st)
        return fail(st.error().message);
    const size_t P = static_cast<size_t>(model->parameterCount());
    std::vector<float> params(P);
    initParameters(ParameterLayout(*model), params, 1);
    if (auto st = b.loadParameters(params); !st)
        return fail(st.error().message);
    OptimizerState zero;
    zero.m.assign(P, 0.0f);
    zero.v.assign(P, 0.0f);
    if (auto st = b.loadOptimizerState(zero); !st)
        return fail(st.error().message);

    // Training steps on fixed tokens: the first is a warm-up.
    std::vector<int32_t> in(static_cast<size_t>(batch) * T), target(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        in[i] = static_cast<int32_t>((i * 7919) % static_cast<size_t>(model->vocabSize));
        target[i] = static_cast<int32_t>((i * 104729 + 1) % static_cast<size_t>(model->vocabSize));
    }
    AdamWConfig adamw;
    std::vector<double> stepMs;
    for (int s = 0; s < 1 + repeats; ++s) {
        const auto t0 = std::chrono::steady_clock::now();
        if (auto loss = b.forward(in, target, batch, T); !loss)
            return fail(loss.error().message);
        if (auto st = b.backward(); !st)
            return fail(st.error().message);
        if (auto st = b.adamwStep(adamw, 1e-4f); !st)
            return fail(st.error().message);
        if (s > 0)
            stepMs.push_back(msSince(t0));
    }

    // The round trip each unit made before: store, save (fsync), read back, load.
    std::error_code ec;
    fs::create_directories(dir, ec);
    const core::DataDir files(dir);
    net::Manifest m;
    m.runId = 1;
    m.model = *model;
    std::vector<double> saveMs, loadMs;
    for (int r = 0; r < repeats; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        Checkpoint ck;
        ck.config = *model;
        ck.parameters.resize(P);
        if (auto st = b.storeParameters(ck.parameters); !st)
            return fail(st.error().message);
        auto opt = b.storeOptimizerState();
        if (!opt)
            return fail(opt.error().message);
        ck.optimizer = std::move(*opt);
        if (auto st = core::saveMoments(files, m, "cpu", ck); !st)
            return fail(st.error().message);
        saveMs.push_back(msSince(t0));
        t0 = std::chrono::steady_clock::now();
        auto carried = core::carriedMoments(files, m, "cpu");
        if (!carried)
            return fail("the moments just written cannot be read back");
        if (auto st = b.loadOptimizerState(*carried); !st)
            return fail(st.error().message);
        loadMs.push_back(msSince(t0));
    }
    fs::remove_all(dir, ec);

    const double step = median(stepMs), save = median(saveMs), load = median(loadMs);
    const double unitBefore = steps * step + save + load;
    const double share = (save + load) / unitBefore;
    std::printf("tandem-bench-unit-io: %s, %d threads, config %s (P = %zu), B = %d, T = %d\n",
                bench::cpuModel().c_str(), threads, config.c_str(), P, batch, T);
    std::printf("%-34s %10.1f ms\n", "training step (median)", step);
    std::printf("%-34s %10.1f ms\n", "moments: store + save + fsync", save);
    std::printf("%-34s %10.1f ms\n", "moments: read back + load", load);
    std::printf("%-34s %10.1f ms per unit (%.1f%% of a %d-step unit)\n", "saved by keeping them",
                save + load, 100.0 * share, steps);
    if (!json.empty()) {
        std::ofstream out(json);
        out << "{\"config\":\"" << config << "\",\"parameters\":" << P << ",\"batch\":" << batch
            << ",\"threads\":" << threads << ",\"step_ms\":" << step << ",\"save_ms\":" << save
            << ",\"load_ms\":" << load << ",\"unit_steps\":" << steps << ",\"share\":" << share
            << "}\n";
        if (!out)
            return fail("cannot write " + json);
    }
    return 0;
}
