// What the .cu sources of this folder include instead of the CUDA headers: the real runtime and
// cuBLAS under nvcc, the emulation (emulation/cuda_emulation.hpp) when TANDEM_CUDA_EMULATION is
// set, plus the launch helper that stands in for <<<grid, block, 0, stream>>> in both.
//
// TANDEM_CUDA_NS names the namespace the sources compile into (cuda_device or cuda_emulated), so
// a program can link both builds of the same source.
#pragma once

#if TANDEM_CUDA_EMULATION
#include "emulation/cuda_emulation.hpp"
#define TANDEM_CUDA_NS cuda_emulated
#define TANDEM_CUDA_USING_RUNTIME using namespace ::tandem::emu;
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cublas_loader.hpp"  // cuBLAS through dlopen: programs start without it
#define TANDEM_CUDA_NS cuda_device
#define TANDEM_CUDA_USING_RUNTIME
#endif

namespace tandem::TANDEM_CUDA_NS {
TANDEM_CUDA_USING_RUNTIME

// launchKernel(kernel, grid, block, stream, args...) == kernel<<<grid, block, 0, stream>>>(args...)
template <class... Params, class... Args>
void launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                  Args... args) {
#if TANDEM_CUDA_EMULATION
    ::tandem::emu::launch(grid, block, stream, [&] { kernel(static_cast<Params>(args)...); });
#else
    // clang-format off
    kernel<<<grid, block, 0, stream>>>(static_cast<Params>(args)...);
    // clang-format on
#endif
}

}  // namespace tandem::TANDEM_CUDA_NS
