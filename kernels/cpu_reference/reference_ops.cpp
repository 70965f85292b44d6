// The CPU reference ops as plain loops. See reference_ops.hpp for the conventions.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, hs head size
// (C / NH), V vocab, N element count. Row-major: element (b,t,c) of a (B,T,C) tensor sits at
// (b*T + t)*C + c.
#include "cpu_reference/reference_ops.hpp"

#include "codec.hpp"

#include <algorithm>
#include <cmath>

namespace tandem {
namespace reference {

// ---- encoder --------------------------------------------------------------------------------

template <class Real>
void encoderForward(Real* out, const int32_t* inp, const Real* wte, const Real* wpe, int B, int T,
                    int C) {
    for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
            const int64_t bt = int64_t{b} * T + t;
            const Real* tokenRow = wte + int64_t{inp[bt]} * C;  // (C)
            const Real* positionRow = wpe + int64_t{t} * C;     // (C)
            for (int c = 0; c < C; ++c)
                out[bt * C + c] = tokenRow[c] + positionRow[c];
        }
    }
}

template <class Real>
void encoderBackward(Real* dwte, Real* dwpe, const Real* dout, const int32_t* inp, int B, int T,
                     int C) {
    for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
            const int64_t bt = int64_t{b} * T + t;
            Real* dtokenRow = dwte + int64_t{inp[bt]} * C;
            Real* dpositionRow = dwpe + int64_t{t} * C;
            for (int c = 0; c < C; ++c) {
                dtokenRow[c] += dout[bt * C + c];
                dpositionRow[c] += dout[bt * C + c];
            }
        }
    }
}

// ---- layernorm ------------------------------------------------------------------------------
// y = (x - mean) * rstd * weight + bias with the biased variance and rstd = 1/sqrt(var + eps).

template <class Real>
void layernormForward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                      const Real* bias, int B, int T, int C) {
    for (int64_t bt = 0; bt < int64_t{B} * T; ++bt) {
        const Real* x = inp + bt * C;
        double sum = 0.0;
        for (int c = 0; c < C; ++c)
            sum += x[c];
        const double m = sum / C;
        double squares = 0.0;
        for (int c = 0; c < C; ++c)
            squares += (x[c] - m) * (x[c] - m);
        const double s = 1.0 / std::sqrt(squares / C + kLayernormEps);
        for (int c = 0; c < C; ++c) {
            const double normalized = (x[c] - m) * s;
            out[bt * C + c] = static_cast<Real>(normalized * weight[c] + bias[c]);
        }
        mean[bt] = static_cast<Real>(m);
        rstd[bt] = static_cast<Real>(s);
    }
}

// With n = normalized input and g = weight * dout:
//   dinp = rstd * (g - mean(g) - n * mean(g * n)),  dweight += n * dout,  dbias += dout.
template <class Real>
void layernormBackward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                       const Real* weight, const Real* mean, const Real* rstd, int B, int T,
                       int C) {
    for (int64_t bt = 0; bt < int64_t{B} * T; ++bt) {
        const Real* x = inp + bt * C;
        const Real* dy = dout + bt * C;
        const double m = mean[bt], s = rstd[bt];
        double meanG = 0.0, meanGN = 0.0;
        for (int c = 0; c < C; ++c) {
            const double n = (x[c] - m) * s;
            const double g = double{weight[c]} * dy[c];
            meanG += g;
            meanGN += g * n;
        }
        meanG /= C;
        meanGN /= C;
        for (int c = 0; c < C; ++c) {
            const double n = (x[c] - m) * s;
            const double g = double{weight[c]} * dy[c];
            dbias[c] += dy[c];
            dweight[c] += static_cast<Real>(n * dy[c]);
            dinp[bt * C + c] += static_cast<Real>(s * (g - meanG - n * meanGN));
        }
    }
}

// ---- matmul ---------------------------------------------------------------------------------

template <class Real>
void matmulForward(Real* out, const Real* inp, const Real* weight, const Real* bias, int B, int T,
                   int C, int OC) {
    for (int64_t bt = 0; bt < int64_t{B} * T; ++bt) {
        for (int o = 0; o < OC; ++o) {
            double sum = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; ++c)
                sum += double{inp[bt * C + c]} * weight[int64_t{o} * C + c];
            out[bt * OC + o] = static_cast<Real>(sum);
        }
    }
}

