// The fast CPU ops, but attention (cpu_ops_attention.cpp); the lane math both use is in
// lane_math.hpp. See cpu_ops.hpp for the conventions.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, hs head size
// (C / NH), V vocab, N element count, BT = B * T rows. Row-major: element (b,t,c) of a (B,T,C)
// tensor sits at (b*T + t)*C + c.
//
// How the work is split:
// - Matrix products: the own AVX-512 GEMM (where the CPU has it) or OpenBLAS runs
//   single-threaded inside each pool task, on a block of output rows; the pool hands blocks to
//   whichever thread is free, which keeps both cores busy when one is slowed by other work; one
//   thread takes a whole product in one call (see matmulBlock). One set of threads (the pool's)
//   does all the work; letting OpenBLAS start its own threads as well would put two spinning thread
//   teams on the same cores, and its threads would sit idle (or spin) during every non-BLAS op.
// - Row-wise ops (layernorm, softmax, encoder forward) split rows; element-wise ops split N.
// - Reductions over rows (layernorm dweight/dbias, matmul dbias, encoder backward) split
//   columns, and each column sums its rows in order, so no partial sums need combining and the
//   result does not depend on the thread count.
// - Sums inside a row use kLanes independent partial sums combined in a fixed order: the
//   compiler vectorises that without -ffast-math (which would also break NaN checks).
//
// Hot loops are compiled for AVX2 and for baseline x86-64 (target_clones): the binary runs on
// any x86-64 and picks the AVX2 copy at load time. Floating-point contraction is off, so both
// copies compute exactly the same bits.
#include "cpu/cpu_ops.hpp"

#include "codec.hpp"
#include "cpu/gemm_avx512.hpp"
#include "cpu/lane_math.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tandem {

namespace {

constexpr float kLayernormEps = 1e-5f;
constexpr int64_t kMinElementsPerTask = 1 << 14;  // below this a second thread costs more

// GELU with the tanh approximation, through 0.5 (1 + tanh u) = sigmoid(2u) = 1 / (1 + e^-2u),
// which has no cancellation for either sign of u.
constexpr float kGeluScale = 0.79788456080286535588f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;
// -2u is clamped to at most 60 (x below about -8.6), where e^-60 ~ 1e-26 and gelu(x) is 0 to
// within 1e-25. The compiler evaluates the clamped case for every lane and picks per lane; at the
// exp's own bound (88) that case is x / (1 + e^88), a subnormal for |x| < 2, and the subnormal
// products made every GELU call 3x slower (microcode assists on each vector). At 60 it is
// subnormal only for |x| < 1e-12.
constexpr float kGeluMaxExponent = 60.0f;

// sigmoid(2u) = 0.5 (1 + tanh u) for u = sqrt(2/pi) (x + 0.044715 x^3).
inline float geluSigmoid(float x) {
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    float z = -2.0f * u;
    z = z < -87.0f ? -87.0f : z;
    z = z > kGeluMaxExponent ? kGeluMaxExponent : z;
    return 1.0f / (1.0f + expInRange(z));
}

// ---- row and range kernels (compiled twice, see TANDEM_HOT) ---------------------------------

// out (rows, C), inp (B,T), wte (V,C), wpe (maxT,C)
TANDEM_HOT void encoderRows(float* out, const int32_t* inp, const float* wte, const float* wpe,
                            int T, int C, int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
        const float* tokenRow = wte + int64_t{inp[bt]} * C;
        const float* positionRow = wpe + (bt % T) * C;
        float* o = out + bt * C;
        for (int c = 0; c < C; ++c)
            o[c] = tokenRow[c] + positionRow[c];
    }
}

// Channels [c0, c1) of dwte (V,C) and dwpe (maxT,C), rows in order. dout (BT,C), inp (BT)
TANDEM_HOT void encoderBackwardColumns(float* dwte, float* dwpe, const float* dout,
                                       const int32_t* inp, int64_t BT, int T, int C, int c0,
                                       int c1) {
    for (int64_t bt = 0; bt < BT; ++bt) {
        float* dtokenRow = dwte + int64_t{inp[bt]} * C;
        float* dpositionRow = dwpe + (bt % T) * C;
        const float* d = dout + bt * C;
        for (int c = c0; c < c1; ++c) {
            dtokenRow[c] += d[c];
            dpositionRow[c] += d[c];
        }
    }
}

