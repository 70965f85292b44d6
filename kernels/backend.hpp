// The Backend interface (DESIGN.md §7): what a work unit needs from a compute device.
//
// Dimensions: B batch, T sequence (<= config.maxSeqLen), P parameter count.
#pragma once

#include "expected.hpp"
#include "model.hpp"
#include "ops.hpp"
#include "optimizer.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace tandem {

struct MemoryEstimate {
    int64_t parameterBytes = 0;   // weights and gradients
    int64_t optimizerBytes = 0;   // AdamW moments
    int64_t activationBytes = 0;  // activations, their gradients and scratch for B x T
    int64_t total() const { return parameterBytes + optimizerBytes + activationBytes; }
};

struct StepStats {
    float gradNorm = 0;  // global norm before clipping
    float lr = 0;
};

// AdamW moments and the number of updates made with them.
struct OptimizerState {
    std::vector<float> m;  // (P)
    std::vector<float> v;  // (P)
    int64_t step = 0;
};

class Backend {
  public:
    virtual ~Backend() = default;

    virtual std::string name() const = 0;  // "cpu", "cpu-reference", "cuda:0"
    virtual MemoryEstimate estimateMemory(const ModelConfig& config, int B, int T) const = 0;
    // Whether a work unit of this shape fits; the error gives the estimate and what is free.
    virtual Status canRun(const ModelConfig& config, int B, int T) const = 0;

    // Plans and allocates all memory for batches up to B x T. Parameters and moments start at 0.
    virtual Status allocate(const ModelConfig& config, int B, int T) = 0;

    virtual Status loadParameters(std::span<const float> parameters) = 0;   // (P)
    virtual Status storeParameters(std::span<float> parameters) const = 0;  // (P)
    virtual Status storeGradients(std::span<float> gradients) const = 0;    // (P)
    virtual Status loadOptimizerState(const OptimizerState& state) = 0;
    virtual Expected<OptimizerState> storeOptimizerState() const = 0;

    // Mean cross-entropy loss over b x t positions. inputs and targets hold b*t bytes' tokens;
    // b <= B, t <= T of allocate().
    virtual Expected<float> forward(std::span<const int32_t> inputs,
                                    std::span<const int32_t> targets, int b, int t) = 0;
    // The next-token probabilities (V) at position `position` of row `row` of the last forward.
    virtual Status storeProbabilities(int row, int position, std::span<float> out) const = 0;
    // Gradients of the last forward's loss (they replace earlier gradients).
    virtual Status backward() = 0;
    // Clips the global gradient norm, then one AdamW update at the given learning rate.
    virtual Expected<StepStats> adamwStep(const AdamWConfig& config, float lr) = 0;

    // out (P) = fp16(start - current parameters). A NaN or Inf anywhere is an error and out is
    // not to be used.
    virtual Expected<EncodeStats> encodePseudoGradient(std::span<const float> start,
                                                       std::span<uint16_t> out) = 0;
};

// Bytes of RAM the kernel says can be allocated without swapping: MemAvailable from
// /proc/meminfo, else free pages from sysconf; INT64_MAX when unknown.
int64_t availableHostBytes();

// "cpu" (fast, threads >= 1) or "cpu-reference". CUDA backends come from kernels/cuda.
Expected<std::unique_ptr<Backend>> makeCpuBackend(std::string_view name, int threads);

}  // namespace tandem
