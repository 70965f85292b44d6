// The kernels of the CUDA op set (cuda_ops.cu): launch shapes, warp and fp16 helpers, one
// kernel per op. Part of cuda_ops.cu's translation unit, included by it alone, so it is compiled
// by nvcc and by g++ through the emulation alike; the names stay in its anonymous namespace.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, HS = C / NH head
// size, V vocab, N element count, BT = B*T rows. Tensors are row-major device memory.
#pragma once

#include "cuda_compat.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tandem::TANDEM_CUDA_NS {
namespace {

constexpr int kThreads = 256;  // threads per block of the 1-D kernels
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr float kLayernormEps = 1e-5f;
constexpr float kGeluScale = 0.79788456080286535588f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;
#if TANDEM_CUDA_EMULATION
// Emulated threads are fibers: fewer, longer-running threads are faster; grid-stride loops make
// every kernel correct for any grid.
constexpr int64_t kMaxBlocks = 16;
constexpr int kSumBlocks = 8;
constexpr int64_t kEncodeChunk = int64_t{1} << 16;
#else
constexpr int64_t kMaxBlocks = 8192;
constexpr int kSumBlocks = 512;
constexpr int64_t kEncodeChunk = int64_t{1} << 22;  // halves per device-to-host copy
#endif

dim3 blocksFor(int64_t n) {
    return dim3(
        static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks)));
}
// One warp per row, kThreads / kWarp rows per block.
dim3 warpRowBlocks(int64_t rows) {
    const int64_t rowsPerBlock = kThreads / kWarp;
    return dim3(
        static_cast<unsigned>(std::max<int64_t>(1, (rows + rowsPerBlock - 1) / rowsPerBlock)));
}
// Column reductions: blocks of 32 columns x 8 row lanes; grid.y spreads the rows.
constexpr int kColumnRowLanes = 8;
dim3 columnBlocks(int64_t rows, int columns) {
    const int64_t rowBlocks = std::clamp<int64_t>((rows + 255) / 256, 1, 64);
    return dim3(static_cast<unsigned>((columns + kWarp - 1) / kWarp),
                static_cast<unsigned>(rowBlocks));
}

// ---- device helpers -----------------------------------------------------------------------------

__device__ __forceinline__ float warpSum(float v) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
        v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}
__device__ __forceinline__ double warpSumDouble(double v) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
        v += __shfl_down_sync(kFullMask, v, offset);
    return v;  // complete in lane 0
}
__device__ __forceinline__ float warpMax(float v) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
        v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    }
    return v;
}
__device__ __forceinline__ int64_t globalThread() {
    return int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t gridThreads() {
    return int64_t{gridDim.x} * blockDim.x;
}

// Round to nearest even; finite values beyond 65504 saturate to it; Inf stays Inf; NaN becomes
// a quiet NaN keeping the top payload bits. Bit-identical to codec.cpp's floatToHalf.
__device__ __forceinline__ unsigned floatToHalfBits(float value, unsigned* saturated,
                                                    unsigned* nonFinite) {
    const unsigned x = __float_as_uint(value);
    const unsigned sign = (x >> 16) & 0x8000u;
    const unsigned a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        *nonFinite = 1;
        return sign | (a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu)) : 0x7c00u);
    }
    if (a > 0x477fe000u) {  // beyond 65504
        *saturated = 1;
        return sign | 0x7bffu;
    }
    if (a >= 0x38800000u) {  // normal half: rebias the exponent, round 13 mantissa bits away
        unsigned h = (a - (112u << 23)) >> 13;
        const unsigned rest = a & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            ++h;
        return sign | h;
    }
    // Subnormal half: m * 2^-24 with m = mantissa24 >> (126 - exponent), rounded to even.
    const unsigned exponent = a >> 23;
    if (exponent < 102)
        return sign;  // below 2^-25: rounds to zero
    const unsigned mantissa = (a & 0x7fffffu) | 0x800000u;
    const unsigned shift = 126u - exponent;  // 14 .. 24
    unsigned h = mantissa >> shift;
    const unsigned rest = mantissa & ((1u << shift) - 1u);
    const unsigned half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (h & 1u)))
        ++h;
    return sign | h;
}

// ---- kernels ------------------------------------------------------------------------------------

