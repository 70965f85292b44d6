// Exact quantized weight deltas (issue 15): the coordinator makes the quantized outer update
// canonical. With u = target - old (the outer step's move) and e the residual carried from the
// previous round,
//   x = u + e,   q = Q(x),   next = old + deq(q),   e' = x - deq(q)
// so workers that hold `old` download q alone and rebuild `next` bit for bit with
// applyWeightDelta, the same elementwise code the coordinator ran (one multiply, then one add,
// compiled with -ffp-contract=off and for each CPU variant alike). The residual keeps the sum of
// applied updates equal to the sum of true updates minus the last e' (error feedback).
// Q is int8 with one fp32 absmax scale per block (codec_int8.hpp) or fp16 (codec.hpp).
//
// Dimensions: P parameters, S block size, NB = ceil(P / S) blocks.
#pragma once

#include "codec_int8.hpp"  // kInt8DefaultBlock
#include "expected.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tandem {

class ThreadPool;

// How a run's versions move (chosen at its creation, `--weight-deltas`): Off is the plain outer
// step (next = target; no deltas published).
enum class WeightDeltaCodec { Off, Fp16, Int8 };

const char* weightDeltaCodecName(WeightDeltaCodec codec);  // "off", "fp16", "int8"
std::optional<WeightDeltaCodec> parseWeightDeltaCodec(std::string_view text);

// q: the quantized update of one version to the next.
struct QuantizedDelta {
    WeightDeltaCodec codec = WeightDeltaCodec::Int8;
    int blockSize = kInt8DefaultBlock;  // int8 only
    std::vector<int8_t> values;         // (P) int8
    std::vector<float> scales;          // (NB) int8
    std::vector<uint16_t> halves;       // (P) fp16

    int64_t parameterCount() const;
    int64_t payloadBytes() const;  // P + 4 NB (int8) or 2 P (fp16)
};

// The instruction set a loop runs with: Auto picks the best this CPU has (as target_clones do
// elsewhere in kernels/); tests ask for each variant the build has.
enum class CpuVariant { Auto, Baseline, Avx2 };
bool cpuVariantAvailable(CpuVariant variant);

// The coordinator's step. old (P): the version's weights; next (P): in, the outer step's target
// old + u; out, old + deq(q). residual (P): in e, out e' = (u + e) - deq(q). Non-finite u + e
// is an error (nothing changed). codec must not be Off.
Expected<QuantizedDelta> quantizeWithFeedback(std::span<const float> old, std::span<float> next,
                                              std::span<float> residual, WeightDeltaCodec codec,
                                              ThreadPool* pool = nullptr,
                                              CpuVariant variant = CpuVariant::Auto);

// The worker's rebuild (and the coordinator's own): weights (P) += deq(q), element by element,
// deq = float(value) * scale or halfToFloat(half). Fails when q does not fit P or its block size.
Status applyWeightDelta(std::span<float> weights, const QuantizedDelta& q,
                        ThreadPool* pool = nullptr, CpuVariant variant = CpuVariant::Auto);

}  // namespace tandem
