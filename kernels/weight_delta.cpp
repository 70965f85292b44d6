// Exact quantized weight deltas: the coordinator's quantize-with-feedback and the one
// elementwise apply that it and every worker run. Built with -ffp-contract=off
// (CMakeLists.txt): deq = float(q) * scale is rounded, then added, so no build fuses the two
// into an FMA. The loops are compiled twice, for baseline x86-64 and for AVX2 (the variants the
// project's target_clones pick from), and both copies do the same IEEE operations in the same
// order, so every machine rebuilds the same bits (tests/kernels/test_weight_delta.cpp).
//
// Dimensions: P parameters, S block size, NB = ceil(P / S) blocks, n elements of a piece.
#include "weight_delta.hpp"

#include "codec.hpp"
#include "codec_pieces.hpp"
#include "thread_pool.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TANDEM_HAS_AVX2_VARIANT 1
#define TANDEM_AVX2 __attribute__((target("avx2")))
#else
#define TANDEM_HAS_AVX2_VARIANT 0
#define TANDEM_AVX2
#endif

namespace tandem {
namespace {

constexpr int64_t kMinChunk = 1 << 16;

// The canonical element step, shared by every variant and caller: d = deq(q_i);
// out = base + d; with a residual (holding x = u + e), residual = x - d.
// out (n), base (n), residual (n or null), values (n), scales: per block of S from element 0.
[[gnu::always_inline]] inline void int8Loop(float* out, const float* base, float* residual,
                                            const int8_t* values, const float* scales,
                                            int blockSize, int64_t firstBlock, int64_t endBlock,
                                            int64_t P) {
    for (int64_t b = firstBlock; b < endBlock; ++b) {
        const float s = scales[b];
        const int64_t lo = b * blockSize, hi = std::min(P, lo + blockSize);
        if (residual == nullptr) {
            for (int64_t i = lo; i < hi; ++i) {
                const float d = static_cast<float>(values[i]) * s;
                out[i] = base[i] + d;
            }
        } else {
            for (int64_t i = lo; i < hi; ++i) {
                const float d = static_cast<float>(values[i]) * s;
                out[i] = base[i] + d;
                residual[i] = residual[i] - d;
            }
        }
    }
}

// out (n), base (n), residual (n or null), halves (n); elements [lo, hi).
[[gnu::always_inline]] inline void fp16Loop(float* out, const float* base, float* residual,
                                            const uint16_t* halves, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
        const float d = halfToFloat(halves[i]);
        out[i] = base[i] + d;
        if (residual != nullptr)
            residual[i] = residual[i] - d;
    }
}

void int8Baseline(float* out, const float* base, float* residual, const int8_t* values,
                  const float* scales, int blockSize, int64_t firstBlock, int64_t endBlock,
                  int64_t P) {
    int8Loop(out, base, residual, values, scales, blockSize, firstBlock, endBlock, P);
}
TANDEM_AVX2 void int8Avx2(float* out, const float* base, float* residual, const int8_t* values,
                          const float* scales, int blockSize, int64_t firstBlock, int64_t endBlock,
                          int64_t P) {
    int8Loop(out, base, residual, values, scales, blockSize, firstBlock, endBlock, P);
}
void fp16Baseline(float* out, const float* base, float* residual, const uint16_t* halves,
                  int64_t lo, int64_t hi) {
    fp16Loop(out, base, residual, halves, lo, hi);
}
TANDEM_AVX2 void fp16Avx2(float* out, const float* base, float* residual, const uint16_t* halves,
                          int64_t lo, int64_t hi) {
    fp16Loop(out, base, residual, halves, lo, hi);
}

bool useAvx2(CpuVariant variant) {
    return variant == CpuVariant::Avx2 ||
           (variant == CpuVariant::Auto && cpuVariantAvailable(CpuVariant::Avx2));
}

Status checkFits(int64_t P, const QuantizedDelta& q) {
    if (q.codec == WeightDeltaCodec::Int8) {
        if (q.blockSize < 1)
            return makeError("weight delta: block size " + std::to_string(q.blockSize) +
                             "; expected at least 1");
        if (static_cast<int64_t>(q.values.size()) != P ||
            static_cast<int64_t>(q.scales.size()) != int8BlockCount(P, q.blockSize))
            return makeError("weight delta: " + std::to_string(q.values.size()) + " values and " +
                             std::to_string(q.scales.size()) + " scales for " + std::to_string(P) +
                             " parameters; expected " + std::to_string(P) + " values and " +
                             std::to_string(int8BlockCount(P, q.blockSize)) + " scales");
        return {};
    }
    if (q.codec == WeightDeltaCodec::Fp16) {
        if (static_cast<int64_t>(q.halves.size()) != P)
            return makeError("weight delta: " + std::to_string(q.halves.size()) +
                             " fp16 values for " + std::to_string(P) + " parameters");
        return {};
    }
    return makeError("weight delta: no codec (off)");
}

// out (P) = base (P) + deq(q); residual (P or empty) -= deq(q).
void applyAll(std::span<float> out, std::span<const float> base, std::span<float> residual,
              const QuantizedDelta& q, ThreadPool* pool, CpuVariant variant) {
    const int64_t P = static_cast<int64_t>(out.size());
    const bool avx2 = useAvx2(variant);
    float* r = residual.empty() ? nullptr : residual.data();
    if (q.codec == WeightDeltaCodec::Int8) {
        const int64_t blocks = int8BlockCount(P, q.blockSize);
        detail::forPieces(pool, blocks, std::max<int64_t>(1, kMinChunk / q.blockSize), 1 << 30,
                          [&](int, int64_t first, int64_t stop) {
                              (avx2 ? int8Avx2 : int8Baseline)(out.data(), base.data(), r,
                                                               q.values.data(), q.scales.data(),
                                                               q.blockSize, first, stop, P);
                          });
    } else {
        detail::forPieces(pool, P, kMinChunk, 1 << 30, [&](int, int64_t lo, int64_t hi) {
            (avx2 ? fp16Avx2 : fp16Baseline)(out.data(), base.data(), r, q.halves.data(), lo, hi);
        });
    }
}

}  // namespace

