// The CPU reference op set: every op of ops.hpp as plain loops, written to be read. It is the
// oracle the fast CPU ops and the CUDA ops are compared with, so clarity beats speed here.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, hs = C / NH head
// size, V vocab, N element count. Tensors are row-major.
//
// The math lives in function templates over the scalar type Real (float or double; both are
// instantiated in reference_ops.cpp) so tests can run the same code in double precision and
// check gradients by finite differences with tight tolerances. Reductions (dot products, means,
// sums over the batch) accumulate in double whatever Real is.
//
// Conventions (as in ops.hpp): forward ops overwrite their outputs; backward ops ADD into dinp,
// dweight and dbias. The attention scratch tensors dpreatt and datt are overwritten, not
// accumulated. Above the causal diagonal (key position > query position) preatt, att, dpreatt
// and datt hold 0.
#pragma once

#include "host_ops.hpp"

#include <cstdint>
#include <string>

namespace tandem {
namespace reference {

inline constexpr double kLayernormEps = 1e-5;

// out (B,T,C) = wte[inp] + wpe[t]; inp (B,T), wte (V,C), wpe (maxT,C)
template <class Real>
void encoderForward(Real* out, const int32_t* inp, const Real* wte, const Real* wpe, int B, int T,
                    int C);
// dwte (V,C), dwpe (maxT,C), dout (B,T,C), inp (B,T)
template <class Real>
void encoderBackward(Real* dwte, Real* dwpe, const Real* dout, const int32_t* inp, int B, int T,
                     int C);

// out (B,T,C), mean (B,T), rstd (B,T), inp (B,T,C), weight (C), bias (C)
template <class Real>
void layernormForward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                      const Real* bias, int B, int T, int C);
// dinp (B,T,C), dweight (C), dbias (C), dout (B,T,C), inp (B,T,C), weight (C), mean (B,T),
// rstd (B,T)
template <class Real>
void layernormBackward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                       const Real* weight, const Real* mean, const Real* rstd, int B, int T, int C);

// out (B,T,OC) = inp (B,T,C) . weight (OC,C)^T + bias (OC); bias may be null
template <class Real>
void matmulForward(Real* out, const Real* inp, const Real* weight, const Real* bias, int B, int T,
                   int C, int OC);
// dinp (B,T,C), dweight (OC,C), dbias (OC) or null, dout (B,T,OC), inp (B,T,C), weight (OC,C)
template <class Real>
void matmulBackward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                    const Real* weight, int B, int T, int C, int OC);

// out (B,T,C), preatt (B,NH,T,T), att (B,NH,T,T), inp (B,T,3C) holding q, k, v
template <class Real>
void attentionForward(Real* out, Real* preatt, Real* att, const Real* inp, int B, int T, int C,
                      int NH);
// dinp (B,T,3C), dpreatt (B,NH,T,T) scratch, datt (B,NH,T,T) scratch, dout (B,T,C),
// inp (B,T,3C), att (B,NH,T,T)
template <class Real>
void attentionBackward(Real* dinp, Real* dpreatt, Real* datt, const Real* dout, const Real* inp,
                       const Real* att, int B, int T, int C, int NH);

// GELU, tanh approximation. out (N), inp (N)
template <class Real>
void geluForward(Real* out, const Real* inp, int64_t N);
// dinp (N), inp (N), dout (N)
template <class Real>
void geluBackward(Real* dinp, const Real* inp, const Real* dout, int64_t N);

// out (N) = inp1 (N) + inp2 (N)
template <class Real>
void residualForward(Real* out, const Real* inp1, const Real* inp2, int64_t N);
// dinp1 (N), dinp2 (N), dout (N)
template <class Real>
void residualBackward(Real* dinp1, Real* dinp2, const Real* dout, int64_t N);

// losses (B,T), probs (B,T,Vp), logits (B,T,Vp), targets (B,T); softmax over the first V
// columns, probs 0 in the padded ones (see ops.hpp)
template <class Real>
void softmaxCrossEntropyForward(Real* losses, Real* probs, const Real* logits,
                                const int32_t* targets, int B, int T, int V, int Vp);
// dlogits (B,T,Vp), dlosses (B,T), probs (B,T,Vp), targets (B,T); padded columns untouched
template <class Real>
void crossEntropySoftmaxBackward(Real* dlogits, const Real* dlosses, const Real* probs,
                                 const int32_t* targets, int B, int T, int V, int Vp);

// Sum of squares of x (N), accumulated in double.
template <class Real>
double sumSquares(const Real* x, int64_t N);
// One AdamW update with bias correction for the 1-based step t (see ops.hpp).
// params (N), grads (N), m (N), v (N)
template <class Real>
void adamwUpdate(Real* params, const Real* grads, Real* m, Real* v, int64_t N, float lr,
                 float beta1, float beta2, float eps, float weightDecay, float gradScale,
                 int64_t t);

// out (N) = fp16(start (N) - current (N)); start, current and out in host memory.
EncodeStats encodeDeltaFp16(uint16_t* out, const float* start, const float* current, int64_t N);

}  // namespace reference

// The "cpu-reference" op set: the float instantiations of the templates above.
class ReferenceOps final : public HostOps {
  public:
    std::string name() const override { return "cpu-reference"; }

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
};

}  // namespace tandem
