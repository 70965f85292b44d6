// The CUDA op set: every op of ops.hpp as a CUDA kernel or cuBLAS call, same names and argument
// order as the CPU reference, fp32 throughout (cuBLAS in its default fp32 math mode). Built by nvcc
// for the GPU and by g++ through the emulation (cuda_ops_emulated.cpp) for every test run.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, HS = C / NH head
// size, V vocab, N element count, BT = B*T rows. Tensors are row-major device memory.
//
// Conventions (ops.hpp, reference_ops.hpp): forward ops overwrite; backward ops add into dinp,
// dweight, dbias; attention scratch (dpreatt, datt) is overwritten; above the causal diagonal
// preatt, att, dpreatt and datt hold 0. cuBLAS is column-major: a row-major (R, K) matrix is a
// column-major (K, R) one, which is how every GEMM below is read.
//
// Errors: every CUDA and cuBLAS call goes through TANDEM_CHECK; the first failure is kept with
// file, line, call and message, later ops do nothing, and GptBackend reports it (Ops::error()).
#include "cuda_compat.cuh"
#include "cuda_ops_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

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
constexpr int64_t kHeadroomBytes = int64_t{64} << 20;  // cuBLAS workspace, fragmentation

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

// dinp1 (N) += dout, dinp2 (N) += dout
__global__ void residualBackwardKernel(float* dinp1, float* dinp2, const float* dout, int64_t n) {
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}

// One warp per row. losses (BT), probs (BT,V), logits (BT,V), targets (BT)
__global__ void softmaxCrossEntropyForwardKernel(float* losses, float* probs, const float* logits,
                                                 const int32_t* targets, int64_t rows, int V) {
    const int64_t row = int64_t{blockIdx.x} * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    if (row >= rows)
        return;
    const float* z = logits + row * V;
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
        probs[row * V + j] = expf(z[j] - maxLogit) * inverse;
    // log-sum-exp form: finite even where probs[target] underflows.
    if (lane == 0)
        losses[row] = logf(sum) + maxLogit - z[targets[row]];
}