// dinp = dout . weight;  dweight += dout^T . inp;  dbias += sum over (b,t) of dout.
template <class Real>
void matmulBackward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                    const Real* weight, int B, int T, int C, int OC) {
    const int64_t BT = int64_t{B} * T;
    for (int64_t bt = 0; bt < BT; ++bt) {
        for (int c = 0; c < C; ++c) {
            double sum = 0.0;
            for (int o = 0; o < OC; ++o)
                sum += double{dout[bt * OC + o]} * weight[int64_t{o} * C + c];
            dinp[bt * C + c] += static_cast<Real>(sum);
        }
    }
    for (int o = 0; o < OC; ++o) {
        for (int c = 0; c < C; ++c) {
            double sum = 0.0;
            for (int64_t bt = 0; bt < BT; ++bt)
                sum += double{dout[bt * OC + o]} * inp[bt * C + c];
            dweight[int64_t{o} * C + c] += static_cast<Real>(sum);
        }
        if (dbias) {
            double sum = 0.0;
            for (int64_t bt = 0; bt < BT; ++bt)
                sum += dout[bt * OC + o];
            dbias[o] += static_cast<Real>(sum);
        }
    }
}

// ---- causal self-attention ------------------------------------------------------------------
// Head h of position t reads its query at inp[b,t, h*hs ..], keys at inp[b,t2, C + h*hs ..] and
// values at inp[b,t2, 2C + h*hs ..]; the output of head h fills out[b,t, h*hs ..].

template <class Real>
void attentionForward(Real* out, Real* preatt, Real* att, const Real* inp, int B, int T, int C,
                      int NH) {
    const int hs = C / NH;
    const int64_t C3 = int64_t{C} * 3;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    for (int b = 0; b < B; ++b) {
        for (int h = 0; h < NH; ++h) {
            for (int t = 0; t < T; ++t) {
                const Real* query = inp + (int64_t{b} * T + t) * C3 + int64_t{h} * hs;
                const int64_t row = ((int64_t{b} * NH + h) * T + t) * T;  // of preatt and att
                Real* scores = preatt + row;                              // (T)
                Real* weights = att + row;                                // (T)

                double maxScore = -INFINITY;
                for (int t2 = 0; t2 <= t; ++t2) {
                    const Real* key = inp + (int64_t{b} * T + t2) * C3 + C + int64_t{h} * hs;
                    double dot = 0.0;
                    for (int i = 0; i < hs; ++i)
                        dot += double{query[i]} * key[i];
                    scores[t2] = static_cast<Real>(dot * scale);
                    maxScore = std::max(maxScore, double{scores[t2]});
                }
                double sum = 0.0;
                for (int t2 = 0; t2 <= t; ++t2)
                    sum += std::exp(scores[t2] - maxScore);
                for (int t2 = 0; t2 <= t; ++t2) {
                    weights[t2] = static_cast<Real>(std::exp(scores[t2] - maxScore) / sum);
                }
                for (int t2 = t + 1; t2 < T; ++t2)
                    scores[t2] = weights[t2] = 0;

                Real* y = out + (int64_t{b} * T + t) * C + int64_t{h} * hs;  // (hs)
                for (int i = 0; i < hs; ++i) {
                    double value = 0.0;
                    for (int t2 = 0; t2 <= t; ++t2) {
                        const Real* v = inp + (int64_t{b} * T + t2) * C3 + 2 * C + int64_t{h} * hs;
                        value += double{weights[t2]} * v[i];
                    }
                    y[i] = static_cast<Real>(value);
                }
            }
        }
    }
}