// out (BT,C), mean (BT), rstd (BT), inp (BT,C), weight (C), bias (C); rows [begin, end)
TANDEM_HOT void layernormRows(float* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int C, int64_t begin,
                              int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
        const float* x = inp + bt * C;
        const float m = sumRow(x, C) / static_cast<float>(C);
        float acc[kLanes] = {};
        int i = 0;
        for (; i + kLanes <= C; i += kLanes) {
            for (int j = 0; j < kLanes; ++j)
                acc[j] += (x[i + j] - m) * (x[i + j] - m);
        }
        float tail = 0.0f;
        for (; i < C; ++i)
            tail += (x[i] - m) * (x[i] - m);
        const float variance = (combineLanes(acc) + tail) / static_cast<float>(C);
        const float s = 1.0f / std::sqrt(variance + kLayernormEps);
        float* o = out + bt * C;
        for (int c = 0; c < C; ++c)
            o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[bt] = m;
        rstd[bt] = s;
    }
}

// dx (C) += the layernorm's input gradient of one row. dy (C), x (C), weight (C); m and s the
// row's mean and rstd. With dweight and dbias (C) also adds the row's share into them (else null).
inline void layernormBackwardRow(float* dx, float* dweight, float* dbias, const float* dy,
                                 const float* x, const float* weight, float m, float s, int C) {
    float accG[kLanes] = {}, accGN[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= C; i += kLanes) {
        for (int j = 0; j < kLanes; ++j) {
            const float g = weight[i + j] * dy[i + j];
            accG[j] += g;
            accGN[j] += g * ((x[i + j] - m) * s);
        }
    }
    float tailG = 0.0f, tailGN = 0.0f;
    for (; i < C; ++i) {
        const float g = weight[i] * dy[i];
        tailG += g;
        tailGN += g * ((x[i] - m) * s);
    }
    const float meanG = (combineLanes(accG) + tailG) / static_cast<float>(C);
    const float meanGN = (combineLanes(accGN) + tailGN) / static_cast<float>(C);
    for (int c = 0; c < C; ++c) {
        const float n = (x[c] - m) * s;
        dx[c] += s * (weight[c] * dy[c] - meanG - n * meanGN);
    }
    if (dweight) {
        for (int c = 0; c < C; ++c) {
            dbias[c] += dy[c];
            dweight[c] += (x[c] - m) * s * dy[c];
        }
    }
}

// dinp (BT,C) rows [begin, end); dout (BT,C), inp (BT,C), weight (C), mean (BT), rstd (BT)
TANDEM_HOT void layernormBackwardRows(float* dinp, const float* dout, const float* inp,
                                      const float* weight, const float* mean, const float* rstd,
                                      int C, int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
        layernormBackwardRow(dinp + bt * C, nullptr, nullptr, dout + bt * C, inp + bt * C, weight,
                             mean[bt], rstd[bt], C);
    }
}

// All rows of dinp (BT,C), and dweight (C) and dbias (C), in one pass over the rows in order:
// the same sums in the same order as layernormBackwardRows and layernormBackwardColumns over all
// channels, so the same bits, with each row read from memory once instead of twice (one thread).
TANDEM_HOT void layernormBackwardAll(float* dinp, float* dweight, float* dbias, const float* dout,
                                     const float* inp, const float* weight, const float* mean,
                                     const float* rstd, int64_t BT, int C) {
    for (int64_t bt = 0; bt < BT; ++bt) {
        layernormBackwardRow(dinp + bt * C, dweight, dbias, dout + bt * C, inp + bt * C, weight,
                             mean[bt], rstd[bt], C);
    }
}

