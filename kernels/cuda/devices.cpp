// GPU detection: CUDA runtime queries (builds with nvcc) and NVML through dlopen (any build).
#include "devices.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#if TANDEM_HAVE_CUDA
#include "cublas_loader.hpp"

#include <cuda_runtime_api.h>
#endif

namespace tandem {

namespace {

constexpr int kMinComputeMajor = 7, kMinComputeMinor = 5;

// The few NVML entry points used, with their C signatures (nvml.h is not needed to build).
struct Nvml {
    using Device = void*;
    struct Utilization {
        unsigned gpu, memory;
    };
    struct Memory {
        unsigned long long total, free, used;
    };
    void* library = nullptr;
    int (*init)() = nullptr;
    int (*shutdown)() = nullptr;
    int (*handleByPciBusId)(const char*, Device*) = nullptr;
    int (*handleByIndex)(unsigned, Device*) = nullptr;
    int (*count)(unsigned*) = nullptr;
    int (*name)(Device, char*, unsigned) = nullptr;
    int (*utilization)(Device, Utilization*) = nullptr;
    int (*temperature)(Device, int, unsigned*) = nullptr;
    int (*power)(Device, unsigned*) = nullptr;
    int (*powerLimit)(Device, unsigned*) = nullptr;
    int (*memory)(Device, Memory*) = nullptr;
    int (*driverVersion)(char*, unsigned) = nullptr;

    bool load() {
        library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!library)
            return false;
        auto sym = [this](auto& fn, const char* symbol) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, symbol));
            return fn != nullptr;
        };
        const bool required = sym(init, "nvmlInit_v2") && sym(shutdown, "nvmlShutdown") &&
                              sym(count, "nvmlDeviceGetCount_v2") &&
                              sym(handleByIndex, "nvmlDeviceGetHandleByIndex_v2");
        sym(handleByPciBusId, "nvmlDeviceGetHandleByPciBusId_v2");
        sym(name, "nvmlDeviceGetName");
        sym(utilization, "nvmlDeviceGetUtilizationRates");
        sym(temperature, "nvmlDeviceGetTemperature");
        sym(power, "nvmlDeviceGetPowerUsage");
        sym(powerLimit, "nvmlDeviceGetEnforcedPowerLimit");
        sym(memory, "nvmlDeviceGetMemoryInfo");
        sym(driverVersion, "nvmlSystemGetDriverVersion");
        if (!required || init() != 0) {
            dlclose(library);
            library = nullptr;
            return false;
        }
        return true;
    }
    ~Nvml() {
        if (library) {
            shutdown();
            dlclose(library);
        }
    }

    // Utilisation, temperature and power of the device with this PCI bus id (or NVML index).
    void fill(GpuDevice& d, int nvmlIndex) const {
        Device handle = nullptr;
        if (!(handleByPciBusId && !d.pciBusId.empty() &&
              handleByPciBusId(d.pciBusId.c_str(), &handle) == 0) &&
            handleByIndex(static_cast<unsigned>(nvmlIndex), &handle) != 0) {
            return;
        }
        if (d.name.empty() && name) {
            char text[96] = {};
            if (name(handle, text, sizeof text) == 0)
                d.name = text;
        }
        Utilization u{};
        if (utilization && utilization(handle, &u) == 0)
            d.utilizationPercent = static_cast<int>(u.gpu);
        unsigned value = 0;
        if (temperature && temperature(handle, 0 /* NVML_TEMPERATURE_GPU */, &value) == 0) {
            d.temperatureC = static_cast<int>(value);
        }
        if (power && power(handle, &value) == 0)
            d.powerW = value / 1000.0;
        if (powerLimit && powerLimit(handle, &value) == 0)
            d.powerLimitW = value / 1000.0;
        Memory m{};
        if (memory && memory(handle, &m) == 0) {
            d.freeMemoryBytes = static_cast<int64_t>(m.free);
            if (d.totalMemoryBytes == 0)
                d.totalMemoryBytes = static_cast<int64_t>(m.total);
        }
    }
};

bool driverLibraryPresent() {
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library)
        return false;
    dlclose(library);
    return true;
}

}  // namespace