// dlogits (BT,V) += dlosses (BT) * (probs (BT,V) - onehot(targets (BT)))
__global__ void crossEntropySoftmaxBackwardKernel(float* dlogits, const float* dlosses,
                                                  const float* probs, const int32_t* targets,
                                                  int64_t rows, int V) {
    const int64_t n = rows * V;
    for (int64_t i = globalThread(); i < n; i += gridThreads()) {
        const int64_t row = i / V;
        const float indicator = i % V == targets[row] ? 1.0f : 0.0f;
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

// ---- the op set ---------------------------------------------------------------------------------

// Inside CudaOps: check a CUDA or cuBLAS status; launch a kernel on the op set's stream and check
// the launch. Both record the first failure with file, line and the call's text.
#define TANDEM_CHECK(call) check((call), __FILE__, __LINE__, #call)
#define TANDEM_LAUNCH(kernel, grid, block, ...)                       \
    do {                                                              \
        if (!failed()) {                                              \
            launchKernel(kernel, grid, block, m_stream, __VA_ARGS__); \
            check(cudaGetLastError(), __FILE__, __LINE__, #kernel);   \
        }                                                             \
    } while (0)

const char* shortFile(const char* path) {
    const char* k = std::strstr(path, "kernels/");
    return k ? k : path;
}

class CudaOps final : public Ops {
  public:
    explicit CudaOps(int device) : m_device(device) {}
    ~CudaOps() override {
        // Teardown errors cannot fail a work unit any more; they are ignored.
        if (m_cublas)
            cublasDestroy(m_cublas);
        for (void* p : {static_cast<void*>(m_partials), static_cast<void*>(m_counters),
                        static_cast<void*>(m_halves)}) {
            if (p)
                cudaFree(p);
        }
        if (m_stream)
            cudaStreamDestroy(m_stream);
    }

    // The stream, the cuBLAS handle and the fixed scratch buffers; the first failure is returned.
    Status init() {
        m_hostPartials.resize(kSumBlocks);
#if !TANDEM_CUDA_EMULATION
        if (!cublas_dl::loadError().empty())
            return makeError(cublas_dl::loadError());
#endif
        (void)(TANDEM_CHECK(cudaSetDevice(m_device)) && TANDEM_CHECK(cudaStreamCreate(&m_stream)) &&
               TANDEM_CHECK(cublasCreate(&m_cublas)) &&
               TANDEM_CHECK(cublasSetStream(m_cublas, m_stream)) &&
               TANDEM_CHECK(cudaMalloc(&m_partials, kSumBlocks * sizeof(double))) &&
               TANDEM_CHECK(cudaMalloc(&m_counters, 2 * sizeof(unsigned long long))) &&
               TANDEM_CHECK(cudaMalloc(&m_halves, kEncodeChunk * sizeof(uint16_t))));
        return error();
    }

    std::string name() const override {
#if TANDEM_CUDA_EMULATION
        return "cuda-emulated";
#else
        return "cuda:" + std::to_string(m_device);
#endif
    }

    Status error() const override {
        if (m_error)
            return *m_error;
        return {};
    }

    // ---- memory ---------------------------------------------------------------------------------
    float* allocateFloats(size_t count) override {
        return static_cast<float*>(allocateZeroed(count * sizeof(float)));
    }
    int32_t* allocateInts(size_t count) override {
        return static_cast<int32_t*>(allocateZeroed(count * sizeof(int32_t)));
    }
    void release(void* buffer) override {
        if (buffer)
            TANDEM_CHECK(cudaFree(buffer));
    }
    void copyIn(float* dst, const float* hostSrc, size_t count) override {
        copy(dst, hostSrc, count * sizeof(float), cudaMemcpyHostToDevice);
    }
    void copyOut(float* hostDst, const float* src, size_t count) override {
        copy(hostDst, src, count * sizeof(float), cudaMemcpyDeviceToHost);
    }
    void copyInInts(int32_t* dst, const int32_t* hostSrc, size_t count) override {
        copy(dst, hostSrc, count * sizeof(int32_t), cudaMemcpyHostToDevice);
    }
    void fillZero(float* buffer, size_t count) override {
        if (!failed() && count > 0) {
            TANDEM_CHECK(cudaMemsetAsync(buffer, 0, count * sizeof(float), m_stream));
        }
    }

    // ---- the graph ------------------------------------------------------------------------------
    void encoderForward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                        int T, int C) override {
        TANDEM_LAUNCH(encoderForwardKernel, blocksFor(int64_t{B} * T * C), dim3(kThreads), out, inp,
                      wte, wpe, B, T, C);
    }
    void encoderBackward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                         int T, int C) override {
        TANDEM_LAUNCH(encoderBackwardTokenKernel, blocksFor(int64_t{B} * T * C), dim3(kThreads),
                      dwte, dout, inp, B, T, C);
        TANDEM_LAUNCH(encoderBackwardPositionKernel, blocksFor(int64_t{T} * C), dim3(kThreads),
                      dwpe, dout, B, T, C);
    }

    void layernormForward(float* out, float* mean, float* rstd, const float* inp,
                          const float* weight, const float* bias, int B, int T, int C) override {
        const int64_t rows = int64_t{B} * T;
        TANDEM_LAUNCH(layernormForwardKernel, warpRowBlocks(rows), dim3(kThreads), out, mean, rstd,
                      inp, weight, bias, rows, C);
    }
    void layernormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                           const float* inp, const float* weight, const float* mean,
                           const float* rstd, int B, int T, int C) override {
        const int64_t rows = int64_t{B} * T;
        TANDEM_LAUNCH(layernormBackwardInputKernel, warpRowBlocks(rows), dim3(kThreads), dinp, dout,
                      inp, weight, mean, rstd, rows, C);
        TANDEM_LAUNCH(layernormBackwardParamKernel, columnBlocks(rows, C),
                      dim3(kWarp, kColumnRowLanes), dweight, dbias, dout, inp, mean, rstd, rows, C);
    }

    void matmulForward(float* out, const float* inp, const float* weight, const float* bias, int B,
                       int T, int C, int OC) override {
        if (failed())
            return;
        const int BT = B * T;
        const float one = 1, zero = 0;
        // out^T (OC, BT) = weight (OC,C as col-major C x OC)^T . inp^T (C, BT)
        TANDEM_CHECK(cublasSgemm(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, OC, BT, C, &one, weight, C,
                                 inp, C, &zero, out, OC));
        if (bias) {
            TANDEM_LAUNCH(addBiasKernel, blocksFor(int64_t{BT} * OC), dim3(kThreads), out, bias,
                          int64_t{BT}, OC);
        }
    }
    void matmulBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, int B, int T, int C,
                        int OC) override {
        if (failed())
            return;
        const int BT = B * T;
        const float one = 1;
        // dinp^T (C, BT) += weight^T (C, OC) . dout^T (OC, BT)
        TANDEM_CHECK(cublasSgemm(m_cublas, CUBLAS_OP_N, CUBLAS_OP_N, C, BT, OC, &one, weight, C,
                                 dout, OC, &one, dinp, C));
        // dweight^T (C, OC) += inp^T (C, BT) . dout (BT, OC)
        TANDEM_CHECK(cublasSgemm(m_cublas, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, BT, &one, inp, C, dout,
                                 OC, &one, dweight, C));
        if (dbias) {
            TANDEM_LAUNCH(columnSumKernel, columnBlocks(BT, OC), dim3(kWarp, kColumnRowLanes),
                          dbias, dout, int64_t{BT}, OC);
        }
    }

    // Per batch row b, one strided-batched GEMM over the NH heads reads q, k, v straight out of
    // inp (B,T,3C): head h of q is the column-major (HS, T) matrix at inp + b*T*3C + h*HS with
    // leading dimension 3C; heads are HS apart.
    void attentionForward(float* out, float* preatt, float* att, const float* inp, int B, int T,
                          int C, int NH) override {
        if (failed())
            return;
        const int HS = C / NH, C3 = 3 * C;
        const float scale = 1.0f / sqrtf(static_cast<float>(HS)), one = 1, zero = 0;
        const long long TT = static_cast<long long>(T) * T;
        for (int b = 0; b < B; ++b) {
            const float* q = inp + int64_t{b} * T * C3;
            const float* k = q + C;
            float* pre = preatt + int64_t{b} * NH * TT;
            // preatt row-major (T, T) = col-major (t2, t): k (T,HS) . q^T, scaled
            TANDEM_CHECK(cublasSgemmStridedBatched(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, HS,
                                                   &scale, k, C3, HS, q, C3, HS, &zero, pre, T, TT,
                                                   NH));
        }
        const int64_t rows = int64_t{B} * NH * T;
        TANDEM_LAUNCH(causalSoftmaxKernel, warpRowBlocks(rows), dim3(kThreads), att, preatt, rows,
                      T);
        for (int b = 0; b < B; ++b) {
            const float* v = inp + int64_t{b} * T * C3 + 2 * C;
            const float* a = att + int64_t{b} * NH * TT;
            float* y = out + int64_t{b} * T * C;
            // y^T (HS, T) per head = v^T (HS, T2) . att^T (T2, T)
            TANDEM_CHECK(cublasSgemmStridedBatched(m_cublas, CUBLAS_OP_N, CUBLAS_OP_N, HS, T, T,
                                                   &one, v, C3, HS, a, T, TT, &zero, y, C, HS, NH));
        }
    }
    void attentionBackward(float* dinp, float* dpreatt, float* datt, const float* dout,
                           const float* inp, const float* att, int B, int T, int C,
                           int NH) override {
        if (failed())
            return;
        const int HS = C / NH, C3 = 3 * C;
        const float scale = 1.0f / sqrtf(static_cast<float>(HS)), one = 1, zero = 0;
        const long long TT = static_cast<long long>(T) * T;
        for (int b = 0; b < B; ++b) {
            const float* v = inp + int64_t{b} * T * C3 + 2 * C;
            const float* dy = dout + int64_t{b} * T * C;
            const float* a = att + int64_t{b} * NH * TT;
            float* da = datt + int64_t{b} * NH * TT;
            float* dv = dinp + int64_t{b} * T * C3 + 2 * C;
            // datt (t, t2) = dy[t] . v[t2]: col-major (t2, t) = v (T2,HS) . dy^T
            TANDEM_CHECK(cublasSgemmStridedBatched(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, HS,
                                                   &one, v, C3, HS, dy, C, HS, &zero, da, T, TT,
                                                   NH));
            // dv^T (HS, T2) += dy^T (HS, T) . att (T, T2)
            TANDEM_CHECK(cublasSgemmStridedBatched(m_cublas, CUBLAS_OP_N, CUBLAS_OP_T, HS, T, T,
                                                   &one, dy, C, HS, a, T, TT, &one, dv, C3, HS,
                                                   NH));
        }
        const int64_t rows = int64_t{B} * NH * T;
        TANDEM_LAUNCH(causalSoftmaxBackwardKernel, warpRowBlocks(rows), dim3(kThreads), dpreatt,
                      datt, att, rows, T);
        for (int b = 0; b < B; ++b) {
            const float* q = inp + int64_t{b} * T * C3;
            const float* k = q + C;
            const float* dp = dpreatt + int64_t{b} * NH * TT;
            float* dq = dinp + int64_t{b} * T * C3;
            float* dk = dq + C;
            // dq^T (HS, T) += scale k^T (HS, T2) . dpreatt^T (T2, T)
            TANDEM_CHECK(cublasSgemmStridedBatched(m_cublas, CUBLAS_OP_N, CUBLAS_OP_N, HS, T, T,
                                                   &scale, k, C3, HS, dp, T, TT, &one, dq, C3, HS,
                                                   NH));
            // dk^T (HS, T2) += scale q^T (HS, T) . dpreatt (T, T2)
            TANDEM_CHECK(cublasSgemmStridedBatched(m_cublas, CUBLAS_OP_N, CUBLAS_OP_T, HS, T, T,
                                                   &scale, q, C3, HS, dp, T, TT, &one, dk, C3, HS,
                                                   NH));
        }
    }

    void geluForward(float* out, const float* inp, int64_t N) override {
        TANDEM_LAUNCH(geluForwardKernel, blocksFor(N), dim3(kThreads), out, inp, N);
    }
    void geluBackward(float* dinp, const float* inp, const float* dout, int64_t N) override {
        TANDEM_LAUNCH(geluBackwardKernel, blocksFor(N), dim3(kThreads), dinp, inp, dout, N);
    }
    void residualForward(float* out, const float* inp1, const float* inp2, int64_t N) override {
        TANDEM_LAUNCH(residualForwardKernel, blocksFor(N), dim3(kThreads), out, inp1, inp2, N);
    }
    void residualBackward(float* dinp1, float* dinp2, const float* dout, int64_t N) override {
        TANDEM_LAUNCH(residualBackwardKernel, blocksFor(N), dim3(kThreads), dinp1, dinp2, dout, N);
    }
    void softmaxCrossEntropyForward(float* losses, float* probs, const float* logits,
                                    const int32_t* targets, int B, int T, int V) override {
        const int64_t rows = int64_t{B} * T;
        TANDEM_LAUNCH(softmaxCrossEntropyForwardKernel, warpRowBlocks(rows), dim3(kThreads), losses,
                      probs, logits, targets, rows, V);
    }
    void crossEntropySoftmaxBackward(float* dlogits, const float* dlosses, const float* probs,
                                     const int32_t* targets, int B, int T, int V) override {
        const int64_t rows = int64_t{B} * T;
        TANDEM_LAUNCH(crossEntropySoftmaxBackwardKernel, blocksFor(rows * V), dim3(kThreads),
                      dlogits, dlosses, probs, targets, rows, V);
    }

    // ---- optimizer and results ------------------------------------------------------------------
    double sumSquares(const float* x, int64_t N) override {
        if (failed())
            return NAN;
        TANDEM_LAUNCH(sumSquaresKernel, dim3(kSumBlocks), dim3(kThreads), m_partials, x, N);
        copy(m_hostPartials.data(), m_partials, kSumBlocks * sizeof(double),
             cudaMemcpyDeviceToHost);
        if (failed())
            return NAN;  // NaN fails the step in GptBackend too
        double sum = 0;
        for (double p : m_hostPartials)
            sum += p;  // fixed order: deterministic
        return sum;
    }
    void adamwUpdate(float* params, const float* grads, float* m, float* v, int64_t N, float lr,
                     float beta1, float beta2, float eps, float weightDecay, float gradScale,
                     int64_t t) override {
        const auto correction1 = static_cast<float>(1.0 - std::pow(double{beta1}, double(t)));
        const auto correction2 = static_cast<float>(1.0 - std::pow(double{beta2}, double(t)));
        TANDEM_LAUNCH(adamwKernel, blocksFor(N), dim3(kThreads), params, grads, m, v, N, lr, beta1,
                      beta2, eps, weightDecay, gradScale, correction1, correction2);
    }
    EncodeStats encodeDeltaFp16(uint16_t* out, const float* start, const float* current,
                                int64_t N) override {
        EncodeStats stats;
        if (failed())
            return stats;
        TANDEM_CHECK(cudaMemsetAsync(m_counters, 0, 2 * sizeof(unsigned long long), m_stream));
        for (int64_t offset = 0; offset < N && !failed(); offset += kEncodeChunk) {
            const int64_t n = std::min(kEncodeChunk, N - offset);
            TANDEM_LAUNCH(encodeDeltaKernel, blocksFor(n), dim3(kThreads), m_halves, m_counters,
                          start + offset, current + offset, n);
            copy(out + offset, m_halves, static_cast<size_t>(n) * sizeof(uint16_t),
                 cudaMemcpyDeviceToHost);
        }
        unsigned long long counters[2] = {0, 0};
        copy(counters, m_counters, sizeof counters, cudaMemcpyDeviceToHost);
        stats.saturated = static_cast<int64_t>(counters[0]);
        stats.nonFinite = static_cast<int64_t>(counters[1]);
        if (failed())
            stats.nonFinite = std::max<int64_t>(stats.nonFinite, 1);  // never send it
        return stats;
    }

    // ---- checks ---------------------------------------------------------------------------------
    bool failed() const {
        return m_error.has_value();
    }

    bool check(cudaError_t status, const char* file, int line, const char* call) {
        if (status == cudaSuccess)
            return true;
        fail(std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
                 cudaGetErrorString(status) + ")",
             file, line, call);
        return false;
    }
    bool check(cublasStatus_t status, const char* file, int line, const char* call) {
        if (status == CUBLAS_STATUS_SUCCESS)
            return true;
        fail("cuBLAS error " + std::to_string(static_cast<int>(status)) + " (" +
                 cublasGetStatusString(status) + ")",
             file, line, call);
        return false;
    }
    void fail(const std::string& what, const char* file, int line, const char* call) {
        if (m_error)
            return;  // the first error is the cause; later ones follow from it
        m_error = makeError(what + " at " + shortFile(file) + ":" + std::to_string(line) + " in " +
                            call + " on " + name());
    }

  private:
    void* allocateZeroed(size_t bytes) {
        if (failed())
            return nullptr;
        void* p = nullptr;
        if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) {
            // Out of memory is not sticky: GptBackend reports it with the sizes.
            (void)cudaGetLastError();
            return nullptr;
        }
        if (!TANDEM_CHECK(cudaMemsetAsync(p, 0, std::max<size_t>(bytes, 1), m_stream))) {
            cudaFree(p);
            return nullptr;
        }
        return p;
    }
    void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
        if (failed() || bytes == 0)
            return;
        TANDEM_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, m_stream));
        TANDEM_CHECK(cudaStreamSynchronize(m_stream));
    }

    int m_device = 0;
    cudaStream_t m_stream = nullptr;
    cublasHandle_t m_cublas = nullptr;
    double* m_partials = nullptr;              // (kSumBlocks)
    unsigned long long* m_counters = nullptr;  // (2): saturated, non-finite
    uint16_t* m_halves = nullptr;              // (kEncodeChunk)
    std::vector<double> m_hostPartials;
    std::optional<Error> m_error;
};

}  // namespace

Expected<std::unique_ptr<Ops>> createCudaOps(int device) {
    auto ops = std::make_unique<CudaOps>(device);
    if (auto s = ops->init(); !s)
        return s.error();
    std::unique_ptr<Ops> result = std::move(ops);
    return Expected<std::unique_ptr<Ops>>(std::move(result));
}

int64_t availableDeviceBytes(int device) {
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return std::max<int64_t>(0, static_cast<int64_t>(freeBytes) - kHeadroomBytes);
}

}  // namespace tandem::TANDEM_CUDA_NS