// Channels [c0, c1) of dweight (C) and dbias (C), rows in order.
// dout (BT,C), inp (BT,C), mean (BT), rstd (BT)
TANDEM_HOT void layernormBackwardColumns(float* dweight, float* dbias, const float* dout,
                                         const float* inp, const float* mean, const float* rstd,
                                         int64_t BT, int C, int c0, int c1) {
    for (int64_t bt = 0; bt < BT; ++bt) {
        const float* x = inp + bt * C;
        const float* dy = dout + bt * C;
        const float m = mean[bt], s = rstd[bt];
        for (int c = c0; c < c1; ++c) {
            dbias[c] += dy[c];
            dweight[c] += (x[c] - m) * s * dy[c];
        }
    }
}

// Output channels [o0, o1) of dbias (OC), rows in order. dout (BT,OC)
TANDEM_HOT void biasBackwardColumns(float* dbias, const float* dout, int64_t BT, int OC, int o0,
                                    int o1) {
    for (int64_t bt = 0; bt < BT; ++bt) {
        const float* d = dout + bt * OC;
        for (int o = o0; o < o1; ++o)
            dbias[o] += d[o];
    }
}

// out (N), inp (N); range [begin, end)
TANDEM_HOT void geluRange(float* out, const float* inp, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
        const float x = inp[i];
        out[i] = x * geluSigmoid(x);
    }
}

// d gelu / dx = sig + x * 2 sig (1 - sig) du/dx, sig = sigmoid(2u). dinp (N), inp (N), dout (N)
TANDEM_HOT void geluBackwardRange(float* dinp, const float* inp, const float* dout, int64_t begin,
                                  int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
        const float x = inp[i];
        const float sig = geluSigmoid(x);
        const float dudx = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
        const float derivative = sig + x * (2.0f * sig * (1.0f - sig)) * dudx;
        dinp[i] += derivative * dout[i];
    }
}

// losses (BT), probs (BT,Vp), logits (BT,Vp), targets (BT); rows [begin, end). The softmax is
// over the first V columns; the padded ones get probability 0.
TANDEM_HOT void softmaxCrossEntropyRows(float* losses, float* probs, const float* logits,
                                        const int32_t* targets, int V, int Vp, int64_t begin,
                                        int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
        const float* z = logits + bt * Vp;
        float* p = probs + bt * Vp;
        const float maxLogit = maxRow(z, V);
        float acc[kLanes] = {};
        int i = 0;
        for (; i + kLanes <= V; i += kLanes) {
            for (int j = 0; j < kLanes; ++j) {
                p[i + j] = expFast(z[i + j] - maxLogit);
                acc[j] += p[i + j];
            }
        }
        float tail = 0.0f;
        for (; i < V; ++i) {
            p[i] = expFast(z[i] - maxLogit);
            tail += p[i];
        }
        const float sum = combineLanes(acc) + tail;
        for (int j = 0; j < V; ++j)
            p[j] /= sum;
        std::fill(p + V, p + Vp, 0.0f);
        losses[bt] = std::log(sum) + maxLogit - z[targets[bt]];
    }
}

// dlogits (BT,Vp), dlosses (BT), probs (BT,Vp), targets (BT); rows [begin, end). The padded
// columns V..Vp-1 get nothing.
TANDEM_HOT void crossEntropyBackwardRows(float* dlogits, const float* dlosses, const float* probs,
                                         const int32_t* targets, int V, int Vp, int64_t begin,
                                         int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
        const float d = dlosses[bt];
        float* dz = dlogits + bt * Vp;
        const float* p = probs + bt * Vp;
        for (int j = 0; j < V; ++j)
            dz[j] += d * p[j];
        dz[targets[bt]] -= d;
    }
}

// x (N) range [begin, end)
TANDEM_HOT double sumSquaresRange(const float* x, int64_t begin, int64_t end) {
    constexpr int kDoubleLanes = 8;
    double acc[kDoubleLanes] = {};
    int64_t i = begin;
    for (; i + kDoubleLanes <= end; i += kDoubleLanes) {
        for (int j = 0; j < kDoubleLanes; ++j)
            acc[j] += double{x[i + j]} * double{x[i + j]};
    }
    double tail = 0.0;
    for (; i < end; ++i)
        tail += double{x[i]} * double{x[i]};
    for (int width = kDoubleLanes / 2; width >= 1; width /= 2) {
        for (int j = 0; j < width; ++j)
            acc[j] += acc[j + width];
    }
    return acc[0] + tail;
}