std::string formatCudaVersion(int version) {
    return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

int fp32LanesPerSm(int major, int minor) {
    if (major == 7)
        return 64;  // Volta, Turing
    if (major == 8)
        return minor == 0 ? 64 : 128;  // A100: 64; GA10x, Ada: 128
    if (major >= 9)
        return 128;  // Hopper, Blackwell
    return 0;
}

GpuInventory detectGpus() {
    GpuInventory inventory;
    Nvml nvml;
    inventory.nvmlLoaded = nvml.load();
    if (inventory.nvmlLoaded && nvml.driverVersion) {
        char text[80] = {};
        if (nvml.driverVersion(text, sizeof text) == 0)
            inventory.driverVersion = text;
    }

#if TANDEM_HAVE_CUDA
    cudaRuntimeGetVersion(&inventory.runtimeCudaVersion);
    if (!driverLibraryPresent()) {
        inventory.unavailableReason = "no NVIDIA driver found (libcuda.so.1 is not installed)";
        return inventory;
    }
    cudaDriverGetVersion(&inventory.driverCudaVersion);
    if (inventory.driverCudaVersion < inventory.runtimeCudaVersion) {
        inventory.unavailableReason =
            "CUDA driver too old: it supports CUDA " +
            formatCudaVersion(inventory.driverCudaVersion) + ", this build needs CUDA " +
            formatCudaVersion(inventory.runtimeCudaVersion) + "; update the NVIDIA driver";
        return inventory;
    }
    if (!cuda_device::cublas_dl::loadError().empty()) {
        inventory.unavailableReason = cuda_device::cublas_dl::loadError();
        return inventory;
    }
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        inventory.unavailableReason =
            std::string("the CUDA runtime found no usable GPU: ") + cudaGetErrorString(status);
        (void)cudaGetLastError();
        return inventory;
    }
    for (int i = 0; i < count; ++i) {
        GpuDevice d;
        d.index = i;
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
            d.name = prop.name;
            d.totalMemoryBytes = static_cast<int64_t>(prop.totalGlobalMem);
        }
        cudaDeviceGetAttribute(&d.smCount, cudaDevAttrMultiProcessorCount, i);
        cudaDeviceGetAttribute(&d.computeMajor, cudaDevAttrComputeCapabilityMajor, i);
        cudaDeviceGetAttribute(&d.computeMinor, cudaDevAttrComputeCapabilityMinor, i);
        cudaDeviceGetAttribute(&d.clockKhz, cudaDevAttrClockRate, i);
        char bus[32] = {};
        if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess)
            d.pciBusId = bus;
        // Free memory comes from NVML: cudaMemGetInfo would create a CUDA context (hundreds of
        // MiB) on every GPU of the machine just to list them.
        (void)cudaGetLastError();
        d.peakFp32Flops =
            2.0 * d.smCount * fp32LanesPerSm(d.computeMajor, d.computeMinor) * d.clockKhz * 1e3;
        d.supported = d.computeMajor > kMinComputeMajor ||
                      (d.computeMajor == kMinComputeMajor && d.computeMinor >= kMinComputeMinor);
        if (inventory.nvmlLoaded)
            nvml.fill(d, i);
        inventory.devices.push_back(d);
    }
    bool anySupported = false;
    for (const auto& d : inventory.devices)
        anySupported = anySupported || d.supported;
    if (inventory.devices.empty()) {
        inventory.unavailableReason = "the NVIDIA driver reports no GPU";
    } else if (!anySupported) {
        const auto& d = inventory.devices.front();
        inventory.unavailableReason =
            d.name + " has compute capability " + std::to_string(d.computeMajor) + "." +
            std::to_string(d.computeMinor) + "; Tandem needs 7.5 or newer";
    }
#else
    // Without nvcc there is no CUDA backend; NVML may still list the GPUs for the inventory.
    if (inventory.nvmlLoaded) {
        unsigned count = 0;
        if (nvml.count(&count) == 0) {
            for (unsigned i = 0; i < count; ++i) {
                GpuDevice d;
                d.index = static_cast<int>(i);
                d.supported = false;
                nvml.fill(d, static_cast<int>(i));
                inventory.devices.push_back(d);
            }
        }
    }
    inventory.unavailableReason =
        driverLibraryPresent() ? "this build of Tandem has no CUDA backend (built without nvcc)"
                               : "no NVIDIA driver found, and this build of Tandem has no "
                                 "CUDA backend (built without nvcc)";
#endif
    return inventory;
}

}  // namespace tandem
