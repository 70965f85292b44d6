// Which device the engine trains on, for tandem-worker and the desktop app alike: "auto" (a usable
// NVIDIA GPU, else the CPU, saying why), "cpu", "cuda:N" (or "cuda" for cuda:0). decideDevice is
// the rule on given facts (tests/app/test_device_choice.cpp); chooseDevice gathers the facts of
// this machine (the GPUs only when a GPU may be used) and applies it.
#pragma once

#include "cuda/devices.hpp"
#include "expected.hpp"
#include "platform_probe.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace tandem::app {

// What the machine offers.
struct DeviceFacts {
    bool cudaBuilt = false;  // this build has the CUDA backend
    GpuInventory gpus;
    std::optional<core::HardwareInventory> cpu;  // none when it cannot be read
};

// A GPU that was asked for by name (cuda:N) but cannot be used.
enum class UnavailableDevice {
    Fail,          // tandem-worker: an error (exit code 3)
    FallBackToCpu  // the desktop app: train on the CPU and say why
};

struct DeviceChoice {
    std::string device;           // "cpu", "cuda:0"
    int gpuIndex = -1;            // the CUDA ordinal; -1 for the CPU
    std::string description;      // "cuda:0 NVIDIA ...", "cpu AMD Ryzen ... (16 threads)", "cpu"
    int64_t memoryBytes = 0;      // the GPU's total, or the RAM available now; 0 when unknown
    std::string hardwareSummary;  // "[cuda:0 NAME; ]CPU model, N threads, X RAM, OS"
    std::string cpuReason;        // why the CPU is used although a GPU was allowed; else empty
};

struct DeviceError {
    enum class Kind { BadValue, Unavailable } kind = Kind::BadValue;
    std::string message;  // "--device expects auto, cpu or cuda:N, found 'x'", "cannot use ..."
};

Expected<DeviceChoice, DeviceError> decideDevice(const std::string& wanted, int cpuThreads,
                                                 UnavailableDevice policy,
                                                 const DeviceFacts& facts);

// The CPU threads the engine trains with unless told otherwise: every hardware thread, at least
// one. The speed test of the desktop app measures with the same number.
int defaultTrainingThreads();

// decideDevice on this machine's facts.
Expected<DeviceChoice, DeviceError> chooseDevice(const std::string& wanted, int cpuThreads,
                                                 UnavailableDevice policy);

}  // namespace tandem::app
