// The BLIS scheme: B is packed KC x NC at a time into panels of NR columns, A MC x KC at a time
// into panels of MR rows; a 6 x 64 register tile (24 of the 32 zmm registers) multiplies one A
// panel by one B panel. The tile sizes were picked on a Zen 5 core (48 KiB L1, 1 MiB L2).
#include "cpu/gemm_avx512.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace tandem {

namespace {

constexpr int kMr = 6;     // rows of the register tile
constexpr int kNr = 64;    // columns of the register tile: 4 vectors of 16
constexpr int kKc = 256;   // depth of a packed block
constexpr int kMc = 96;    // rows of a packed A block (96 KiB)
constexpr int kNc = 1024;  // columns of a packed B block (1 MiB)

struct FreeFloats {
    void operator()(float* p) const { std::free(p); }
};
using Floats = std::unique_ptr<float[], FreeFloats>;

float* packBuffer(Floats& buffer, size_t count) {
    if (!buffer) {
        buffer.reset(static_cast<float*>(std::aligned_alloc(64, sizeof(float) * count)));
        if (!buffer)
            throw std::bad_alloc();
    }
    return buffer.get();
}

// A panel: for each k, the kMr values of rows [row, row + kMr), zeros past the last row. The
// panel is written front to back (from A's rows: kMr streams read side by side).
void packA(bool transA, const float* A, int lda, int m0, int mc, int k0, int kc, float* out) {
    for (int p = 0; p < mc; p += kMr) {
        const int rows = std::min(kMr, mc - p);
        float* panel = out + int64_t{p} * kc;
        if (transA) {
            for (int k = 0; k < kc; ++k) {
                const float* src = A + int64_t{k0 + k} * lda + m0 + p;
                for (int i = 0; i < kMr; ++i)
                    panel[k * kMr + i] = i < rows ? src[i] : 0.0f;
            }
            continue;
        }
        const float* src[kMr];
        for (int i = 0; i < kMr; ++i)
            src[i] = A + int64_t{m0 + p + std::min(i, rows - 1)} * lda + k0;
        for (int k = 0; k < kc; ++k) {
            for (int i = 0; i < kMr; ++i)
                panel[k * kMr + i] = i < rows ? src[i][k] : 0.0f;
        }
    }
}

// B panels: for each k, the kNr values of columns [col, col + kNr), zeros past the last column.
// Each row of the source is read once, front to back; a transposed B goes through tiles of 16
// depths by kNr columns, whose reads (kNr short runs) and writes (16 panel rows) stay in L1.
void packB(bool transB, const float* B, int ldb, int n0, int nc, int k0, int kc, float* out) {
    if (!transB) {
        for (int k = 0; k < kc; ++k) {
            const float* src = B + int64_t{k0 + k} * ldb + n0;
            for (int p = 0; p < nc; p += kNr) {
                const int cols = std::min(kNr, nc - p);
                float* dst = out + int64_t{p} * kc + int64_t{k} * kNr;
                for (int j = 0; j < kNr; ++j)
                    dst[j] = j < cols ? src[p + j] : 0.0f;
            }
        }
        return;
    }
    constexpr int kDepthTile = 16;
    for (int p = 0; p < nc; p += kNr) {
        const int cols = std::min(kNr, nc - p);
        float* panel = out + int64_t{p} * kc;
        for (int t0 = 0; t0 < kc; t0 += kDepthTile) {
            const int depth = std::min(kDepthTile, kc - t0);
            for (int j = 0; j < kNr; ++j) {
                float* dst = panel + int64_t{t0} * kNr + j;
                if (j >= cols) {
                    for (int t = 0; t < depth; ++t)
                        dst[t * kNr] = 0.0f;
                    continue;
                }
                const float* src = B + int64_t{n0 + p + j} * ldb + k0 + t0;
                for (int t = 0; t < depth; ++t)
                    dst[t * kNr] = src[t];
            }
        }
    }
}

// Columns [16 j, 16 j + 16) of a tile row that has `cols` valid columns.
__attribute__((target("avx512f"))) inline __mmask16 columnMask(int cols, int j) {
    const int left = cols - 16 * j;
    return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

// c (rows x cols of a kMr x kNr tile) = (load ? c : 0) + a panel . b panel, over kc.
__attribute__((target("avx512f"))) void multiplyTile(int kc, const float* a, const float* b,
                                                     float* c, int ldc, bool load, int rows,
                                                     int cols) {
    const bool full = rows == kMr && cols == kNr;
    __m512 acc[kMr][4];
    for (int i = 0; i < kMr; ++i) {
        for (int j = 0; j < 4; ++j) {
            float* cij = c + int64_t{i} * ldc + 16 * j;
            if (!load)
                acc[i][j] = _mm512_setzero_ps();
            else if (full)
                acc[i][j] = _mm512_loadu_ps(cij);
            else
                acc[i][j] = _mm512_maskz_loadu_ps(i < rows ? columnMask(cols, j) : 0, cij);
        }
    }
    for (int k = 0; k < kc; ++k, a += kMr, b += kNr) {
        const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
        const __m512 b2 = _mm512_load_ps(b + 32), b3 = _mm512_load_ps(b + 48);
        for (int i = 0; i < kMr; ++i) {
            const __m512 ai = _mm512_set1_ps(a[i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
            acc[i][2] = _mm512_fmadd_ps(ai, b2, acc[i][2]);
            acc[i][3] = _mm512_fmadd_ps(ai, b3, acc[i][3]);
        }
    }
    for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < 4; ++j) {
            float* cij = c + int64_t{i} * ldc + 16 * j;
            if (full)
                _mm512_storeu_ps(cij, acc[i][j]);
            else
                _mm512_mask_storeu_ps(cij, columnMask(cols, j), acc[i][j]);
        }
    }
}

}  // namespace

bool gemmAvx512Available() {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

void gemmAvx512(bool transA, bool transB, int M, int N, int K, const float* A, int lda,
                const float* B, int ldb, bool accumulate, float* C, int ldc) {
    thread_local Floats packedA, packedB;
    float* pa = packBuffer(packedA, size_t{kMc} * kKc);
    float* pb = packBuffer(packedB, size_t{kNc} * kKc);
    if (K == 0 && !accumulate) {
        for (int i = 0; i < M; ++i)
            std::fill_n(C + int64_t{i} * ldc, N, 0.0f);
    }
    for (int jc = 0; jc < N; jc += kNc) {
        const int nc = std::min(kNc, N - jc);
        for (int pc = 0; pc < K; pc += kKc) {
            const int kc = std::min(kKc, K - pc);
            packB(transB, B, ldb, jc, nc, pc, kc, pb);
            // Past the first block C holds the partial sums: the chain goes on from there.
            const bool load = accumulate || pc > 0;
            for (int ic = 0; ic < M; ic += kMc) {
                const int mc = std::min(kMc, M - ic);
                packA(transA, A, lda, ic, mc, pc, kc, pa);
                for (int jr = 0; jr < nc; jr += kNr) {
                    for (int ir = 0; ir < mc; ir += kMr) {
                        multiplyTile(kc, pa + int64_t{ir} * kc, pb + int64_t{jr} * kc,
                                     C + int64_t{ic + ir} * ldc + jc + jr, ldc, load,
                                     std::min(kMr, mc - ir), std::min(kNr, nc - jr));
                    }
                }
            }
        }
    }
}

}  // namespace tandem
