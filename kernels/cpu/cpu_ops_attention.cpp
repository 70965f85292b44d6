// The fast CPU attention ops (CpuOps::attentionForward / attentionBackward). See cpu_ops.cpp
// for how the work is split and cpu_ops.hpp for the conventions.
//
// Dimensions: B batch, T sequence, C channels, NH heads, hs head size (C / NH).

#include "cpu/cpu_ops.hpp"
#include "cpu/lane_math.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace tandem {

namespace {

constexpr int kAttentionBlock = 32;  // query rows per product: bounds the work above the diagonal

// The causal softmax of one score row: att[0..t] = softmax(preatt[0..t]), the rest 0.
// preatt (T), att (T); preatt above the diagonal is set to 0.
TANDEM_HOT void causalSoftmaxRow(float* preatt, float* att, int t, int T) {
    const int n = t + 1;
    const float maxScore = maxRow(preatt, n);
    float acc[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int j = 0; j < kLanes; ++j) {
            att[i + j] = expFast(preatt[i + j] - maxScore);
            acc[j] += att[i + j];
        }
    }
    float tail = 0.0f;
    for (; i < n; ++i) {
        att[i] = expFast(preatt[i] - maxScore);
        tail += att[i];
    }
    const float sum = combineLanes(acc) + tail;
    for (int t2 = 0; t2 < n; ++t2)
        att[t2] /= sum;
    for (int t2 = n; t2 < T; ++t2)
        preatt[t2] = att[t2] = 0.0f;
}

// Softmax backward of one row: dpreatt[t2] = att[t2] (datt[t2] - sum att . datt) for t2 <= t,
// 0 above; datt above the diagonal is set to 0. dpreatt (T), datt (T), att (T)
TANDEM_HOT void softmaxBackwardRow(float* dpreatt, float* datt, const float* att, int t, int T) {
    const int n = t + 1;
    float acc[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int j = 0; j < kLanes; ++j)
            acc[j] += att[i + j] * datt[i + j];
    }
    float tail = 0.0f;
    for (; i < n; ++i)
        tail += att[i] * datt[i];
    const float weighted = combineLanes(acc) + tail;
    for (int t2 = 0; t2 < n; ++t2)
        dpreatt[t2] = att[t2] * (datt[t2] - weighted);
    for (int t2 = n; t2 < T; ++t2)
        dpreatt[t2] = datt[t2] = 0.0f;
}

}  // namespace

// One task per (b, h). Scores and mixes go through OpenBLAS in blocks of kAttentionBlock query
// rows; a block only multiplies the keys up to its last row, so the work above the causal
// diagonal is at most one block's triangle.
void CpuOps::attentionForward(float* out, float* preatt, float* att, const float* inp, int B, int T,
                              int C, int NH) {
    const int hs = C / NH;
    const int C3 = 3 * C;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
    m_pool.run(B * NH, [&](int task) {
        const int b = task / NH, h = task % NH;
        const float* q = inp + int64_t{b} * T * C3 + int64_t{h} * hs;  // (T, hs) stride 3C
        const float* k = q + C;
        const float* v = q + 2 * C;
        float* scores = preatt + int64_t{task} * T * T;         // (T,T)
        float* weights = att + int64_t{task} * T * T;           // (T,T)
        float* y = out + int64_t{b} * T * C + int64_t{h} * hs;  // (T, hs) stride C
        for (int r0 = 0; r0 < T; r0 += kAttentionBlock) {
            const int r1 = std::min(T, r0 + kAttentionBlock);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, scale,
                        q + int64_t{r0} * C3, C3, k, C3, 0.0f, scores + int64_t{r0} * T, T);
            for (int t = r0; t < r1; ++t)
                causalSoftmaxRow(scores + int64_t{t} * T, weights + int64_t{t} * T, t, T);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, 1.0f,
                        weights + int64_t{r0} * T, T, v, C3, 0.0f, y + int64_t{r0} * C, C);
        }
    });
}

void CpuOps::attentionBackward(float* dinp, float* dpreatt, float* datt, const float* dout,
                               const float* inp, const float* att, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const int C3 = 3 * C;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
    m_pool.run(B * NH, [&](int task) {
        const int b = task / NH, h = task % NH;
        const int64_t headOffset = int64_t{b} * T * C3 + int64_t{h} * hs;
        const float* q = inp + headOffset;  // (T, hs) stride 3C
        const float* k = q + C;
        const float* v = q + 2 * C;
        float* dq = dinp + headOffset;
        float* dk = dq + C;
        float* dv = dq + 2 * C;
        const float* dy = dout + int64_t{b} * T * C + int64_t{h} * hs;  // (T, hs) stride C
        const float* weights = att + int64_t{task} * T * T;             // (T,T)
        float* dweights = datt + int64_t{task} * T * T;                 // (T,T)
        float* dscores = dpreatt + int64_t{task} * T * T;               // (T,T)

        // datt = dy . v^T, then the softmax backward, by query blocks.
        for (int r0 = 0; r0 < T; r0 += kAttentionBlock) {
            const int r1 = std::min(T, r0 + kAttentionBlock);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, 1.0f,
                        dy + int64_t{r0} * C, C, v, C3, 0.0f, dweights + int64_t{r0} * T, T);
            for (int t = r0; t < r1; ++t) {
                softmaxBackwardRow(dscores + int64_t{t} * T, dweights + int64_t{t} * T,
                                   weights + int64_t{t} * T, t, T);
            }
            // dq += scale * dpreatt . k
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, scale,
                        dscores + int64_t{r0} * T, T, k, C3, 1.0f, dq + int64_t{r0} * C3, C3);
        }
        // By key blocks [c0, c1): only queries t >= c0 see these keys.
        // dv += att^T . dy,  dk += scale * dpreatt^T . q
        for (int c0 = 0; c0 < T; c0 += kAttentionBlock) {
            const int c1 = std::min(T, c0 + kAttentionBlock);
            const int64_t corner = int64_t{c0} * T + c0;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c1 - c0, hs, T - c0, 1.0f,
                        weights + corner, T, dy + int64_t{c0} * C, C, 1.0f, dv + int64_t{c0} * C3,
                        C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c1 - c0, hs, T - c0, scale,
                        dscores + corner, T, q + int64_t{c0} * C3, C3, 1.0f, dk + int64_t{c0} * C3,
                        C3);
        }
    });
}

}  // namespace tandem
