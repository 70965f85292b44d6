// How much memory a work unit needs: the one estimate that the worker checks before it trains,
// the coordinator checks before it assigns a unit, and the desktop app's wizard shows. Counted
// from the buffers that really exist: GptBackend's (parameters, gradients, AdamW moments, the
// activation plan and its gradients, token ids) and the worker's copies on the host (the unit's
// start weights, kept for the pseudo-gradient; a checkpoint's parameters and moments and its
// serialised file image; the fp16 result).
//
// Dimensions: P parameters (padded vocabulary included), B batch, T sequence.
#pragma once

#include "model_config.hpp"

#include <cstdint>
#include <string>

namespace tandem {

struct UnitMemoryEstimate {
    int64_t parameterBytes = 0;   // weights, P fp32
    int64_t gradientBytes = 0;    // P fp32
    int64_t optimizerBytes = 0;   // AdamW m and v, 2P fp32
    int64_t activationBytes = 0;  // activations and their gradients for B x T, token ids
    int64_t workerHostBytes = 0;  // the worker's host copies at their peak (see above)

    // What the backend allocates in its own memory (RAM for cpu, GPU memory for cuda).
    int64_t backendBytes() const {
        return parameterBytes + gradientBytes + optimizerBytes + activationBytes;
    }
    // What the unit needs in all when backend and worker share one memory (the CPU backends).
    int64_t sharedTotalBytes() const { return backendBytes() + workerHostBytes; }
};

// The estimate for a unit of `config` at batch B x T (T <= config.maxSeqLen).
UnitMemoryEstimate estimateUnitMemory(const ModelConfig& config, int B, int T);

// Whether a unit fits `availableBytes` of one memory, for a backend that shares it with the
// worker (hostBackend: cpu) or not (cuda: only workerHostBytes must fit in RAM, the rest is
// checked against the GPU by Backend::canRun). The error names the needed and available bytes.
Status checkUnitFits(const ModelConfig& config, int B, int T, bool hostBackend,
                     int64_t availableBytes, const std::string& where);

// "1.23 GiB", "456.0 MiB": for messages.
std::string formatMemory(int64_t bytes);

}  // namespace tandem
