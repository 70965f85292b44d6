#include "memory_estimate.hpp"

#include "gpt_backend.hpp"

#include <algorithm>
#include <cstdio>

namespace tandem {

UnitMemoryEstimate estimateUnitMemory(const ModelConfig& config, int B, int T) {
    const int64_t P = config.parameterCount();
    const int64_t f = sizeof(float);
    UnitMemoryEstimate e;
    e.parameterBytes = P * f;
    e.gradientBytes = P * f;
    e.optimizerBytes = 2 * P * f;
    // GptBackend::allocate: the activations and their gradients' plans, inputs and targets as
    // int32, and the host staging of the losses.
    const int64_t BT = int64_t{B} * T;
    e.activationBytes = (GptBackend::planActivations(config, B, T).total +
                         GptBackend::planGradients(config, B, T).total) *
                            f +
                        2 * BT * int64_t{sizeof(int32_t)} + BT * f;
    // The worker keeps the start weights (P) all through the unit. On top of them, at their
    // peaks: a checkpoint (UnitRunner::checkpoint, ResultWriter's moments for the next unit)
    // holds parameters and moments (3P) and serialiseCheckpoint's file image of them (3P); the
    // result holds the fp16 payload and the request body built from it (2 x P/2) while the
    // moments are saved. Loading a checkpoint (file image and parsed copy) stays below that.
    const int64_t checkpointPeak = 6 * P * f;
    const int64_t resultPeak = 2 * P * int64_t{sizeof(uint16_t)} + checkpointPeak;
    e.workerHostBytes = P * f + std::max(checkpointPeak, resultPeak);
    return e;
}

Status checkUnitFits(const ModelConfig& config, int B, int T, bool hostBackend,
                     int64_t availableBytes, const std::string& where) {
    const UnitMemoryEstimate e = estimateUnitMemory(config, B, T);
    const int64_t need = hostBackend ? e.sharedTotalBytes() : e.workerHostBytes;
    if (need <= availableBytes)
        return {};
    const std::string what = hostBackend ? "" : " of RAM beside the GPU's memory";
    return makeError("a work unit of " + config.describe() + " at batch " + std::to_string(B) +
                     " x " + std::to_string(T) + " needs " + formatMemory(need) + what + ", but " +
                     where + " has " + formatMemory(availableBytes) + " available");
}

std::string formatMemory(int64_t bytes) {
    char text[64];
    const double b = static_cast<double>(bytes);
    if (b >= 1024.0 * 1024.0 * 1024.0)
        std::snprintf(text, sizeof text, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
    else
        std::snprintf(text, sizeof text, "%.1f MiB", b / (1024.0 * 1024.0));
    return text;
}

}  // namespace tandem
