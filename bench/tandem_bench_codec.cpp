// tandem-bench-codec: parameters per second of the DiLoCo vector kernels: the worker's fp16
// encode of its pseudo-gradient, the coordinator's decode + weighted accumulate and its scan of
// an incoming delta, and the outer Nesterov step. Prints one table line per kernel and size and
// optionally writes JSON.
//
// Dimensions: P parameters.
#include "codec.hpp"
#include "cpu_model.hpp"
#include "model.hpp"
#include "outer.hpp"
#include "random.hpp"
#include "thread_pool.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

using namespace tandem;

namespace {

const char* kUsage =
    "usage: tandem-bench-codec [options]\n"
    "\n"
    "Measures parameters/s of the fp16 pseudo-gradient encode, decode + weighted accumulate,\n"
    "the fp16 scan and the outer Nesterov step: the median of --repeats timed calls after one\n"
    "untimed call. GB/s counts the bytes each kernel must read and write.\n"
    "\n"
    "  --params N     vector length; may be repeated (default: the medium config's parameter\n"
    "                 count and 124,000,000, the size of GPT-2 small)\n"
    "  --threads N    threads; may be repeated (default: all hardware threads)\n"
    "  --repeats N    timed calls per kernel (default 7)\n"
    "  --json FILE    also write the results as JSON\n"
    "  --help         this text\n";

struct Result {
    std::string kernel;
    int64_t params = 0;
    int threads = 0;
    double medianMs = 0;
    double cpuMs = 0;  // process CPU time per call, all threads: less sensitive to other load
    double paramsPerSecond = 0;
    double gigabytesPerSecond = 0;
};

bool parseCount(const char* text, const char* flag, int64_t lo, int64_t hi, int64_t* value) {
    char* end = nullptr;
    const long long parsed = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || parsed < lo || parsed > hi) {
        std::fprintf(stderr,
                     "tandem-bench-codec: %s expects a whole number from %lld to %lld, "
                     "got '%s'\n",
                     flag, static_cast<long long>(lo), static_cast<long long>(hi), text);
        return false;
    }
    *value = parsed;
    return true;
}