// Backward through y = att . v, att = softmax(preatt), preatt = scale * q . k:
//   datt[t2] = dy . v[t2],  dv[t2] += att[t2] * dy
//   dpreatt[t2] = att[t2] * (datt[t2] - sum_t3 att[t3] * datt[t3])
//   dq += scale * sum_t2 dpreatt[t2] * k[t2],  dk[t2] += scale * dpreatt[t2] * q
template <class Real>
void attentionBackward(Real* dinp, Real* dpreatt, Real* datt, const Real* dout, const Real* inp,
                       const Real* att, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const int64_t C3 = int64_t{C} * 3;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    for (int b = 0; b < B; ++b) {
        for (int h = 0; h < NH; ++h) {
            for (int t = 0; t < T; ++t) {
                const int64_t qOffset = (int64_t{b} * T + t) * C3 + int64_t{h} * hs;
                const int64_t row = ((int64_t{b} * NH + h) * T + t) * T;
                const Real* weights = att + row;                                     // (T)
                Real* dweights = datt + row;                                         // (T)
                Real* dscores = dpreatt + row;                                       // (T)
                const Real* dy = dout + (int64_t{b} * T + t) * C + int64_t{h} * hs;  // (hs)

                for (int t2 = 0; t2 <= t; ++t2) {
                    const int64_t vOffset = (int64_t{b} * T + t2) * C3 + 2 * C + int64_t{h} * hs;
                    double dot = 0.0;
                    for (int i = 0; i < hs; ++i) {
                        dot += double{dy[i]} * inp[vOffset + i];
                        dinp[vOffset + i] += static_cast<Real>(double{weights[t2]} * dy[i]);
                    }
                    dweights[t2] = static_cast<Real>(dot);
                }
                double weightedSum = 0.0;
                for (int t2 = 0; t2 <= t; ++t2)
                    weightedSum += double{weights[t2]} * dweights[t2];
                for (int t2 = 0; t2 <= t; ++t2) {
                    dscores[t2] =
                        static_cast<Real>(double{weights[t2]} * (dweights[t2] - weightedSum));
                }
                for (int t2 = t + 1; t2 < T; ++t2)
                    dscores[t2] = dweights[t2] = 0;

                for (int t2 = 0; t2 <= t; ++t2) {
                    const int64_t kOffset = (int64_t{b} * T + t2) * C3 + C + int64_t{h} * hs;
                    for (int i = 0; i < hs; ++i) {
                        dinp[qOffset + i] +=
                            static_cast<Real>(scale * dscores[t2] * inp[kOffset + i]);
                        dinp[kOffset + i] +=
                            static_cast<Real>(scale * dscores[t2] * inp[qOffset + i]);
                    }
                }
            }
        }
    }
}

// ---- GELU (tanh approximation) --------------------------------------------------------------
// gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)

namespace {
constexpr double kGeluScale = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;
}  // namespace

template <class Real>
void geluForward(Real* out, const Real* inp, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        const double x = inp[i];
        const double u = kGeluScale * (x + kGeluCubic * x * x * x);
        out[i] = static_cast<Real>(0.5 * x * (1.0 + std::tanh(u)));
    }
}

// d gelu / dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx,  du/dx = sqrt(2/pi)(1 + 3a x^2)
template <class Real>
void geluBackward(Real* dinp, const Real* inp, const Real* dout, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        const double x = inp[i];
        const double u = kGeluScale * (x + kGeluCubic * x * x * x);
        const double th = std::tanh(u);
        const double dudx = kGeluScale * (1.0 + 3.0 * kGeluCubic * x * x);
        const double derivative = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * dudx;
        dinp[i] += static_cast<Real>(derivative * dout[i]);
    }
}

// ---- residual -------------------------------------------------------------------------------

template <class Real>
void residualForward(Real* out, const Real* inp1, const Real* inp2, int64_t N) {
    for (int64_t i = 0; i < N; ++i)
        out[i] = inp1[i] + inp2[i];
}

template <class Real>
void residualBackward(Real* dinp1, Real* dinp2, const Real* dout, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}

// ---- softmax + cross-entropy ----------------------------------------------------------------
// loss = log(sum_j exp(logit_j)) - logit_target, computed with the maximum subtracted so it stays
// finite where probs[target] would underflow.

template <class Real>
void softmaxCrossEntropyForward(Real* losses, Real* probs, const Real* logits,
                                const int32_t* targets, int B, int T, int V, int Vp) {
    for (int64_t bt = 0; bt < int64_t{B} * T; ++bt) {
        const Real* z = logits + bt * Vp;  // (Vp); only the first V are the vocabulary's
        double maxLogit = -INFINITY;
        for (int j = 0; j < V; ++j)
            maxLogit = std::max(maxLogit, double{z[j]});
        double sum = 0.0;
        for (int j = 0; j < V; ++j)
            sum += std::exp(z[j] - maxLogit);
        for (int j = 0; j < V; ++j)
            probs[bt * Vp + j] = static_cast<Real>(std::exp(z[j] - maxLogit) / sum);
        for (int j = V; j < Vp; ++j)
            probs[bt * Vp + j] = Real{0};
        losses[bt] = static_cast<Real>(std::log(sum) + maxLogit - z[targets[bt]]);
    }
}

