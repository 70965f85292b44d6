// The op set one backend implements: every forward and backward of the GPT graph, the AdamW
// update, and the memory they work on. GptBackend (gpt_backend.hpp) runs the graph through an
// Ops; the CPU reference, the fast CPU ops and the CUDA ops implement it with the same names
// and argument order.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, V vocabulary, Vp
// padded vocabulary (V rounded up to 64; the logits' row length), N element count. Tensors are
// row-major; pointers are in the memory of the op set (host memory for CPU, device memory for
// CUDA).
//
// Conventions: forward ops overwrite their outputs; backward ops ADD into every gradient they
// write (dinp, dweight, dbias), so gradients of shared tensors accumulate. The caller zeroes.
#pragma once

#include "expected.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

// Counts from encoding a pseudo-gradient into fp16.
struct EncodeStats {
    int64_t saturated = 0;  // |delta| beyond the largest half, clamped to +-65504
    int64_t nonFinite = 0;  // NaN or Inf: the result must not be sent
};

class Ops {
  public:
    virtual ~Ops() = default;
    virtual std::string name() const = 0;
    // The first failure of the op set (e.g. a CUDA error, with file, line and message); the ops
    // return void, so GptBackend asks after each call that reaches the device. Once set, it stays
    // set and later results are not to be used. Op sets that cannot fail keep this default.
    virtual Status error() const { return {}; }

    // ---- memory -------------------------------------------------------------------------
    // Zero-filled buffers; nullptr when the memory is not available.
    virtual float* allocateFloats(size_t count) = 0;
    virtual int32_t* allocateInts(size_t count) = 0;
    virtual void release(void* buffer) = 0;
    virtual void copyIn(float* dst, const float* hostSrc, size_t count) = 0;
    virtual void copyOut(float* hostDst, const float* src, size_t count) = 0;
    virtual void copyInInts(int32_t* dst, const int32_t* hostSrc, size_t count) = 0;
    virtual void fillZero(float* buffer, size_t count) = 0;

    // ---- the graph ----------------------------------------------------------------------
    // out (B,T,C) = wte[inp] + wpe[t]; inp (B,T), wte (V,C), wpe (maxT,C)
    virtual void encoderForward(float* out, const int32_t* inp, const float* wte, const float* wpe,
                                int B, int T, int C) = 0;
    // dwte (V,C), dwpe (maxT,C), dout (B,T,C), inp (B,T)
    virtual void encoderBackward(float* dwte, float* dwpe, const float* dout, const int32_t* inp,
                                 int B, int T, int C) = 0;

    // out (B,T,C), mean (B,T), rstd (B,T), inp (B,T,C), weight (C), bias (C); eps 1e-5
    virtual void layernormForward(float* out, float* mean, float* rstd, const float* inp,
                                  const float* weight, const float* bias, int B, int T, int C) = 0;
    // dinp (B,T,C), dweight (C), dbias (C), dout (B,T,C), inp (B,T,C), weight (C),
    // mean (B,T), rstd (B,T)
    virtual void layernormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                                   const float* inp, const float* weight, const float* mean,
                                   const float* rstd, int B, int T, int C) = 0;

    // out (B,T,OC) = inp (B,T,C) . weight (OC,C)^T + bias (OC); bias may be null
    virtual void matmulForward(float* out, const float* inp, const float* weight, const float* bias,
                               int B, int T, int C, int OC) = 0;
    // dinp (B,T,C), dweight (OC,C), dbias (OC) or null, dout (B,T,OC), inp (B,T,C),
    // weight (OC,C)
    virtual void matmulBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                                const float* inp, const float* weight, int B, int T, int C,
                                int OC) = 0;

    // Causal multi-head self-attention. inp (B,T,3C) holds q, k, v; out (B,T,C);
    // preatt (B,NH,T,T) scaled scores, att (B,NH,T,T) softmax over the causal prefix.
    virtual void attentionForward(float* out, float* preatt, float* att, const float* inp, int B,
                                  int T, int C, int NH) = 0;
    // dinp (B,T,3C), dpreatt (B,NH,T,T), datt (B,NH,T,T) scratch, dout (B,T,C),
    // inp (B,T,3C), att (B,NH,T,T)
    virtual void attentionBackward(float* dinp, float* dpreatt, float* datt, const float* dout,
                                   const float* inp, const float* att, int B, int T, int C,
                                   int NH) = 0;

    // GELU, tanh approximation. out (N), inp (N)
    virtual void geluForward(float* out, const float* inp, int64_t N) = 0;
    // dinp (N), inp (N), dout (N)
    virtual void geluBackward(float* dinp, const float* inp, const float* dout, int64_t N) = 0;

    // out (N) = inp1 (N) + inp2 (N)
    virtual void residualForward(float* out, const float* inp1, const float* inp2, int64_t N) = 0;

    // probs (B,T,Vp): softmax over the first V of each row of logits (B,T,Vp), 0 in the padded
    // columns V..Vp-1 (those logits are ignored); losses (B,T) = -log probs[target];
    // targets (B,T), each < V
    virtual void softmaxCrossEntropyForward(float* losses, float* probs, const float* logits,
                                            const int32_t* targets, int B, int T, int V,
                                            int Vp) = 0;
    // dlogits (B,T,Vp) += dlosses (B,T) * (probs - onehot(target)) in the first V columns; the
    // padded columns get nothing. probs (B,T,Vp), targets (B,T)
    virtual void crossEntropySoftmaxBackward(float* dlogits, const float* dlosses,
                                             const float* probs, const int32_t* targets, int B,
                                             int T, int V, int Vp) = 0;

    // ---- optimizer and results ----------------------------------------------------------
    // Sum of squares of x (N), accumulated in double.
    virtual double sumSquares(const float* x, int64_t N) = 0;
    // One AdamW update of N parameters with bias correction for 1-based step t:
    //   g = grads * gradScale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
    //   params -= lr * (mhat / (sqrt(vhat) + eps) + weightDecay * params)
    // params (N), grads (N), m (N), v (N)
    virtual void adamwUpdate(float* params, const float* grads, float* m, float* v, int64_t N,
                             float lr, float beta1, float beta2, float eps, float weightDecay,
                             float gradScale, int64_t t) = 0;
    // out (N) = fp16(start (N) - current (N)), round to nearest even, saturating at +-65504.
    // start and current are op-set memory; out is host memory.
    virtual EncodeStats encodeDeltaFp16(uint16_t* out, const float* start, const float* current,
                                        int64_t N) = 0;
};

}  // namespace tandem