struct AdamWFactors {
    float lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, inverseCorrection1, inverseCorrection2,
        eps, weightDecay, gradScale;
};

// params (N), grads (N), m (N), v (N); range [begin, end)
TANDEM_HOT void adamwRange(float* params, const float* grads, float* m, float* v,
                           const AdamWFactors& f, int64_t begin, int64_t end) {
    const AdamWFactors k = f;  // local copy: lets the compiler keep the factors in registers
    for (int64_t i = begin; i < end; ++i) {
        const float g = grads[i] * k.gradScale;
        const float mi = k.beta1 * m[i] + k.oneMinusBeta1 * g;
        const float vi = k.beta2 * v[i] + k.oneMinusBeta2 * (g * g);
        m[i] = mi;
        v[i] = vi;
        const float mHat = mi * k.inverseCorrection1;
        const float vHat = vi * k.inverseCorrection2;
        params[i] -= k.lr * (mHat / (std::sqrt(vHat) + k.eps) + k.weightDecay * params[i]);
    }
}

// Blocks of a matrix product start at multiples of 48 rows (or dweight's output channels).
// OpenBLAS's micro-kernel takes the rows of a call in groups of its unroll width (12 for the
// Zen kernel measured here) and computes a call's last, partial group along another path, with
// another rounding (blocks of 16, 32, 64 or 256 rows changed 3-20% of the results); a block
// boundary on a multiple of the width (48 is one of 4, 8, 12, 16 and 24) leaves each row in the
// same kind of group as one call over all rows would. So the split changes no bit, and one
// thread can take a whole product in one call (test_cpu_ops matmulSplitKeepsBits).
constexpr int64_t kMatmulBlockMultiple = 48;

// Rows (or output channels) per matrix-product task: count / pieces rounded up to a multiple
// of kMatmulBlockMultiple; the pool hands the blocks out as threads come free. One thread
// takes one block: each block packs its whole other operand again (for row blocks the
// weights; at one thread OpenBLAS's packing took 11-15% of the `small` step's CPU time with
// quarters, 10% with one block).
int64_t matmulBlock(int64_t count, int64_t pieces, int threads) {
    if (threads == 1)
        return std::max<int64_t>(count, 1);
    const int64_t piece = (count + pieces - 1) / pieces;
    return (piece + kMatmulBlockMultiple - 1) / kMatmulBlockMultiple * kMatmulBlockMultiple;
}

// A fixed number of chunks for whole-buffer reductions, so the order of the partial sums
// depends on N only, never on the thread count.
int reductionChunks(int64_t N) {
    return static_cast<int>(std::clamp<int64_t>(N / kMinElementsPerTask, 1, 64));
}

}  // namespace

CpuOps::CpuOps(int threads, CpuProducts products)
    : m_pool(threads), m_ownGemm(products == CpuProducts::Fastest && gemmAvx512Available()) {
    // See the file comment: the pool's threads run OpenBLAS single-threaded. This is a
    // process-wide setting; every CpuOps sets the same value.
    openblas_set_num_threads(1);
}

void CpuOps::product(bool transA, bool transB, int M, int N, int K, const float* A, int lda,
                     const float* B, int ldb, bool accumulate, float* C, int ldc) const {
    if (m_ownGemm) {
        gemmAvx512(transA, transB, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
        return;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb,
                accumulate ? 1.0f : 0.0f, C, ldc);
}

void CpuOps::fillZero(float* buffer, size_t count) {
    m_pool.parallelFor(static_cast<int64_t>(count), 1 << 16, [&](int64_t begin, int64_t end) {
        std::memset(buffer + begin, 0, static_cast<size_t>(end - begin) * sizeof(float));
    });
}

void CpuOps::encoderForward(float* out, const int32_t* inp, const float* wte, const float* wpe,
                            int B, int T, int C) {
    m_pool.parallelFor(
        int64_t{B} * T, std::max<int64_t>(1, kMinElementsPerTask / C),
        [&](int64_t begin, int64_t end) { encoderRows(out, inp, wte, wpe, T, C, begin, end); });
}

void CpuOps::encoderBackward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                             int T, int C) {
    const int64_t BT = int64_t{B} * T;
    m_pool.parallelFor(C, 16, [&](int64_t c0, int64_t c1) {
        encoderBackwardColumns(dwte, dwpe, dout, inp, BT, T, C, static_cast<int>(c0),
                               static_cast<int>(c1));
    });
}