// dlogits += dloss * (probs - onehot(target))
template <class Real>
void crossEntropySoftmaxBackward(Real* dlogits, const Real* dlosses, const Real* probs,
                                 const int32_t* targets, int B, int T, int V, int Vp) {
    for (int64_t bt = 0; bt < int64_t{B} * T; ++bt) {
        for (int j = 0; j < V; ++j) {
            const double indicator = j == targets[bt] ? 1.0 : 0.0;
            dlogits[bt * Vp + j] +=
                static_cast<Real>(double{dlosses[bt]} * (probs[bt * Vp + j] - indicator));
        }
    }
}

// ---- optimizer ------------------------------------------------------------------------------

template <class Real>
double sumSquares(const Real* x, int64_t N) {
    double sum = 0.0;
    for (int64_t i = 0; i < N; ++i)
        sum += double{x[i]} * x[i];
    return sum;
}

template <class Real>
void adamwUpdate(Real* params, const Real* grads, Real* m, Real* v, int64_t N, float lr,
                 float beta1, float beta2, float eps, float weightDecay, float gradScale,
                 int64_t t) {
    const double correction1 = 1.0 - std::pow(double{beta1}, static_cast<double>(t));
    const double correction2 = 1.0 - std::pow(double{beta2}, static_cast<double>(t));
    for (int64_t i = 0; i < N; ++i) {
        const double g = double{grads[i]} * gradScale;
        m[i] = static_cast<Real>(beta1 * double{m[i]} + (1.0 - beta1) * g);
        v[i] = static_cast<Real>(beta2 * double{v[i]} + (1.0 - beta2) * g * g);
        const double mHat = m[i] / correction1;
        const double vHat = v[i] / correction2;
        params[i] = static_cast<Real>(
            params[i] - lr * (mHat / (std::sqrt(vHat) + eps) + weightDecay * params[i]));
    }
}

// ---- pseudo-gradient ------------------------------------------------------------------------

EncodeStats encodeDeltaFp16(uint16_t* out, const float* start, const float* current, int64_t N) {
    EncodeStats stats;
    for (int64_t i = 0; i < N; ++i) {
        const float delta = start[i] - current[i];
        if (!std::isfinite(delta))
            ++stats.nonFinite;
        bool saturated = false;
        out[i] = floatToHalf(delta, &saturated);
        if (saturated)
            ++stats.saturated;
    }
    return stats;
}

// ---- instantiations -------------------------------------------------------------------------

#define TANDEM_REFERENCE_INSTANTIATE(Real)                                                         \
    template void encoderForward(Real*, const int32_t*, const Real*, const Real*, int, int, int);  \
    template void encoderBackward(Real*, Real*, const Real*, const int32_t*, int, int, int);       \
    template void layernormForward(Real*, Real*, Real*, const Real*, const Real*, const Real*,     \
                                   int, int, int);                                                 \
    template void layernormBackward(Real*, Real*, Real*, const Real*, const Real*, const Real*,    \
                                    const Real*, const Real*, int, int, int);                      \
    template void matmulForward(Real*, const Real*, const Real*, const Real*, int, int, int, int); \
    template void matmulBackward(Real*, Real*, Real*, const Real*, const Real*, const Real*, int,  \
                                 int, int, int);                                                   \
    template void attentionForward(Real*, Real*, Real*, const Real*, int, int, int, int);          \
    template void attentionBackward(Real*, Real*, Real*, const Real*, const Real*, const Real*,    \
                                    int, int, int, int);                                           \
    template void geluForward(Real*, const Real*, int64_t);                                        \
    template void geluBackward(Real*, const Real*, const Real*, int64_t);                          \
    template void residualForward(Real*, const Real*, const Real*, int64_t);                       \
    template void residualBackward(Real*, Real*, const Real*, int64_t);                            \
    template void softmaxCrossEntropyForward(Real*, Real*, const Real*, const int32_t*, int, int,  \
                                             int, int);                                            \
    template void crossEntropySoftmaxBackward(Real*, const Real*, const Real*, const int32_t*,     \
                                              int, int, int, int);                                 \
    template double sumSquares(const Real*, int64_t);                                              \
    template void adamwUpdate(Real*, const Real*, Real*, Real*, int64_t, float, float, float,      \
                              float, float, float, int64_t);