// out (B,T,C), inp (B,T), wte (V,C), wpe (maxT,C)
__global__ void encoderForwardKernel(float* out, const int32_t* inp, const float* wte,
                                     const float* wpe, int B, int T, int C) {
    const int64_t n = int64_t{B} * T * C;
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        const int64_t bt = i / C;
        const int c = static_cast<int>(i % C);
        const int t = static_cast<int>(bt % T);
        out[i] = wte[int64_t{inp[bt]} * C + c] + wpe[int64_t{t} * C + c];
    }
}

// dwte (V,C) += dout rows of each token (atomics: tokens repeat), dout (B,T,C), inp (B,T)
__global__ void encoderBackwardTokenKernel(float* dwte, const float* dout, const int32_t* inp,
                                           int B, int T, int C) {
    const int64_t n = int64_t{B} * T * C;
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        const int64_t bt = i / C;
        atomicAdd(&dwte[int64_t{inp[bt]} * C + i % C], dout[i]);
    }
}

// dwpe (maxT,C) += sum over b of dout (B,T,C); one thread per (t, c), no atomics.
__global__ void encoderBackwardPositionKernel(float* dwpe, const float* dout, int B, int T, int C) {
    const int64_t n = int64_t{T} * C;
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        float sum = 0;
        for (int b = 0; b < B; ++b)
            sum += dout[int64_t{b} * T * C + i];
        dwpe[i] += sum;
    }
}

