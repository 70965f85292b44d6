#include "device_choice.hpp"

#include "cuda/cuda_backend.hpp"
#include "rules.hpp"

#include <algorithm>
#include <thread>

namespace tandem::app {

namespace {

// "auto" and "cuda" mean GPU 0; nullopt for anything but auto, cuda or cuda:N.
std::optional<int> requestedGpu(const std::string& wanted) {
    if (wanted == "auto" || wanted == "cuda")
        return 0;
    if (wanted.rfind("cuda:", 0) != 0)
        return std::nullopt;
    const std::string digits = wanted.substr(5);
    if (digits.empty() || digits.size() > 4 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    const int index = std::stoi(digits);
    if (index > 1024)
        return std::nullopt;
    return index;
}

// Why GPU `index` cannot be used; empty when it can.
std::string whyNotGpu(int index, const DeviceFacts& facts, const GpuDevice*& gpu) {
    gpu = nullptr;
    for (const auto& d : facts.gpus.devices)
        if (d.index == index)
            gpu = &d;
    if (!facts.cudaBuilt)
        return "this build has no CUDA backend";
    if (!facts.gpus.usable())
        return facts.gpus.unavailableReason;
    if (!gpu)
        return "there is no CUDA device " + std::to_string(index) + " (found " +
               std::to_string(facts.gpus.devices.size()) + ")";
    if (!gpu->supported)
        return gpu->name + " has compute capability " + std::to_string(gpu->computeMajor) + "." +
               std::to_string(gpu->computeMinor) + "; this build needs 7.5 or newer";
    return {};
}

}  // namespace

Expected<DeviceChoice, DeviceError> decideDevice(const std::string& wanted, int cpuThreads,
                                                 UnavailableDevice policy,
                                                 const DeviceFacts& facts) {
    DeviceChoice out;
    if (wanted != "cpu") {
        const auto index = requestedGpu(wanted);
        if (!index) {
            if (policy == UnavailableDevice::Fail)
                return DeviceError{DeviceError::Kind::BadValue,
                                   "--device expects auto, cpu or cuda:N, found '" + wanted + "'"};
            out.cpuReason = "the device '" + wanted + "' is not auto, cpu or cuda:N";
        } else {
            const GpuDevice* gpu = nullptr;
            const std::string why = whyNotGpu(*index, facts, gpu);
            if (why.empty()) {
                out.device = "cuda:" + std::to_string(*index);
                out.gpuIndex = *index;
                out.description = out.device + " " + gpu->name;
                out.memoryBytes = gpu->totalMemoryBytes;
            } else if (wanted != "auto" && policy == UnavailableDevice::Fail) {
                return DeviceError{DeviceError::Kind::Unavailable,
                                   "cannot use " + wanted + ": " + why};
            } else {
                out.cpuReason = why;
            }
        }
    }
    if (out.device.empty()) {
        out.device = "cpu";
        out.description = "cpu";
        if (facts.cpu) {
            out.description =
                "cpu " + facts.cpu->cpuModel + " (" + std::to_string(cpuThreads) + " threads)";
            out.memoryBytes = facts.cpu->memoryAvailableBytes;
        }
    }
    if (facts.cpu)
        out.hardwareSummary = facts.cpu->cpuModel + ", " + std::to_string(facts.cpu->logicalCores) +
                              " threads, " + core::formatBytes(facts.cpu->memoryTotalBytes) +
                              " RAM, " + facts.cpu->osName;
    if (out.gpuIndex >= 0)
        out.hardwareSummary = out.description + "; " + out.hardwareSummary;
    return out;
}

Expected<DeviceChoice, DeviceError> chooseDevice(const std::string& wanted, int cpuThreads,
                                                 UnavailableDevice policy) {
    DeviceFacts facts;
    if (wanted != "cpu") {
        facts.cudaBuilt = cudaBackendBuilt();
        facts.gpus = detectGpus();
    }
    if (auto inventory = core::PlatformProbe().inventory())
        facts.cpu = *inventory;
    return decideDevice(wanted, cpuThreads, policy, facts);
}

int defaultTrainingThreads() {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace tandem::app
