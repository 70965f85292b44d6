// tandem-bench-step: tokens per second of whole inner training steps (forward, backward, AdamW)
// of a CPU backend on random tokens. Prints one table line per run and optionally writes JSON.
//
// Dimensions: B batch, T sequence (the config's maxSeqLen), P parameters.
#include "backend.hpp"
#include "checkpoint.hpp"
#include "cpu_model.hpp"
#include "cuda/cuda_backend.hpp"
#include "json_escape.hpp"
#include "memory_estimate.hpp"
#include "model.hpp"
#include "random.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace tandem;

namespace {

const char* kUsage =
    "usage: tandem-bench-step [options]\n"
    "\n"
    "Measures tokens/s of whole training steps (forward + backward + AdamW) on random tokens:\n"
    "the median over --steps timed steps after --warmup untimed ones. Every option except\n"
    "--steps, --warmup, --seed and --json may be repeated; one run per combination.\n"
    "After the steps it does what the worker does at a unit's end (a checkpoint with moments,\n"
    "the fp16 pseudo-gradient) and prints the process's peak RSS beside the worker's memory\n"
    "estimate (kernels/memory_estimate.hpp); the peak is the process's, so give one run per\n"
    "process when comparing them.\n"
    "\n"
    "  --backend NAME   cpu, cpu-openblas, cpu-reference, cuda, cuda:N or cuda-emulated\n"
    "                   (default cpu)\n"
    "  --config NAME    tiny, small, medium, gpt2, gpt2-medium, gpt2-large, gpt2-xl or\n"
    "                   L=..,NH=..,C=..,T=..[,V=..] (default tiny)\n"
    "  --batch B        sequences per step (default 8)\n"
    "  --threads N      threads of the cpu backend (default: all hardware threads)\n"
    "  --steps N        timed steps (default 10)\n"
    "  --warmup N       untimed steps first (default 2)\n"
    "  --seed N         parameter and token seed (default 1)\n"
    "  --json FILE      also write the results as JSON (with every step's loss and time)\n"
    "  --dump DIR       write the start parameters (parameters.f32), their table (layout.tsv)\n"
    "                   and every step's inputs and targets (tokens.i32) to DIR, for another\n"
    "                   program to train the same model on the same data (bench/torch_step.py);\n"
    "                   needs a single run\n"
    "  --help           this text\n";

struct Options {
    std::vector<std::string> backends, configs;
    std::vector<int> batches, threads;
    int steps = 10, warmup = 2;
    uint64_t seed = 1;
    std::string jsonPath, dumpDir;
};

struct RunResult {
    std::string backend, configName;
    ModelConfig config;
    int batch = 0, threads = 0, steps = 0, warmup = 0;
    double medianMs = 0, minMs = 0, maxMs = 0, tokensPerSecond = 0;
    double cpuMsMedian = 0;  // process CPU time per step: shows when other work took the cores
    float firstLoss = 0, lastLoss = 0;
    std::vector<float> losses;      // every step's, warm-up included
    std::vector<double> allStepMs;  // the timed steps, in order
    double mfu = 0;  // model FLOPs utilisation against the GPU's fp32 peak; 0: no GPU
    UnitMemoryEstimate estimate;
    int64_t peakRssBytes = 0;
};

// The process's peak resident set so far (Linux: ru_maxrss in KiB).
int64_t peakRssBytes() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

// What the worker holds at a unit's end beside the backend (ResultWriter): the fp16 payload,
// then the parameters and moments of a checkpoint and their file image.
Status workerUnitEnd(Backend& backend, const ModelConfig& config, const std::vector<float>& start) {
    std::vector<uint16_t> payload(start.size());
    if (auto enc = backend.encodePseudoGradient(start, payload); !enc)
        return enc.error();
    std::vector<uint8_t> body(payload.size() * sizeof(uint16_t));  // the request body's size
    std::memcpy(body.data(), payload.data(), body.size());
    Checkpoint ck;
    ck.config = config;
    ck.parameters.resize(start.size());
    if (auto s = backend.storeParameters(ck.parameters); !s)
        return s;
    auto opt = backend.storeOptimizerState();
    if (!opt)
        return opt.error();
    ck.optimizer = std::move(*opt);
    const std::vector<uint8_t> file = serializeCheckpoint(ck);
    return file.size() > body.size() ? Status{} : makeError("checkpoint image is too small");
}

double processCpuMs() {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

bool parsePositive(const char* text, const char* flag, int* value) {
    char* end = nullptr;
    const long parsed = std::strtol(text, &end, 10);
    if (!end || *end != '\0' || parsed < 0 || parsed > 1'000'000) {
        std::fprintf(stderr, "tandem-bench-step: %s expects a whole number, got '%s'\n", flag,
                     text);
        return false;
    }
    *value = static_cast<int>(parsed);
    return true;
}

// Returns 0 to go on, otherwise the exit code.
int parseOptions(int argc, char** argv, Options* options) {
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::fputs(kUsage, stdout);
            return -1;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "tandem-bench-step: %s needs a value (see --help)\n",
                         flag.c_str());
            return 2;
        }
        const char* value = argv[++i];
        int number = 0;
        if (flag == "--backend") {
            options->backends.push_back(value);
        } else if (flag == "--config") {
            options->configs.push_back(value);
        } else if (flag == "--batch" || flag == "--threads" || flag == "--steps" ||
                   flag == "--warmup" || flag == "--seed") {
            if (!parsePositive(value, flag.c_str(), &number))
                return 2;
            if ((flag == "--batch" || flag == "--threads" || flag == "--steps") && number < 1) {
                std::fprintf(stderr, "tandem-bench-step: %s must be at least 1\n", flag.c_str());
                return 2;
            }
            if (flag == "--batch")
                options->batches.push_back(number);
            else if (flag == "--threads")
                options->threads.push_back(number);
            else if (flag == "--steps")
                options->steps = number;
            else if (flag == "--warmup")
                options->warmup = number;
            else
                options->seed = static_cast<uint64_t>(number);
        } else if (flag == "--json") {
            options->jsonPath = value;
        } else if (flag == "--dump") {
            options->dumpDir = value;
        } else {
            std::fprintf(stderr, "tandem-bench-step: unknown option '%s' (see --help)\n",
                         flag.c_str());
            return 2;
        }
    }
    if (options->backends.empty())
        options->backends.push_back("cpu");
    if (options->configs.empty())
        options->configs.push_back("tiny");
    if (options->batches.empty())
        options->batches.push_back(8);
    if (options->threads.empty())
        options->threads.push_back(
            std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
    const size_t runs = options->backends.size() * options->configs.size() *
                        options->batches.size() * options->threads.size();
    if (!options->dumpDir.empty() && runs != 1) {
        std::fprintf(stderr,
                     "tandem-bench-step: --dump needs a single run (one --backend, "
                     "--config, --batch and --threads)\n");
        return 2;
    }
    return 0;
}

