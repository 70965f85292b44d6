// GPU detection for the hardware inventory, the wizard and the temperature rule: the CUDA runtime
// for what a device is (name, memory, SMs, compute capability, versions), NVML loaded at run time
// (dlopen libnvidia-ml.so.1) for how it is doing (utilisation, temperature, power). Plain structs;
// no CUDA header, so any code may include this. Never fails: when no GPU is usable, the reason
// says why ("no NVIDIA driver found", "CUDA driver too old", ...) and the CPU is used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

struct GpuDevice {
    int index = 0;  // CUDA device ordinal
    std::string name;
    std::string pciBusId;  // "0000:01:00.0"
    int64_t totalMemoryBytes = 0;
    int64_t freeMemoryBytes = 0;  // from NVML; 0 when unknown (the backend asks CUDA itself)
    int smCount = 0;
    int computeMajor = 0, computeMinor = 0;
    int clockKhz = 0;
    // Peak fp32 FLOP/s without tensor cores (what the fp32 kernels can reach), from SMs, clock
    // and FP32 lanes per SM; 0 when unknown. The denominator of model FLOPs utilisation.
    double peakFp32Flops = 0;
    bool supported = true;  // compute capability >= 7.5 (what this build targets)
    // From NVML; -1 when NVML is missing or the device does not report it.
    int utilizationPercent = -1;
    int temperatureC = -1;
    double powerW = -1;
    double powerLimitW = -1;
};

struct GpuInventory {
    std::vector<GpuDevice> devices;  // usable or not; see GpuDevice::supported
    int driverCudaVersion = 0;       // newest CUDA the driver supports (12040 = 12.4); 0 if none
    int runtimeCudaVersion = 0;      // CUDA runtime this build was made with; 0 if built without
    std::string driverVersion;       // e.g. "550.54.14" (NVML); empty when unknown
    bool nvmlLoaded = false;
    // Empty when at least one device can run the CUDA backend; else why the CPU is used.
    std::string unavailableReason;

    bool usable() const { return unavailableReason.empty(); }
};

GpuInventory detectGpus();

// 12040 -> "12.4"
std::string formatCudaVersion(int version);

// FP32 lanes per SM for a compute capability (64 or 128); 0 when unknown.
int fp32LanesPerSm(int major, int minor);

}  // namespace tandem
