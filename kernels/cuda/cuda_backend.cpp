// The CUDA backend factories: GptBackend over the device or the emulated CUDA op set.
#include "cuda_backend.hpp"

#include "cuda_ops_internal.hpp"
#include "devices.hpp"
#include "gpt_backend.hpp"

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

}  // namespace tandem