void CpuOps::layernormForward(float* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int B, int T, int C) {
    m_pool.parallelFor(int64_t{B} * T, std::max<int64_t>(1, kMinElementsPerTask / C),
                       [&](int64_t begin, int64_t end) {
                           layernormRows(out, mean, rstd, inp, weight, bias, C, begin, end);
                       });
}

void CpuOps::layernormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, const float* mean,
                               const float* rstd, int B, int T, int C) {
    const int64_t BT = int64_t{B} * T;
    const int n = m_pool.threads();
    if (n == 1) {
        layernormBackwardAll(dinp, dweight, dbias, dout, inp, weight, mean, rstd, BT, C);
        return;
    }
    // Tasks [0, n) take row ranges of dinp, tasks [n, 2n) channel ranges of dweight and dbias.
    m_pool.run(2 * n, [&](int task) {
        if (task < n) {
            layernormBackwardRows(dinp, dout, inp, weight, mean, rstd, C, BT * task / n,
                                  BT * (task + 1) / n);
        } else {
            const int piece = task - n;
            layernormBackwardColumns(dweight, dbias, dout, inp, mean, rstd, BT, C, C * piece / n,
                                     C * (piece + 1) / n);
        }
    });
}

void CpuOps::matmulForward(float* out, const float* inp, const float* weight, const float* bias,
                           int B, int T, int C, int OC) {
    const int64_t BT = int64_t{B} * T;
    const int64_t rows = matmulBlock(BT, 4, m_pool.threads());
    const int tasks = static_cast<int>((BT + rows - 1) / rows);
    m_pool.run(tasks, [&](int task) {
        const int64_t begin = task * rows, count = std::min(rows, BT - begin);
        float* o = out + begin * OC;
        if (bias) {
            for (int64_t r = 0; r < count; ++r)
                std::memcpy(o + r * OC, bias, sizeof(float) * OC);
        }
        product(false, true, static_cast<int>(count), OC, C, inp + begin * C, C, weight, C,
                bias != nullptr, o, OC);
    });
}

void CpuOps::matmulBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                            const float* inp, const float* weight, int B, int T, int C, int OC) {
    const int64_t BT = int64_t{B} * T;
    const int64_t rows = matmulBlock(BT, 4, m_pool.threads());
    const int rowTasks = static_cast<int>((BT + rows - 1) / rows);
    // dweight in two blocks of output channels: each block packs all of inp (BT, C) again.
    const int64_t channels = matmulBlock(OC, 2, m_pool.threads());
    const int channelTasks = static_cast<int>((OC + channels - 1) / channels);
    // Interleaved so that both kinds of work are in flight from the start.
    const int pairs = std::min(rowTasks, channelTasks);
    m_pool.run(rowTasks + channelTasks, [&](int task) {
        int rowIndex = -1, channelIndex = -1;
        if (task < 2 * pairs)
            (task % 2 == 0 ? rowIndex : channelIndex) = task / 2;
        else
            (rowTasks > pairs ? rowIndex : channelIndex) = pairs + task - 2 * pairs;
        if (rowIndex >= 0) {
            // rows of dinp += dout . weight
            const int64_t begin = rowIndex * rows, count = std::min(rows, BT - begin);
            product(false, false, static_cast<int>(count), C, OC, dout + begin * OC, OC, weight, C,
                    true, dinp + begin * C, C);
            return;
        }
        // output channels of dweight += dout^T . inp and of dbias
        const int o0 = static_cast<int>(channelIndex * channels);
        const int o1 = static_cast<int>(std::min<int64_t>(OC, o0 + channels));
        product(true, false, o1 - o0, C, static_cast<int>(BT), dout + o0, OC, inp, C, true,
                dweight + int64_t{o0} * C, C);
        if (dbias)
            biasBackwardColumns(dbias, dout, BT, OC, o0, o1);
    });
}

