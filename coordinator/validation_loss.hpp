// The validation loss: how well a version's weights predict held-out text, measured on the CPU
// backend after every round close. The queue and the validator thread that record it are
// Coordinator::Impl in validation_loss.cpp.
//
// Dimensions: P parameters, B batch, T sequence (the model's maxSeqLen).
#pragma once

#include "model.hpp"
#include "token_shard.hpp"

#include <cstdint>
#include <span>

namespace tandem::coord {

// The mean cross-entropy of weights (P) over batches x batch windows of T + 1 bytes of text,
// fixed and evenly spaced from its start to its end, so every round is measured on the same
// text; threads: the CPU backend's.
Expected<double> validationLoss(const ModelConfig& model, std::span<const float> weights,
                                std::span<const uint8_t> text, int batches, int batch, int threads);
// The same over token pieces (the validation shards of a token run), laid end to end: the
// windows are spaced evenly over all of them and none crosses a piece's end.
Expected<double> validationLoss(const ModelConfig& model, std::span<const float> weights,
                                std::span<const TokenView> pieces, int batches, int batch,
                                int threads);

}  // namespace tandem::coord
