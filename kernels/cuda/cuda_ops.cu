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
// The kernels are in cuda_kernels.cuh; this file holds the op set that launches them.
//
// Errors: every CUDA and cuBLAS call goes through TANDEM_CHECK; the first failure is kept with
// file, line, call and message, later ops do nothing, and GptBackend reports it (Ops::error()).
#include "cuda_compat.cuh"
#include "cuda_kernels.cuh"
#include "cuda_ops_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace tandem::TANDEM_CUDA_NS {
namespace {

constexpr int64_t kHeadroomBytes = int64_t{64} << 20;  // cuBLAS workspace, fragmentation

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
    void softmaxCrossEntropyForward(float* losses, float* probs, const float* logits,
                                    const int32_t* targets, int B, int T, int V, int Vp) override {
        const int64_t rows = int64_t{B} * T;
        TANDEM_LAUNCH(softmaxCrossEntropyForwardKernel, warpRowBlocks(rows), dim3(kThreads), losses,
                      probs, logits, targets, rows, V, Vp);
    }
    void crossEntropySoftmaxBackward(float* dlogits, const float* dlosses, const float* probs,
                                     const int32_t* targets, int B, int T, int V, int Vp) override {
        const int64_t rows = int64_t{B} * T;
        TANDEM_LAUNCH(crossEntropySoftmaxBackwardKernel, blocksFor(rows * Vp), dim3(kThreads),
                      dlogits, dlosses, probs, targets, rows, V, Vp);
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
