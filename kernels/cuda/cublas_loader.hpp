// cuBLAS loaded at run time (dlopen libcublas.so.<major>) for the device build, so programs
// linked with the CUDA backend start on machines without the CUDA libraries and say what is
// missing. Included by cuda_compat.cuh after cublas_v2.h: the cuBLAS names used by cuda_ops.cu are
// redirected here. Not for the emulation (which has its own stand-in).
//
// Dimensions: M, N, K GEMM sizes (column-major).
#pragma once

#include <cublas_v2.h>

#include <string>

namespace tandem::cuda_device::cublas_dl {

// Empty when libcublas was loaded with every entry point used; else why not.
const std::string& loadError();

cublasStatus_t create(cublasHandle_t* handle);
cublasStatus_t destroy(cublasHandle_t handle);
cublasStatus_t setStream(cublasHandle_t handle, cudaStream_t stream);
const char* statusString(cublasStatus_t status);
cublasStatus_t sgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                     int m, int n, int k, const float* alpha, const float* A, int lda,
                     const float* B, int ldb, const float* beta, float* C, int ldc);
cublasStatus_t sgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                   cublasOperation_t transb, int m, int n, int k,
                                   const float* alpha, const float* A, int lda, long long strideA,
                                   const float* B, int ldb, long long strideB, const float* beta,
                                   float* C, int ldc, long long strideC, int batchCount);

}  // namespace tandem::cuda_device::cublas_dl

#undef cublasCreate
#undef cublasDestroy
#undef cublasSetStream
#undef cublasSgemm
#define cublasCreate ::tandem::cuda_device::cublas_dl::create
#define cublasDestroy ::tandem::cuda_device::cublas_dl::destroy
#define cublasSetStream ::tandem::cuda_device::cublas_dl::setStream
#define cublasGetStatusString ::tandem::cuda_device::cublas_dl::statusString
#define cublasSgemm ::tandem::cuda_device::cublas_dl::sgemm
#define cublasSgemmStridedBatched ::tandem::cuda_device::cublas_dl::sgemmStridedBatched
