// The CUDA backend factories: GptBackend over the device or the emulated CUDA op set.
#include "cuda_backend.hpp"

#include "cuda_ops_internal.hpp"
#include "devices.hpp"
#include "gpt_backend.hpp"

#include <cstdio>
#include <string>

namespace tandem {

bool cudaBackendBuilt() {
#if TANDEM_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

Expected<std::unique_ptr<Ops>> makeCudaOps(int device) {
    if (device < 0)
        return makeError("CUDA device index must be >= 0, got " + std::to_string(device));
#if TANDEM_HAVE_CUDA
    // Say why in words ("no NVIDIA driver found") rather than with a CUDA error code.
    const GpuInventory gpus = detectGpus();
    if (!gpus.usable())
        return makeError(gpus.unavailableReason);
    if (device >= static_cast<int>(gpus.devices.size())) {
        return makeError("there is no CUDA device " + std::to_string(device) + "; found " +
                         std::to_string(gpus.devices.size()));
    }
    if (!gpus.devices[device].supported) {
        return makeError(gpus.devices[device].name + " (CUDA device " + std::to_string(device) +
                         ") is too old for Tandem: compute capability 7.5 or newer is needed");
    }
    return cuda_device::createCudaOps(device);
#else
    return makeError("this build of Tandem has no CUDA backend (it was built without nvcc)");
#endif
}

Expected<std::unique_ptr<Backend>> makeCudaBackend(int device) {
    auto ops = makeCudaOps(device);
    if (!ops)
        return ops.error();
#if TANDEM_HAVE_CUDA
    std::unique_ptr<Backend> backend = std::make_unique<GptBackend>(
        "cuda:" + std::to_string(device), std::move(ops.value()),
        [device] { return cuda_device::availableDeviceBytes(device); });
    return backend;
#else
    return makeError("this build of Tandem has no CUDA backend (it was built without nvcc)");
#endif
}

Expected<std::unique_ptr<Ops>> makeEmulatedCudaOps() {
    return cuda_emulated::createCudaOps(0);
}

Expected<std::unique_ptr<Backend>> makeEmulatedCudaBackend() {
    auto ops = makeEmulatedCudaOps();
    if (!ops)
        return ops.error();
    std::unique_ptr<Backend> backend =
        std::make_unique<GptBackend>("cuda-emulated", std::move(ops.value()),
                                     [] { return cuda_emulated::availableDeviceBytes(0); });
    return backend;
}

namespace {

// "cuda" -> 0, "cuda:3" -> 3; -1 when the name is not a GPU backend.
int cudaDeviceOf(std::string_view name) {
    if (name == "cuda")
        return 0;
    if (name.substr(0, 5) != "cuda:" || name.size() == 5)
        return -1;
    int device = 0;
    for (char c : name.substr(5)) {
        if (c < '0' || c > '9' || device > 1000)
            return -1;
        device = device * 10 + (c - '0');
    }
    return device;
}

}  // namespace

Expected<std::unique_ptr<Backend>> makeBackendByName(std::string_view name, int threads) {
    if (name == "cuda-emulated")
        return makeEmulatedCudaBackend();
    if (name.substr(0, 4) == "cuda") {
        const int device = cudaDeviceOf(name);
        if (device < 0) {
            return makeError("unknown backend '" + std::string(name) +
                             "'; expected cuda, cuda:N or cuda-emulated");
        }
        return makeCudaBackend(device);
    }
    return makeCpuBackend(name, threads);
}

double trainingFlopsPerToken(const ModelConfig& config, int T) {
    const double N = static_cast<double>(config.parameterCount()) -
                     static_cast<double>(config.maxSeqLen) * config.channels;
    return 6.0 * N + 12.0 * config.layers * config.channels * T;
}

double peakFlopsForBackend(std::string_view name) {
    const int device = cudaDeviceOf(name);
    if (device < 0)
        return 0;
    const GpuInventory gpus = detectGpus();
    if (device >= static_cast<int>(gpus.devices.size()))
        return 0;
    return gpus.devices[device].peakFp32Flops;
}

std::string describeBackendDevice(std::string_view name) {
    const int device = cudaDeviceOf(name);
    if (device < 0)
        return {};
    const GpuInventory gpus = detectGpus();
    if (device >= static_cast<int>(gpus.devices.size()))
        return gpus.unavailableReason;
    const GpuDevice& d = gpus.devices[device];
    char text[256];
    std::snprintf(text, sizeof text, "%s, %d SMs, compute %d.%d, %.1f TFLOP/s fp32, driver %s",
                  d.name.c_str(), d.smCount, d.computeMajor, d.computeMinor, d.peakFp32Flops / 1e12,
                  gpus.driverVersion.c_str());
    return text;
}

}  // namespace tandem