// One warp per row. out (BT,C), mean (BT), rstd (BT), inp (BT,C), weight (C), bias (C)
__global__ void layernormForwardKernel(float* out, float* mean, float* rstd, const float* inp,
                                       const float* weight, const float* bias, int64_t rows,
                                       int C) {
    const int64_t row = int64_t{blockIdx.x} * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    if (row >= rows)
        return;  // whole warps leave; no block barrier below
    const float* x = inp + row * C;
    float sum = 0;
    for (int c = lane; c < C; c += kWarp)
        sum += x[c];
    const float m = warpSum(sum) / static_cast<float>(C);
    float squares = 0;
    for (int c = lane; c < C; c += kWarp) {
        const float d = x[c] - m;
        squares += d * d;
    }
    const float s = 1.0f / sqrtf(warpSum(squares) / static_cast<float>(C) + kLayernormEps);
    for (int c = lane; c < C; c += kWarp)
        out[row * C + c] = (x[c] - m) * s * weight[c] + bias[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

// dinp (BT,C) += rstd * (g - mean(g) - n * mean(g n)), g = weight * dout, n normalized input.
// One warp per row. dout (BT,C), inp (BT,C), weight (C), mean (BT), rstd (BT)
__global__ void layernormBackwardInputKernel(float* dinp, const float* dout, const float* inp,
                                             const float* weight, const float* mean,
                                             const float* rstd, int64_t rows, int C) {
    const int64_t row = int64_t{blockIdx.x} * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    if (row >= rows)
        return;
    const float* x = inp + row * C;
    const float* dy = dout + row * C;
    const float m = mean[row], s = rstd[row];
    float sumG = 0, sumGN = 0;
    for (int c = lane; c < C; c += kWarp) {
        const float n = (x[c] - m) * s;
        const float g = weight[c] * dy[c];
        sumG += g;
        sumGN += g * n;
    }
    const float meanG = warpSum(sumG) / static_cast<float>(C);
    const float meanGN = warpSum(sumGN) / static_cast<float>(C);
    for (int c = lane; c < C; c += kWarp) {
        const float n = (x[c] - m) * s;
        dinp[row * C + c] += s * (weight[c] * dy[c] - meanG - n * meanGN);
    }
}

// dweight (C) += sum_rows n * dout, dbias (C) += sum_rows dout. Block (32 columns, 8 row lanes).
// dout (BT,C), inp (BT,C), mean (BT), rstd (BT)
__global__ void layernormBackwardParamKernel(float* dweight, float* dbias, const float* dout,
                                             const float* inp, const float* mean, const float* rstd,
                                             int64_t rows, int C) {
    __shared__ float partialW[kColumnRowLanes][kWarp + 1];
    __shared__ float partialB[kColumnRowLanes][kWarp + 1];
    const int c = static_cast<int>(blockIdx.x * kWarp + threadIdx.x);
    float accW = 0, accB = 0;
    if (c < C) {
        for (int64_t r = int64_t{blockIdx.y} * kColumnRowLanes + threadIdx.y; r < rows;
             r += int64_t{gridDim.y} * kColumnRowLanes) {
            const float dy = dout[r * C + c];
            accB += dy;
            accW += (inp[r * C + c] - mean[r]) * rstd[r] * dy;
        }
    }
    partialW[threadIdx.y][threadIdx.x] = accW;
    partialB[threadIdx.y][threadIdx.x] = accB;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float w = 0, b = 0;
        for (int i = 0; i < kColumnRowLanes; ++i) {
            w += partialW[i][threadIdx.x];
            b += partialB[i][threadIdx.x];
        }
        atomicAdd(&dweight[c], w);
        atomicAdd(&dbias[c], b);
    }
}

// out (BT,OC) += bias (OC)
__global__ void addBiasKernel(float* out, const float* bias, int64_t rows, int OC) {
    const int64_t n = rows * OC;
    for (int64_t i = globalThread(); i < n; i += gridThreads())
        out[i] += bias[i % OC];
}

// dbias (OC) += sum over rows of dout (BT,OC). Block (32 columns, 8 row lanes).
__global__ void columnSumKernel(float* dbias, const float* dout, int64_t rows, int OC) {
    __shared__ float partial[kColumnRowLanes][kWarp + 1];
    const int c = static_cast<int>(blockIdx.x * kWarp + threadIdx.x);
    float acc = 0;
    if (c < OC) {
        for (int64_t r = int64_t{blockIdx.y} * kColumnRowLanes + threadIdx.y; r < rows;
             r += int64_t{gridDim.y} * kColumnRowLanes) {
            acc += dout[r * OC + c];
        }
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < OC) {
        float sum = 0;
        for (int i = 0; i < kColumnRowLanes; ++i)
            sum += partial[i][threadIdx.x];
        atomicAdd(&dbias[c], sum);
    }
}

// Causal softmax of each row of preatt in place into att; zeroes both above the diagonal.
// One warp per row (b, h, t). preatt (B,NH,T,T), att (B,NH,T,T)
__global__ void causalSoftmaxKernel(float* att, float* preatt, int64_t rows, int T) {
    const int64_t row = int64_t{blockIdx.x} * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    if (row >= rows)
        return;
    const int t = static_cast<int>(row % T);
    float* scores = preatt + row * T;
    float* weights = att + row * T;
    float maxScore = -INFINITY;
    for (int t2 = lane; t2 <= t; t2 += kWarp)
        maxScore = fmaxf(maxScore, scores[t2]);
    maxScore = warpMax(maxScore);
    float sum = 0;
    for (int t2 = lane; t2 <= t; t2 += kWarp)
        sum += expf(scores[t2] - maxScore);
    const float inverse = 1.0f / warpSum(sum);
    for (int t2 = lane; t2 < T; t2 += kWarp) {
        if (t2 <= t) {
            weights[t2] = expf(scores[t2] - maxScore) * inverse;
        } else {
            weights[t2] = 0;
            scores[t2] = 0;
        }
    }
}

// dpreatt = att * (datt - sum_t3 att datt) on the causal prefix; 0 above it (datt too).
// One warp per row. dpreatt (B,NH,T,T), datt (B,NH,T,T), att (B,NH,T,T)
__global__ void causalSoftmaxBackwardKernel(float* dpreatt, float* datt, const float* att,
                                            int64_t rows, int T) {
    const int64_t row = int64_t{blockIdx.x} * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    if (row >= rows)
        return;
    const int t = static_cast<int>(row % T);
    const float* a = att + row * T;
    float* da = datt + row * T;
    float* dp = dpreatt + row * T;
    float weighted = 0;
    for (int t2 = lane; t2 <= t; t2 += kWarp)
        weighted += a[t2] * da[t2];
    weighted = warpSum(weighted);
    for (int t2 = lane; t2 < T; t2 += kWarp) {
        if (t2 <= t) {
            dp[t2] = a[t2] * (da[t2] - weighted);
        } else {
            dp[t2] = 0;
            da[t2] = 0;
        }
    }
}

// out (N), inp (N)
__global__ void geluForwardKernel(float* out, const float* inp, int64_t n) {
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(kGeluScale * (x + kGeluCubic * x * x * x)));
    }
}

// dinp (N) += gelu'(inp) * dout; inp (N), dout (N)
__global__ void geluBackwardKernel(float* dinp, const float* inp, const float* dout, int64_t n) {
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        const float x = inp[i];
        const float th = tanhf(kGeluScale * (x + kGeluCubic * x * x * x));
        const float dudx = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
        dinp[i] += (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * dudx) * dout[i];
    }
}