double processCpuMs() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// Median wall time and median process CPU time of repeated calls, in ms.
std::pair<double, double> medianMs(int repeats, const std::function<void()>& fn) {
    fn();  // untimed: first touch of pages, warm caches and threads
    std::vector<double> times, cpuTimes;
    for (int i = 0; i < repeats; ++i) {
        const double cpuStart = processCpuMs();
        const auto start = std::chrono::steady_clock::now();
        fn();
        const auto stop = std::chrono::steady_clock::now();
        cpuTimes.push_back(processCpuMs() - cpuStart);
        times.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
    std::sort(times.begin(), times.end());
    std::sort(cpuTimes.begin(), cpuTimes.end());
    return {times[times.size() / 2], cpuTimes[cpuTimes.size() / 2]};
}

std::string withCommas(int64_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0)
            out += ',';
        out += digits[i];
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<int64_t> sizes, threadCounts;
    int64_t repeats = 7;
    std::string jsonPath;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "tandem-bench-codec: unknown option or missing value '%s'\n%s",
                         arg.c_str(), kUsage);
            return 2;
        }
        const char* value = argv[++i];
        int64_t n = 0;
        if (arg == "--params") {
            if (!parseCount(value, "--params", 1, 2'000'000'000, &n))
                return 2;
            sizes.push_back(n);
        } else if (arg == "--threads") {
            if (!parseCount(value, "--threads", 1, 256, &n))
                return 2;
            threadCounts.push_back(n);
        } else if (arg == "--repeats") {
            if (!parseCount(value, "--repeats", 1, 1000, &repeats))
                return 2;
        } else if (arg == "--json") {
            jsonPath = value;
        } else {
            std::fprintf(stderr, "tandem-bench-codec: unknown option '%s'\n%s", arg.c_str(),
                         kUsage);
            return 2;
        }
    }
    if (sizes.empty())
        sizes = {ModelConfig::parse("medium")->parameterCount(), 124'000'000};
    if (threadCounts.empty()) {
        threadCounts = {static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()))};
    }

    const std::string cpu = bench::cpuModel();
    std::printf("CPU: %s (%u hardware threads)\n", cpu.c_str(),
                std::thread::hardware_concurrency());
    std::printf("%-22s %14s %7s %10s %8s %14s %9s\n", "kernel", "parameters", "threads",
                "median ms", "cpu ms", "Gparams/s", "GB/s");

    std::vector<Result> results;
    for (const int64_t P : sizes) {
        // Deltas of realistic size (|delta| < 1), a weight like tokens / total tokens.
        std::vector<float> a(P), b(P), c(P);
        std::vector<uint16_t> half(P);
        Rng rng(1);
        for (int64_t i = 0; i < P; ++i) {
            a[i] = rng.uniform();
            b[i] = rng.uniform();
            c[i] = 0.0f;
        }
        for (const int64_t threads : threadCounts) {
            ThreadPool pool(static_cast<int>(threads));
            ThreadPool* p = threads > 1 ? &pool : nullptr;
            auto measure = [&](const char* kernel, double bytesPerParam,
                               const std::function<void()>& fn) {
                Result r;
                r.kernel = kernel;
                r.params = P;
                r.threads = static_cast<int>(threads);
                std::tie(r.medianMs, r.cpuMs) = medianMs(static_cast<int>(repeats), fn);
                r.paramsPerSecond = P / (r.medianMs * 1e-3);
                r.gigabytesPerSecond = r.paramsPerSecond * bytesPerParam * 1e-9;
                std::printf("%-22s %14s %7d %10.2f %8.2f %14.3f %9.1f\n", kernel,
                            withCommas(P).c_str(), r.threads, r.medianMs, r.cpuMs,
                            r.paramsPerSecond * 1e-9, r.gigabytesPerSecond);
                std::fflush(stdout);
                results.push_back(r);
            };
            // Bytes moved: reads and writes each kernel cannot avoid.
            measure("memcpy (reference)", 8, [&] {
                auto copy = [&](int64_t begin, int64_t end) {
                    std::memcpy(c.data() + begin, a.data() + begin, (end - begin) * sizeof(float));
                };
                if (p != nullptr) {
                    p->parallelFor(P, 1 << 16, copy);
                } else {
                    copy(0, P);
                }
            });
            measure("fp16 encode", 10, [&] {
                auto stats = encodeDeltaFp16(a, b, half, p);
                if (!stats)
                    std::abort();
            });
            measure("fp16 accumulate", 10, [&] { accumulateFp16(c, half, 0.25f, p); });
            measure("fp16 scan", 2, [&] {
                volatile double s = scanFp16(half, p).sumSquares;
                (void)s;
            });
            std::fill(c.begin(), c.end(), 0.0f);
            measure("outer nesterov step", 20,
                    [&] { outerNesterovStep(a, c, b, 1e-3f, OuterConfig{}, p); });
        }
    }

    if (!jsonPath.empty()) {
        std::ofstream json(jsonPath);
        if (!json) {
            std::fprintf(stderr, "tandem-bench-codec: cannot write '%s': %s\n", jsonPath.c_str(),
                         std::strerror(errno));
            return 1;
        }
        json << "{\n  \"program\": \"tandem-bench-codec\",\n  \"cpu\": \"" << cpu
             << "\",\n  \"hardwareThreads\": " << std::thread::hardware_concurrency()
             << ",\n  \"results\": [\n";
        for (size_t i = 0; i < results.size(); ++i) {
            const Result& r = results[i];
            json << "    {\"kernel\": \"" << r.kernel << "\", \"params\": " << r.params
                 << ", \"threads\": " << r.threads << ", \"medianMs\": " << r.medianMs
                 << ", \"cpuMs\": " << r.cpuMs << ", \"paramsPerSecond\": " << r.paramsPerSecond
                 << ", \"gigabytesPerSecond\": " << r.gigabytesPerSecond << "}"
                 << (i + 1 < results.size() ? ",\n" : "\n");
        }
        json << "  ]\n}\n";
        std::printf("wrote %s\n", jsonPath.c_str());
    }
    return 0;
}
