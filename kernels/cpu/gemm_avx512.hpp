// An AVX-512 matrix product for the fast CPU op set, used for the model's linear layers on
// CPUs that have AVX-512F. Debian 12's OpenBLAS (0.3.21) does not know AMD Zen 5 and runs its
// AVX2 (Haswell) kernels there, at about half of what the core can do; where it does pick its
// AVX-512 kernels, this GEMM is within about 10% of them (docs/benchmarks.md, "An AVX-512
// GEMM"). Without AVX-512F CpuOps keeps OpenBLAS.
//
// Every element of C is one chain of fused multiply-adds in k order, started from C (or 0), so
// the result does not depend on how the rows or columns are split among threads.
#pragma once

namespace tandem {

// True when this CPU (and build) can run gemmAvx512.
bool gemmAvx512Available();

// C = (accumulate ? C : 0) + op(A) . op(B), row-major. op(A) is M x K: A is M x K (lda >= K),
// or K x M when transA (lda >= M); op(B) is K x N: B is K x N (ldb >= N), or N x K when transB
// (ldb >= K). C is M x N (ldc >= N). Packing buffers are per thread, allocated on the first
// call. Only to be called when gemmAvx512Available().
void gemmAvx512(bool transA, bool transB, int M, int N, int K, const float* A, int lda,
                const float* B, int ldb, bool accumulate, float* C, int ldc);

}  // namespace tandem
