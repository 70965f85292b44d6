// makeCpuBackend: the CPU backends by name ("cpu" fast, "cpu-openblas" the same with every
// product on OpenBLAS, "cpu-reference" plain loops), each a GptBackend over host memory.
#include "backend.hpp"
#include "cpu/cpu_ops.hpp"
#include "cpu_reference/reference_ops.hpp"
#include "gpt_backend.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace tandem {

int64_t availableHostBytes() {
    if (std::FILE* file = std::fopen("/proc/meminfo", "r")) {
        char line[256];
        long long kib = -1;
        while (std::fgets(line, sizeof line, file)) {
            if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
                break;
        }
        std::fclose(file);
        if (kib >= 0)
            return static_cast<int64_t>(kib) * 1024;
    }
    const long pages = sysconf(_SC_AVPHYS_PAGES);
    const long pageBytes = sysconf(_SC_PAGESIZE);
    if (pages > 0 && pageBytes > 0)
        return static_cast<int64_t>(pages) * pageBytes;
    return INT64_MAX;  // unknown: let the allocation itself fail
}

Expected<std::unique_ptr<Backend>> makeCpuBackend(std::string_view name, int threads) {
    if (name == "cpu" || name == "cpu-openblas") {
        if (threads < 1) {
            return makeError("the " + std::string(name) + " backend needs at least 1 thread, got " +
                             std::to_string(threads));
        }
        const auto products = name == "cpu" ? CpuProducts::Fastest : CpuProducts::OpenBlas;
        std::unique_ptr<Backend> backend = std::make_unique<GptBackend>(
            std::string(name), std::make_unique<CpuOps>(threads, products), availableHostBytes);
        return backend;
    }
    if (name == "cpu-reference") {
        std::unique_ptr<Backend> backend = std::make_unique<GptBackend>(
            "cpu-reference", std::make_unique<ReferenceOps>(), availableHostBytes);
        return backend;
    }
    return makeError("unknown CPU backend '" + std::string(name) +
                     "'; expected one of: cpu, cpu-openblas, cpu-reference");
}

}  // namespace tandem
