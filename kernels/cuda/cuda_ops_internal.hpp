// The entry points of the two builds of cuda_ops.cu (nvcc: cuda_device, emulation:
// cuda_emulated). Plain C++: no CUDA header, so the CPU-only build may include it.
#pragma once

#include "expected.hpp"
#include "ops.hpp"

#include <cstdint>
#include <memory>

namespace tandem {

namespace cuda_emulated {
// The CUDA ops on the emulated device, named "cuda-emulated".
Expected<std::unique_ptr<Ops>> createCudaOps(int device);
// Free emulated device memory minus the headroom kept for cuBLAS and fragmentation.
int64_t availableDeviceBytes(int device);
}  // namespace cuda_emulated

namespace cuda_device {
// The CUDA ops on GPU `device`, named "cuda:<device>". Only in builds with nvcc.
Expected<std::unique_ptr<Ops>> createCudaOps(int device);
int64_t availableDeviceBytes(int device);
}  // namespace cuda_device

}  // namespace tandem
