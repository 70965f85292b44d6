// The CUDA backends: a GptBackend over the CUDA op set, on a GPU ("cuda:N", builds with nvcc) or
// on the CPU through the CUDA emulation ("cuda-emulated", every build). Plain C++: no CUDA header.
#pragma once

#include "backend.hpp"
#include "expected.hpp"
#include "ops.hpp"

#include <memory>
#include <string>
#include <string_view>

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

// Any backend by name: "cpu", "cpu-openblas" and "cpu-reference" (makeCpuBackend with `threads`),
// "cuda" (GPU 0) or "cuda:N", and "cuda-emulated".
Expected<std::unique_ptr<Backend>> makeBackendByName(std::string_view name, int threads);

// Model FLOPs of one training step (forward + backward) per token at sequence length T:
// 6 N, N = parameters without the position embeddings (the tied output layer counts through
// wte), plus 12 L C T for q.k^T and att.v (the causal mask is not subtracted, as usual).
double trainingFlopsPerToken(const ModelConfig& config, int T);

// Peak fp32 FLOP/s of the GPU behind a backend name ("cuda", "cuda:N"); 0 when unknown (CPU,
// emulation, no GPU). The denominator of model FLOPs utilisation.
double peakFlopsForBackend(std::string_view name);
// "NVIDIA H100 80GB HBM3, 132 SMs, compute 9.0, 51.2 TFLOP/s fp32" for a CUDA backend name;
// empty otherwise.
std::string describeBackendDevice(std::string_view name);

}  // namespace tandem