// out (N) = inp1 (N) + inp2 (N)
__global__ void residualForwardKernel(float* out, const float* inp1, const float* inp2, int64_t n) {
    for (int64_t i = globalThread(); i < n; i += gridThreads())
        out[i] = inp1[i] + inp2[i];
}

// One warp per row. losses (BT), probs (BT,Vp), logits (BT,Vp), targets (BT); the softmax is
// over the first V columns, the padded ones get probability 0.
__global__ void softmaxCrossEntropyForwardKernel(float* losses, float* probs, const float* logits,
                                                 const int32_t* targets, int64_t rows, int V,
                                                 int Vp) {
    const int64_t row = int64_t{blockIdx.x} * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    if (row >= rows)
        return;
    const float* z = logits + row * Vp;
    float maxLogit = -INFINITY;
    for (int j = lane; j < V; j += kWarp)
        maxLogit = fmaxf(maxLogit, z[j]);
    maxLogit = warpMax(maxLogit);
    float sum = 0;
    for (int j = lane; j < V; j += kWarp)
        sum += expf(z[j] - maxLogit);
    sum = warpSum(sum);
    const float inverse = 1.0f / sum;
    for (int j = lane; j < V; j += kWarp)
        probs[row * Vp + j] = expf(z[j] - maxLogit) * inverse;
    for (int j = V + lane; j < Vp; j += kWarp)
        probs[row * Vp + j] = 0.0f;
    // log-sum-exp form: finite even where probs[target] underflows.
    if (lane == 0)
        losses[row] = logf(sum) + maxLogit - z[targets[row]];
}

// dlogits (BT,Vp) += dlosses (BT) * (probs (BT,Vp) - onehot(targets (BT))) in the first V
// columns; the padded columns get nothing.
__global__ void crossEntropySoftmaxBackwardKernel(float* dlogits, const float* dlosses,
                                                  const float* probs, const int32_t* targets,
                                                  int64_t rows, int V, int Vp) {
    const int64_t n = rows * Vp;
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        const int64_t row = i / Vp;
        const int64_t column = i % Vp;
        if (column >= V)
            continue;
        const float indicator = column == targets[row] ? 1.0f : 0.0f;
        dlogits[i] += dlosses[row] * (probs[i] - indicator);
    }
}

// partials (gridDim.x) = per-block sums of x (N)^2 in double.
__global__ void sumSquaresKernel(double* partials, const float* x, int64_t n) {
    __shared__ double warpSums[kThreads / kWarp];
    double acc = 0;
    for (int64_t i = globalThread(); i < n; i += gridThreads())
        acc += double{x[i]} * x[i];
    acc = warpSumDouble(acc);
    const int warp = static_cast<int>(threadIdx.x / kWarp);
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    if (lane == 0)
        warpSums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        double v = lane < static_cast<int>(blockDim.x / kWarp) ? warpSums[lane] : 0.0;
        v = warpSumDouble(v);
        if (lane == 0)
            partials[blockIdx.x] = v;
    }
}

// AdamW with bias correction; corrections are 1 - beta^t. params, grads, m, v (N)
__global__ void adamwKernel(float* params, const float* grads, float* m, float* v, int64_t n,
                            float lr, float beta1, float beta2, float eps, float weightDecay,
                            float gradScale, float correction1, float correction2) {
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        const float g = grads[i] * gradScale;
        const float mi = beta1 * m[i] + (1.0f - beta1) * g;
        const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        const float mHat = mi / correction1;
        const float vHat = vi / correction2;
        params[i] -= lr * (mHat / (sqrtf(vHat) + eps) + weightDecay * params[i]);
    }
}

// out (N) = fp16 bits of start (N) - current (N); counters[0] saturated, counters[1] non-finite.
__global__ void encodeDeltaKernel(uint16_t* out, unsigned long long* counters, const float* start,
                                  const float* current, int64_t n) {
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        unsigned saturated = 0, nonFinite = 0;
        out[i] =
            static_cast<uint16_t>(floatToHalfBits(start[i] - current[i], &saturated, &nonFinite));
        if (saturated)
            atomicAdd(&counters[0], 1ull);
        if (nonFinite)
            atomicAdd(&counters[1], 1ull);
    }
}

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