// Raw little-endian values, as numpy's fromfile reads them.
template <typename Value>
Status writeRaw(const std::string& path, const std::vector<Value>& values) {
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(Value)));
    return file ? Status{} : makeError("could not write " + path);
}

// The start parameters and their table: one line per tensor, "name offset dim0 [dim1]".
Status dumpModel(const std::string& dir, const ParameterLayout& layout,
                 const std::vector<float>& parameters) {
    std::ofstream table(dir + "/layout.tsv");
    for (const TensorInfo& t : layout.tensors()) {
        table << t.name << '\t' << t.offset;
        for (int d : t.shape)
            table << '\t' << d;
        table << '\n';
    }
    if (!table)
        return makeError("could not write " + dir + "/layout.tsv");
    return writeRaw(dir + "/parameters.f32", parameters);
}

Expected<RunResult> runOne(const Options& options, const std::string& backendName,
                           const std::string& configName, int B, int threads) {
    auto config = ModelConfig::parse(configName);
    if (!config)
        return config.error();
    auto made = makeBackendByName(backendName, threads);
    if (!made)
        return made.error();
    Backend& backend = **made;
    const int T = config->maxSeqLen;
    if (auto s = backend.allocate(*config, B, T); !s)
        return s.error();

    const ParameterLayout layout(*config);
    std::vector<float> parameters(layout.parameterCount());
    initParameters(layout, parameters, options.seed);
    if (auto s = backend.loadParameters(parameters); !s)
        return s.error();
    if (!options.dumpDir.empty()) {
        if (auto s = dumpModel(options.dumpDir, layout, parameters); !s)
            return s.error();
    }

    Rng rng(options.seed ^ 0x5eedull);
    const size_t n = static_cast<size_t>(B) * T;
    std::vector<int32_t> inputs(n), targets(n);
    const AdamWConfig adamw;
    RunResult result;
    std::vector<double> stepMs, cpuMs;
    std::vector<int32_t> allTokens;  // per step: inputs, then targets (--dump only)
    for (int step = 0; step < options.warmup + options.steps; ++step) {
        for (size_t i = 0; i < n; ++i) {
            inputs[i] = static_cast<int32_t>(rng.below(uint64_t(config->vocabSize)));
            targets[i] = static_cast<int32_t>(rng.below(uint64_t(config->vocabSize)));
        }
        if (!options.dumpDir.empty()) {
            allTokens.insert(allTokens.end(), inputs.begin(), inputs.end());
            allTokens.insert(allTokens.end(), targets.begin(), targets.end());
        }
        const double cpuStart = processCpuMs();
        const auto start = std::chrono::steady_clock::now();
        auto loss = backend.forward(inputs, targets, B, T);
        if (!loss)
            return loss.error();
        if (auto s = backend.backward(); !s)
            return s.error();
        auto stats = backend.adamwStep(adamw, 1e-4f);
        if (!stats)
            return stats.error();
        const auto end = std::chrono::steady_clock::now();
        const double cpuEnd = processCpuMs();
        if (step == 0)
            result.firstLoss = *loss;
        result.lastLoss = *loss;
        result.losses.push_back(*loss);
        if (step >= options.warmup) {
            stepMs.push_back(std::chrono::duration<double, std::milli>(end - start).count());
            cpuMs.push_back(cpuEnd - cpuStart);
        }
    }
    if (!options.dumpDir.empty()) {
        if (auto s = writeRaw(options.dumpDir + "/tokens.i32", allTokens); !s)
            return s.error();
    }
    result.allStepMs = stepMs;
    // `parameters` stayed alive all along, as the worker's start weights do.
    if (auto s = workerUnitEnd(backend, *config, parameters); !s)
        return s.error();
    result.estimate = estimateUnitMemory(*config, B, T);
    result.peakRssBytes = peakRssBytes();
    std::sort(stepMs.begin(), stepMs.end());
    result.backend = backendName;
    result.configName = configName;
    result.config = *config;
    result.batch = B;
    result.threads = backendName == "cpu" || backendName == "cpu-openblas" ? threads : 1;
    result.steps = options.steps;
    result.warmup = options.warmup;
    result.medianMs = median(stepMs);
    result.cpuMsMedian = median(cpuMs);
    result.minMs = stepMs.front();
    result.maxMs = stepMs.back();
    result.tokensPerSecond = static_cast<double>(n) / (result.medianMs / 1000.0);
    if (const double peak = peakFlopsForBackend(backendName); peak > 0)
        result.mfu = result.tokensPerSecond * trainingFlopsPerToken(*config, T) / peak;
    return result;
}