const char* weightDeltaCodecName(WeightDeltaCodec codec) {
    switch (codec) {
        case WeightDeltaCodec::Off:
            return "off";
        case WeightDeltaCodec::Fp16:
            return "fp16";
        case WeightDeltaCodec::Int8:
            return "int8";
    }
    return "off";
}

std::optional<WeightDeltaCodec> parseWeightDeltaCodec(std::string_view text) {
    for (auto c : {WeightDeltaCodec::Off, WeightDeltaCodec::Fp16, WeightDeltaCodec::Int8})
        if (text == weightDeltaCodecName(c))
            return c;
    return std::nullopt;
}

int64_t QuantizedDelta::parameterCount() const {
    return static_cast<int64_t>(codec == WeightDeltaCodec::Fp16 ? halves.size() : values.size());
}

int64_t QuantizedDelta::payloadBytes() const {
    return codec == WeightDeltaCodec::Fp16 ? 2 * parameterCount()
                                           : int8EncodedBytes(parameterCount(), blockSize);
}

bool cpuVariantAvailable(CpuVariant variant) {
    if (variant != CpuVariant::Avx2)
        return true;
#if TANDEM_HAS_AVX2_VARIANT
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

Expected<QuantizedDelta> quantizeWithFeedback(std::span<const float> old, std::span<float> next,
                                              std::span<float> residual, WeightDeltaCodec codec,
                                              ThreadPool* pool, CpuVariant variant) {
    const int64_t P = static_cast<int64_t>(old.size());
    if (codec == WeightDeltaCodec::Off)
        return makeError("weight delta: no codec (off)");
    if (next.size() != old.size() || residual.size() != old.size())
        return makeError("weight delta: sizes differ (old " + std::to_string(old.size()) +
                         ", next " + std::to_string(next.size()) + ", residual " +
                         std::to_string(residual.size()) + ")");
    if (!cpuVariantAvailable(variant))
        return makeError("weight delta: this CPU has no AVX2");
    // x = (target - old) + e, into the residual; any non-finite x refuses the step.
    detail::PieceStats pieces[64];
    detail::forPieces(pool, P, kMinChunk, 64, [&](int piece, int64_t lo, int64_t hi) {
        detail::PieceStats s;
        for (int64_t i = lo; i < hi; ++i) {
            const float x = (next[i] - old[i]) + residual[i];
            residual[i] = x;
            if (!std::isfinite(x)) {
                if (s.firstNonFinite < 0)
                    s.firstNonFinite = i;
                ++s.nonFinite;
            }
        }
        pieces[piece] = s;
    });
    for (const auto& s : pieces)
        if (s.nonFinite > 0)
            return makeError("weight delta: the outer update has " + std::to_string(s.nonFinite) +
                             " non-finite value(s) (first at parameter " +
                             std::to_string(s.firstNonFinite) + "); the version cannot move");
    QuantizedDelta q;
    q.codec = codec;
    if (codec == WeightDeltaCodec::Int8) {
        constexpr int S = kInt8DefaultBlock;  // q.blockSize; the zeros below are sized for it
        const int64_t blocks = int8BlockCount(P, S);
        q.values.resize(static_cast<size_t>(P));
        q.scales.resize(static_cast<size_t>(blocks));
        // encodeDeltaInt8 encodes start - end: x - 0 is x, in chunks of whole blocks.
        const int64_t chunkBlocks = std::max<int64_t>(1, kMinChunk / S);
        static const std::vector<float> zeros(static_cast<size_t>(chunkBlocks * S), 0.0f);
        bool failed[64] = {};
        detail::forPieces(
            pool, blocks, chunkBlocks, 64, [&](int piece, int64_t first, int64_t stop) {
                for (int64_t b = first; b < stop; b += chunkBlocks) {
                    const int64_t bEnd = std::min(stop, b + chunkBlocks);
                    const auto lo = static_cast<size_t>(b * S);
                    const auto n = static_cast<size_t>(std::min(P, bEnd * S) - b * S);
                    auto st =
                        encodeDeltaInt8(std::span<const float>(residual).subspan(lo, n),
                                        std::span<const float>(zeros).first(n), S,
                                        std::span<int8_t>(q.values).subspan(lo, n),
                                        std::span<float>(q.scales).subspan(
                                            static_cast<size_t>(b), static_cast<size_t>(bEnd - b)));
                    failed[piece] = failed[piece] || !st;  // not expected: x is finite
                }
            });
        if (std::find(std::begin(failed), std::end(failed), true) != std::end(failed))
            return makeError("weight delta: the int8 encode failed");
    } else {
        q.halves.resize(static_cast<size_t>(P));
        detail::forPieces(pool, P, kMinChunk, 1 << 30, [&](int, int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; ++i)
                q.halves[static_cast<size_t>(i)] = floatToHalf(residual[i]);  // saturates
        });
    }
    applyAll(next, old, residual, q, pool, variant);
    return q;
}

Status applyWeightDelta(std::span<float> weights, const QuantizedDelta& q, ThreadPool* pool,
                        CpuVariant variant) {
    if (auto st = checkFits(static_cast<int64_t>(weights.size()), q); !st)
        return st;
    if (!cpuVariantAvailable(variant))
        return makeError("weight delta: this CPU has no AVX2");
    applyAll(weights, weights, {}, q, pool, variant);
    return {};
}

}  // namespace tandem
