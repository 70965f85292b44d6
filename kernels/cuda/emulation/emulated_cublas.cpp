// The cuBLAS stand-in: handles, streams and the two GEMMs the CUDA ops call (Sgemm,
// SgemmStridedBatched), as plain loops. See cuda_emulation.hpp.
//
// Dimensions: M, N, K matrix sizes of a GEMM (column-major).
#include "cuda_emulation.hpp"
#include "emulation_internal.hpp"

#include <cstdint>
#include <thread>
#include <vector>

namespace tandem::emu {

namespace {

struct EmulatedCublasState {
    cudaStream_t stream = nullptr;
};

}  // namespace

struct EmulatedCublas : EmulatedCublasState {};

// ---- cuBLAS -------------------------------------------------------------------------------------
cublasStatus_t cublasCreate(cublasHandle_t* handle) {
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new EmulatedCublas;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS:
            return "the operation completed successfully";
        case CUBLAS_STATUS_NOT_INITIALIZED:
            return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED:
            return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE:
            return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_EXECUTION_FAILED:
            return "the GPU program failed to execute";
    }
    return "unknown cuBLAS status";
}

namespace {

bool validOp(cublasOperation_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// op(X) as a dense row-major copy: rows x cols, element (r, c) at r * cols + c.
void gather(std::vector<float>& out, const float* X, int ld, bool transposed, int rows, int cols) {
    out.resize(static_cast<size_t>(rows) * cols);
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            // Column-major X: untransposed element (r, c) at r + c*ld; transposed at c + r*ld.
            out[static_cast<size_t>(r) * cols + c] = transposed
                                                         ? X[c + static_cast<int64_t>(r) * ld]
                                                         : X[r + static_cast<int64_t>(c) * ld];
        }
    }
}

// C = alpha op(A) op(B) + beta C for one matrix.
void gemmOne(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) {
    if (m == 0 || n == 0)
        return;
    std::vector<float> a, bt;
    gather(a, A, lda, ta, m, k);  // op(A): m x k, row i contiguous over p
    // op(B)^T: n x k, row j contiguous over p. op(B)^T of B is "B with the other transpose".
    gather(bt, B, ldb, !tb, n, k);
    auto columns = [&](int j0, int j1) {
        for (int j = j0; j < j1; ++j) {
            const float* bj = bt.data() + static_cast<size_t>(j) * k;
            for (int i = 0; i < m; ++i) {
                const float* ai = a.data() + static_cast<size_t>(i) * k;
                float acc[8] = {};
                int p = 0;
                for (; p + 8 <= k; p += 8) {
                    for (int q = 0; q < 8; ++q)
                        acc[q] += ai[p + q] * bj[p + q];
                }
                float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                            ((acc[4] + acc[5]) + (acc[6] + acc[7]));
                for (; p < k; ++p)
                    sum += ai[p] * bj[p];
                float& c = C[i + static_cast<int64_t>(j) * ldc];
                c = beta == 0.0f ? alpha * sum : alpha * sum + beta * c;
            }
        }
    };
    const int64_t work = int64_t{m} * n * k;
    const int threads = work > (int64_t{1} << 22) ? defaultWorkers() : 1;
    if (threads <= 1) {
        columns(0, n);
        return;
    }
    std::vector<std::thread> pieces;
    for (int t = 0; t < threads; ++t) {
        const int j0 = static_cast<int>(int64_t{n} * t / threads);
        const int j1 = static_cast<int>(int64_t{n} * (t + 1) / threads);
        pieces.emplace_back(columns, j0, j1);
    }
    for (auto& p : pieces)
        p.join();
}

cublasStatus_t checkGemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                         int m, int n, int k, const float* alpha, const float* beta, int lda,
                         int ldb, int ldc) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!validOp(transa) || !validOp(transb) || m < 0 || n < 0 || k < 0 || !alpha || !beta) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const int rowsA = transa == CUBLAS_OP_N ? m : k;
    const int rowsB = transb == CUBLAS_OP_N ? k : n;
    if (lda < std::max(1, rowsA) || ldb < std::max(1, rowsB) || ldc < std::max(1, m)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc) {
    if (auto s = checkGemm(handle, transa, transb, m, n, k, alpha, beta, lda, ldb, ldc);
        s != CUBLAS_STATUS_SUCCESS) {
        return s;
    }
    gemmOne(transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *alpha, A, lda, B, ldb, *beta, C,
            ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long strideA, const float* B, int ldb,
                                         long long strideB, const float* beta, float* C, int ldc,
                                         long long strideC, int batchCount) {
    if (auto s = checkGemm(handle, transa, transb, m, n, k, alpha, beta, lda, ldb, ldc);
        s != CUBLAS_STATUS_SUCCESS) {
        return s;
    }
    if (batchCount < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < batchCount; ++i) {
        gemmOne(transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *alpha, A + i * strideA, lda,
                B + i * strideB, ldb, *beta, C + i * strideC, ldc);
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace tandem::emu