// A number as JSON has it (NaN and Inf, which JSON lacks, as null).
std::string jsonNumber(double value, const char* format) {
    if (!std::isfinite(value))
        return "null";
    char text[64];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

bool writeJson(const std::string& path, const std::string& cpu,
               const std::vector<RunResult>& results) {
    std::ofstream file(path);
    if (!file)
        return false;
    file << "{\n  \"benchmark\": \"inner-step\",\n  \"cpu\": \"" << bench::jsonEscape(cpu)
         << "\",\n  \"hardwareThreads\": " << std::thread::hardware_concurrency()
         << ",\n  \"runs\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
        const RunResult& r = results[i];
        char line[1024];
        std::snprintf(line, sizeof line,
                      "    {\"backend\": \"%s\", \"config\": \"%s\", \"layers\": %d, "
                      "\"heads\": %d, \"channels\": %d, \"seqLen\": %d, \"batch\": %d, "
                      "\"threads\": %d, \"steps\": %d, \"warmup\": %d, \"stepMsMedian\": %.3f, "
                      "\"stepMsMin\": %.3f, \"stepMsMax\": %.3f, \"cpuMsMedian\": %.3f, "
                      "\"tokensPerSecond\": %.1f, "
                      "\"parameters\": %lld, \"firstLoss\": %.6f, \"lastLoss\": %.6f, "
                      "\"mfu\": %.4f, \"estimateBytes\": %lld, \"peakRssBytes\": %lld, "
                      "\"vocab\": %d, ",
                      bench::jsonEscape(r.backend).c_str(), bench::jsonEscape(r.configName).c_str(),
                      r.config.layers, r.config.heads, r.config.channels, r.config.maxSeqLen,
                      r.batch, r.threads, r.steps, r.warmup, r.medianMs, r.minMs, r.maxMs,
                      r.cpuMsMedian, r.tokensPerSecond,
                      static_cast<long long>(r.config.parameterCount()), r.firstLoss, r.lastLoss,
                      r.mfu, static_cast<long long>(r.estimate.sharedTotalBytes()),
                      static_cast<long long>(r.peakRssBytes), r.config.vocabSize);
        file << line << "\"losses\": [";
        for (size_t k = 0; k < r.losses.size(); ++k)
            file << (k ? ", " : "") << jsonNumber(r.losses[k], "%.7g");
        file << "], \"stepMs\": [";
        for (size_t k = 0; k < r.allStepMs.size(); ++k)
            file << (k ? ", " : "") << jsonNumber(r.allStepMs[k], "%.3f");
        file << "]}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    file << "  ]\n}\n";
    return static_cast<bool>(file);
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    if (const int code = parseOptions(argc, argv, &options); code != 0)
        return code < 0 ? 0 : code;

    const std::string cpu = bench::cpuModel();
    std::printf("CPU: %s, %u hardware threads\n", cpu.c_str(), std::thread::hardware_concurrency());
    std::printf("median of %d steps after %d warm-up steps; a step is forward + backward + AdamW\n",
                options.steps, options.warmup);
    std::printf(
        "(cpu ms: process CPU time per step; well below threads x ms/step means other work\n"
        " had the cores)\n");
    std::printf("%-14s %-36s %4s %5s %8s %11s %10s %10s %12s\n", "backend", "config", "B", "T",
                "threads", "ms/step", "min ms", "cpu ms", "throughput");
    std::fflush(stdout);

    std::vector<RunResult> results;
    for (const std::string& backend : options.backends) {
        for (const std::string& config : options.configs) {
            for (int B : options.batches) {
                // The reference is single-threaded: one run whatever --threads says.
                const std::vector<int> threadCounts = backend == "cpu" || backend == "cpu-openblas"
                                                          ? options.threads
                                                          : std::vector<int>{1};
                for (int threads : threadCounts) {
                    auto result = runOne(options, backend, config, B, threads);
                    if (!result) {
                        std::fprintf(stderr, "tandem-bench-step: %s %s B=%d: %s\n", backend.c_str(),
                                     config.c_str(), B, result.error().message.c_str());
                        return 1;
                    }
                    const RunResult& r = *result;
                    if (const std::string gpu = describeBackendDevice(backend); !gpu.empty())
                        std::printf("GPU (%s): %s\n", backend.c_str(), gpu.c_str());
                    const std::string label = r.configName + " (" + r.config.describe() + ")";
                    // The line ends in "tok/s" (scripts read it); MFU, when known, comes before.
                    std::printf("%-14s %-36s %4d %5d %8d %11.2f %10.2f %10.2f ", r.backend.c_str(),
                                label.c_str(), r.batch, r.config.maxSeqLen, r.threads, r.medianMs,
                                r.minMs, r.cpuMsMedian);
                    if (r.mfu > 0)
                        std::printf("MFU %5.1f%%  ", 100.0 * r.mfu);
                    std::printf("%8.0f tok/s\n", r.tokensPerSecond);
                    // The estimate that compares with RAM: all of it for CPU backends, the
                    // worker's host copies only when the backend has its own memory.
                    const bool host = r.backend.starts_with("cpu");
                    const int64_t estimate =
                        host ? r.estimate.sharedTotalBytes() : r.estimate.workerHostBytes;
                    std::printf(
                        "  memory: estimate %s (backend %s, worker copies %s), peak RSS "
                        "%s, peak / estimate %.3f\n",
                        formatMemory(estimate).c_str(),
                        formatMemory(r.estimate.backendBytes()).c_str(),
                        formatMemory(r.estimate.workerHostBytes).c_str(),
                        formatMemory(r.peakRssBytes).c_str(),
                        static_cast<double>(r.peakRssBytes) / static_cast<double>(estimate));
                    std::fflush(stdout);
                    results.push_back(r);
                }
            }
        }
    }
    if (!options.jsonPath.empty() && !writeJson(options.jsonPath, cpu, results)) {
        std::fprintf(stderr, "tandem-bench-step: could not write %s\n", options.jsonPath.c_str());
        return 1;
    }
    return 0;
}
