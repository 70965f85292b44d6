// CpuOps: the fast CPU op set ("cpu", the default CPU path). The linear layers' products run on
// Tandem's own AVX-512 GEMM where the CPU has AVX-512 (gemm_avx512.hpp), on OpenBLAS elsewhere;
// OpenBLAS also computes the attention scores and mixes per batch row and head. A ThreadPool
// keeps every core busy for the rest. Nothing is allocated inside a training step, past the
// first.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, hs = C / NH head
// size, V vocab, N element count. Tensors are row-major, in host memory.
//
// Determinism: every loop is split statically and every reduction runs in a fixed order, so
// the same inputs give bit-identical results run after run. 1 and 2 threads give the same bits
// too: reductions are split by columns or into a fixed number of chunks, products into blocks
// that start on multiples of 48 rows, which OpenBLAS computes as one call over all rows would
// (one block for one thread, quarters for more; see cpu_ops.cpp), and which the own GEMM's
// one-chain-per-element sums do not notice at all. The two product paths differ in the last
// bits, so results are reproducible per machine kind, not across them.
//
// Conventions as in ops.hpp and the reference: forward ops overwrite, backward ops add into
// dinp/dweight/dbias; the attention scratch dpreatt and datt are overwritten, and above the
// causal diagonal preatt, att, dpreatt and datt hold 0.
#pragma once

#include "host_ops.hpp"
#include "thread_pool.hpp"

#include <cstdint>
#include <string>

namespace tandem {

// Who computes the linear layers' products: the fastest this CPU has, or OpenBLAS always (the
// "cpu-openblas" backend: the comparison in bench/ and the tests of both paths).
enum class CpuProducts { Fastest, OpenBlas };

class CpuOps final : public HostOps {
  public:
    // threads >= 1 (<= 0 means one per hardware thread). Sets OpenBLAS to one thread for the
    // whole process: this op set splits the products over its own pool instead.
    explicit CpuOps(int threads, CpuProducts products = CpuProducts::Fastest);

    std::string name() const override { return "cpu"; }
    int threads() const { return m_pool.threads(); }

    // buffer (N); zeroed by all threads (the graph zeroes its activation gradients every step)
    void fillZero(float* buffer, size_t count) override;

    void encoderForward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                        int T, int C) override;
    void encoderBackward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                         int T, int C) override;
    void layernormForward(float* out, float* mean, float* rstd, const float* inp,
                          const float* weight, const float* bias, int B, int T, int C) override;
    void layernormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                           const float* inp, const float* weight, const float* mean,
                           const float* rstd, int B, int T, int C) override;
    void matmulForward(float* out, const float* inp, const float* weight, const float* bias, int B,
                       int T, int C, int OC) override;
    void matmulBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, int B, int T, int C,
                        int OC) override;
    void attentionForward(float* out, float* preatt, float* att, const float* inp, int B, int T,
                          int C, int NH) override;
    void attentionBackward(float* dinp, float* dpreatt, float* datt, const float* dout,
                           const float* inp, const float* att, int B, int T, int C,
                           int NH) override;
    void geluForward(float* out, const float* inp, int64_t N) override;
    void geluBackward(float* dinp, const float* inp, const float* dout, int64_t N) override;
    void residualForward(float* out, const float* inp1, const float* inp2, int64_t N) override;
    void softmaxCrossEntropyForward(float* losses, float* probs, const float* logits,
                                    const int32_t* targets, int B, int T, int V, int Vp) override;
    void crossEntropySoftmaxBackward(float* dlogits, const float* dlosses, const float* probs,
                                     const int32_t* targets, int B, int T, int V, int Vp) override;
    double sumSquares(const float* x, int64_t N) override;
    void adamwUpdate(float* params, const float* grads, float* m, float* v, int64_t N, float lr,
                     float beta1, float beta2, float eps, float weightDecay, float gradScale,
                     int64_t t) override;
    EncodeStats encodeDeltaFp16(uint16_t* out, const float* start, const float* current,
                                int64_t N) override;

  private:
    // C (M x N) = (accumulate ? C : 0) + op(A) . op(B), on the own GEMM or OpenBLAS.
    void product(bool transA, bool transB, int M, int N, int K, const float* A, int lda,
                 const float* B, int ldb, bool accumulate, float* C, int ldc) const;

    ThreadPool m_pool;
    bool m_ownGemm;
};

}  // namespace tandem
