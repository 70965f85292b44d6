// What the emulation's .cpp files share; private to kernels/cuda/emulation/.
#pragma once

#include "cuda_emulation.hpp"

namespace tandem::emu {

// Keeps the first error for cudaGetLastError / cudaPeekAtLastError (emulated_runtime.cpp);
// launches (cuda_emulation.cpp) report theirs through it.
void recordError(cudaError_t error);

// OS threads for parallel work: the block pool's default size (cuda_emulation.cpp), also the
// split of a large emulated GEMM (emulated_cublas.cpp).
int defaultWorkers();

}  // namespace tandem::emu
