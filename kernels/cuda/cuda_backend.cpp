// The CUDA backend factories: GptBackend over the device or the emulated CUDA op set.
#include "cuda_backend.hpp"

#include "cuda_ops_internal.hpp"
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