void CpuOps::geluForward(float* out, const float* inp, int64_t N) {
    m_pool.parallelFor(N, kMinElementsPerTask,
                       [&](int64_t begin, int64_t end) { geluRange(out, inp, begin, end); });
}

void CpuOps::geluBackward(float* dinp, const float* inp, const float* dout, int64_t N) {
    m_pool.parallelFor(N, kMinElementsPerTask, [&](int64_t begin, int64_t end) {
        geluBackwardRange(dinp, inp, dout, begin, end);
    });
}

void CpuOps::residualForward(float* out, const float* inp1, const float* inp2, int64_t N) {
    m_pool.parallelFor(N, kMinElementsPerTask, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
            out[i] = inp1[i] + inp2[i];
    });
}

void CpuOps::softmaxCrossEntropyForward(float* losses, float* probs, const float* logits,
                                        const int32_t* targets, int B, int T, int V, int Vp) {
    m_pool.parallelFor(int64_t{B} * T, std::max<int64_t>(1, kMinElementsPerTask / Vp),
                       [&](int64_t begin, int64_t end) {
                           softmaxCrossEntropyRows(losses, probs, logits, targets, V, Vp, begin,
                                                   end);
                       });
}

void CpuOps::crossEntropySoftmaxBackward(float* dlogits, const float* dlosses, const float* probs,
                                         const int32_t* targets, int B, int T, int V, int Vp) {
    m_pool.parallelFor(int64_t{B} * T, std::max<int64_t>(1, kMinElementsPerTask / Vp),
                       [&](int64_t begin, int64_t end) {
                           crossEntropyBackwardRows(dlogits, dlosses, probs, targets, V, Vp, begin,
                                                    end);
                       });
}

double CpuOps::sumSquares(const float* x, int64_t N) {
    const int chunks = reductionChunks(N);
    double partial[64];
    m_pool.run(chunks, [&](int chunk) {
        partial[chunk] = sumSquaresRange(x, N * chunk / chunks, N * (chunk + 1) / chunks);
    });
    double sum = 0.0;
    for (int chunk = 0; chunk < chunks; ++chunk)
        sum += partial[chunk];
    return sum;
}

void CpuOps::adamwUpdate(float* params, const float* grads, float* m, float* v, int64_t N, float lr,
                         float beta1, float beta2, float eps, float weightDecay, float gradScale,
                         int64_t t) {
    const double correction1 = 1.0 - std::pow(double{beta1}, static_cast<double>(t));
    const double correction2 = 1.0 - std::pow(double{beta2}, static_cast<double>(t));
    const AdamWFactors factors{lr,
                               beta1,
                               beta2,
                               1.0f - beta1,
                               1.0f - beta2,
                               static_cast<float>(1.0 / correction1),
                               static_cast<float>(1.0 / correction2),
                               eps,
                               weightDecay,
                               gradScale};
    m_pool.parallelFor(N, kMinElementsPerTask, [&](int64_t begin, int64_t end) {
        adamwRange(params, grads, m, v, factors, begin, end);
    });
}

EncodeStats CpuOps::encodeDeltaFp16(uint16_t* out, const float* start, const float* current,
                                    int64_t N) {
    const int chunks = reductionChunks(N);
    EncodeStats partial[64];
    m_pool.run(chunks, [&](int chunk) {
        EncodeStats stats;
        for (int64_t i = N * chunk / chunks; i < N * (chunk + 1) / chunks; ++i) {
            const float delta = start[i] - current[i];
            if (!std::isfinite(delta))
                ++stats.nonFinite;
            bool saturated = false;
            out[i] = floatToHalf(delta, &saturated);
            if (saturated)
                ++stats.saturated;
        }
        partial[chunk] = stats;
    });
    EncodeStats total;
    for (int chunk = 0; chunk < chunks; ++chunk) {
        total.saturated += partial[chunk].saturated;
        total.nonFinite += partial[chunk].nonFinite;
    }
    return total;
}

}  // namespace tandem
