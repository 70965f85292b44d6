// The CUDA backends: a GptBackend over the CUDA op set, on a GPU ("cuda:N", builds with nvcc) or
// on the CPU through the CUDA emulation ("cuda-emulated", every build). Plain C++: no CUDA header.
#pragma once

#include "backend.hpp"
#include "expected.hpp"
#include "ops.hpp"

#include <memory>

namespace tandem {

// True when this build compiled the CUDA sources with nvcc (TANDEM_HAVE_CUDA).
bool cudaBackendBuilt();

// The CUDA op set on GPU `device`. Fails with the reason when the build has no CUDA, there is no
// driver or no such device.
Expected<std::unique_ptr<Ops>> makeCudaOps(int device);
// GptBackend "cuda:<device>"; canRun compares the estimate with free GPU memory.
Expected<std::unique_ptr<Backend>> makeCudaBackend(int device);

// The same kernels on the emulated device (tandem::emu); named "cuda-emulated". Emulated device
// memory is limited by tandem::emu::setDeviceMemoryCapacity (4 GiB unless set).
Expected<std::unique_ptr<Ops>> makeEmulatedCudaOps();
Expected<std::unique_ptr<Backend>> makeEmulatedCudaBackend();

}  // namespace tandem