TANDEM_REFERENCE_INSTANTIATE(float)
TANDEM_REFERENCE_INSTANTIATE(double)
#undef TANDEM_REFERENCE_INSTANTIATE

}  // namespace reference

// ---- the float op set -----------------------------------------------------------------------

void ReferenceOps::encoderForward(float* out, const int32_t* inp, const float* wte,
                                  const float* wpe, int B, int T, int C) {
    reference::encoderForward(out, inp, wte, wpe, B, T, C);
}
void ReferenceOps::encoderBackward(float* dwte, float* dwpe, const float* dout, const int32_t* inp,
                                   int B, int T, int C) {
    reference::encoderBackward(dwte, dwpe, dout, inp, B, T, C);
}
void ReferenceOps::layernormForward(float* out, float* mean, float* rstd, const float* inp,
                                    const float* weight, const float* bias, int B, int T, int C) {
    reference::layernormForward(out, mean, rstd, inp, weight, bias, B, T, C);
}
void ReferenceOps::layernormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                                     const float* inp, const float* weight, const float* mean,
                                     const float* rstd, int B, int T, int C) {
    reference::layernormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, B, T, C);
}
void ReferenceOps::matmulForward(float* out, const float* inp, const float* weight,
                                 const float* bias, int B, int T, int C, int OC) {
    reference::matmulForward(out, inp, weight, bias, B, T, C, OC);
}
void ReferenceOps::matmulBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, int B, int T, int C,
                                  int OC) {
    reference::matmulBackward(dinp, dweight, dbias, dout, inp, weight, B, T, C, OC);
}
void ReferenceOps::attentionForward(float* out, float* preatt, float* att, const float* inp, int B,
                                    int T, int C, int NH) {
    reference::attentionForward(out, preatt, att, inp, B, T, C, NH);
}
void ReferenceOps::attentionBackward(float* dinp, float* dpreatt, float* datt, const float* dout,
                                     const float* inp, const float* att, int B, int T, int C,
                                     int NH) {
    reference::attentionBackward(dinp, dpreatt, datt, dout, inp, att, B, T, C, NH);
}
void ReferenceOps::geluForward(float* out, const float* inp, int64_t N) {
    reference::geluForward(out, inp, N);
}
void ReferenceOps::geluBackward(float* dinp, const float* inp, const float* dout, int64_t N) {
    reference::geluBackward(dinp, inp, dout, N);
}
void ReferenceOps::residualForward(float* out, const float* inp1, const float* inp2, int64_t N) {
    reference::residualForward(out, inp1, inp2, N);
}
void ReferenceOps::softmaxCrossEntropyForward(float* losses, float* probs, const float* logits,
                                              const int32_t* targets, int B, int T, int V, int Vp) {
    reference::softmaxCrossEntropyForward(losses, probs, logits, targets, B, T, V, Vp);
}
void ReferenceOps::crossEntropySoftmaxBackward(float* dlogits, const float* dlosses,
                                               const float* probs, const int32_t* targets, int B,
                                               int T, int V, int Vp) {
    reference::crossEntropySoftmaxBackward(dlogits, dlosses, probs, targets, B, T, V, Vp);
}
double ReferenceOps::sumSquares(const float* x, int64_t N) {
    return reference::sumSquares(x, N);
}
void ReferenceOps::adamwUpdate(float* params, const float* grads, float* m, float* v, int64_t N,
                               float lr, float beta1, float beta2, float eps, float weightDecay,
                               float gradScale, int64_t t) {
    reference::adamwUpdate(params, grads, m, v, N, lr, beta1, beta2, eps, weightDecay, gradScale,
                           t);
}
EncodeStats ReferenceOps::encodeDeltaFp16(uint16_t* out, const float* start, const float* current,
                                          int64_t N) {
    return reference::encodeDeltaFp16(out, start, current, N);
}

}  // namespace tandem
