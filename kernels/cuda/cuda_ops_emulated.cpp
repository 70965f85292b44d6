// The CUDA op set compiled by g++ through the emulation (namespace tandem::cuda_emulated): the
// same source as the GPU build, run on the CPU in every test run.
#define TANDEM_CUDA_EMULATION 1
#include "cuda_ops.cu"
