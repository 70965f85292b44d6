// How fast this device trains the run's model: a short timed run of whole inner steps (forward,
// backward, AdamW) at a work unit's B x T on random tokens, as the worker would train them. The
// desktop app's cost estimate (cost_estimate.hpp) starts from it; the coordinator sizes units
// from the same kind of figure, which the worker reports from its real steps.
//
// Dimensions: B batch, T sequence, P parameters.
#pragma once

#include "backend.hpp"
#include "expected.hpp"
#include "model_config.hpp"

#include <cstdint>

namespace tandem::core {

struct SpeedTestResult {
    double tokensPerSecond = 0;  // of the timed steps
    double setupSeconds = 0;     // allocating and loading the weights: paid again per unit
    int timedSteps = 0;
    double timedSeconds = 0;
};

struct SpeedTestOptions {
    double minSeconds = 2;  // time steps until this much has passed (at least one step)
    int maxSteps = 20;
    uint64_t seed = 1;
};

// Allocates `backend` for B x T (its canRun error when the unit does not fit), loads initial
// weights, trains one untimed warm-up step, then timed steps.
Expected<SpeedTestResult> measureTrainingSpeed(Backend& backend, const ModelConfig& model, int B,
                                               int T, const SpeedTestOptions& options = {});

}  // namespace tandem::core
