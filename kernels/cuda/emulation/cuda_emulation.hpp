// CUDA emulation: enough of the CUDA runtime, the kernel language and cuBLAS that the .cu sources
// of kernels/cuda compile with g++ and run on the CPU (DESIGN.md §7).
//
// Every thread of a block is a fiber (ucontext) with its own stack; the fibers of a block run
// interleaved on one OS thread and switch only at barriers (__syncthreads, warp shuffles, votes,
// __syncwarp), so code that reads another thread's data without the barrier it needs reads stale
// data, as it could on a GPU. Blocks run in parallel on a small pool of OS threads, so atomics are
// real atomics. Launches are synchronous; streams are accepted and ignored.
//
// Everything lives in namespace tandem::emu (no clash with the real cudart/cuBLAS symbols when
// both are linked into one program); the .cu sources see it through a using-directive. This header
// is included only by emulation translation units, never by headers of the CPU-only build.
//
// Dimensions: M, N, K matrix sizes of a GEMM (column-major, as cuBLAS).
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

// ---- the kernel language ------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One instance per block: a block runs on one OS thread at a time, so thread_local storage is
// exactly per block. No initializers, as in CUDA.
#define __shared__ static thread_local

namespace tandem::emu {

struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

inline constexpr int warpSizeValue = 32;

class BlockRuntime;

// What a running emulated thread sees.
struct ThreadContext {
    uint3 threadIndex;
    uint3 blockIndex;
    dim3 blockDims;
    dim3 gridDims;
    int linear = 0;  // x + blockDims.x * (y + blockDims.y * z) of threadIndex
    BlockRuntime* block = nullptr;
};

ThreadContext& currentThread();

#define threadIdx (::tandem::emu::currentThread().threadIndex)
#define blockIdx (::tandem::emu::currentThread().blockIndex)
#define blockDim (::tandem::emu::currentThread().blockDims)
#define gridDim (::tandem::emu::currentThread().gridDims)
#define warpSize (::tandem::emu::warpSizeValue)

// Block-wide barrier of the calling thread's block.
void syncThreads();
// Barrier of the calling thread's warp.
void syncWarp();
// Every lane of the calling warp publishes `mine`; returns the value of lane `srcLane` (an index
// inside the warp), or `mine` when srcLane < 0 or names no thread.
uint64_t warpExchange(uint64_t mine, int srcLane);
// Every lane publishes `predicate`; returns the bit mask of lanes whose predicate was non-zero.
unsigned warpBallot(int predicate);

int laneId();

template <class T>
inline uint64_t toBits(T value) {
    static_assert(sizeof(T) <= 8);
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return bits;
}
template <class T>
inline T fromBits(uint64_t bits) {
    T value;
    std::memcpy(&value, &bits, sizeof(T));
    return value;
}

// Shuffles (the mask is accepted; every lane of the warp must take part, as the kernels here do).
template <class T>
inline T __shfl_sync(unsigned /*mask*/, T var, int srcLane, int width = warpSizeValue) {
    const int lane = laneId();
    const int base = lane / width * width;
    return fromBits<T>(warpExchange(toBits(var), base + ((srcLane % width + width) % width)));
}
template <class T>
inline T __shfl_down_sync(unsigned /*mask*/, T var, unsigned delta, int width = warpSizeValue) {
    const int lane = laneId();
    const int segment = lane / width * width;
    const int src = lane + static_cast<int>(delta);
    return fromBits<T>(warpExchange(toBits(var), src < segment + width ? src : -1));
}
template <class T>
inline T __shfl_up_sync(unsigned /*mask*/, T var, unsigned delta, int width = warpSizeValue) {
    const int lane = laneId();
    const int segment = lane / width * width;
    const int src = lane - static_cast<int>(delta);
    return fromBits<T>(warpExchange(toBits(var), src >= segment ? src : -1));
}
template <class T>
inline T __shfl_xor_sync(unsigned /*mask*/, T var, int laneMask, int width = warpSizeValue) {
    const int lane = laneId();
    const int segment = lane / width * width;
    const int src = lane ^ laneMask;
    // Lanes of later groups are out of reach: the caller's own value comes back.
    return fromBits<T>(warpExchange(toBits(var), src < segment + width ? src : -1));
}
inline unsigned __ballot_sync(unsigned /*mask*/, int predicate) {
    return warpBallot(predicate);
}
unsigned activeLaneMask();
inline int __all_sync(unsigned /*mask*/, int predicate) {
    return warpBallot(predicate) == activeLaneMask();
}
inline int __any_sync(unsigned /*mask*/, int predicate) {
    return warpBallot(predicate) != 0;
}
inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) {
    syncWarp();
}
inline void __syncthreads() {
    syncThreads();
}

// Atomics: real atomics, since blocks run on several OS threads.
template <class T>
inline T atomicAdd(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}
inline int atomicMax(int* address, int value) {
    std::atomic_ref<int> ref(*address);
    int old = ref.load(std::memory_order_relaxed);
    while (old < value && !ref.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
    }
    return old;
}
inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned value) {
    std::atomic_ref<unsigned>(*address).compare_exchange_strong(compare, value);
    return compare;
}

// Intrinsics the kernels use.
inline unsigned __float_as_uint(float x) {
    return fromBits<unsigned>(toBits(x));
}
inline float __uint_as_float(unsigned x) {
    return fromBits<float>(toBits(x));
}
inline float rsqrtf(float x) {
    return 1.0f / std::sqrt(x);
}
template <class T>
inline T __ldg(const T* p) {
    return *p;
}

// ---- the runtime API ----------------------------------------------------------------------------
enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
struct EmulatedStream;
using cudaStream_t = EmulatedStream*;

const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);
// The first error since the last call (launch errors, kernel faults found by the emulation).
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaMalloc(void** pointer, size_t bytes);
template <class T>
inline cudaError_t cudaMalloc(T** pointer, size_t bytes) {
    return cudaMalloc(reinterpret_cast<void**>(pointer), bytes);
}
cudaError_t cudaFree(void* pointer);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaMemGetInfo(size_t* freeBytes, size_t* totalBytes);
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceCount(int* count);

// ---- cuBLAS -------------------------------------------------------------------------------------
enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
struct EmulatedCublas;
using cublasHandle_t = EmulatedCublas*;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
const char* cublasGetStatusString(cublasStatus_t status);
// C (M,N; ldc) = alpha op(A) op(B) + beta C, column-major; op(A) is M x K, op(B) is K x N.
// With beta == 0, C is not read (NaN there does not propagate), as cuBLAS does.
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc);
// batchCount independent Sgemm calls; matrix i starts at A + i*strideA (likewise B and C).
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long strideA, const float* B, int ldb,
                                         long long strideB, const float* beta, float* C, int ldc,
                                         long long strideC, int batchCount);

// ---- emulation control --------------------------------------------------------------------------
// Runs body once per thread of every block. Records cudaErrorInvalidConfiguration for a bad
// shape and cudaErrorLaunchFailure when the threads of a block deadlock (e.g. a barrier that only
// some threads reach while others wait at another).
void launch(dim3 grid, dim3 block, cudaStream_t stream, const std::function<void()>& body);

// The order the fibers of a block start and resume in. Correct kernels give the same result in
// every order; tests use this to shake out missing barriers.
enum class Schedule { Forward, Reverse, Shuffled };
void setSchedule(Schedule schedule, uint64_t seed = 0);
Schedule schedule();

// Emulated device memory: cudaMemGetInfo reports capacity minus what is allocated, and
// cudaMalloc fails beyond it. Default 4 GiB.
void setDeviceMemoryCapacity(size_t bytes);
size_t deviceMemoryCapacity();
size_t deviceMemoryInUse();
size_t deviceAllocationsLive();

// Number of OS threads blocks are spread over (default: hardware threads, at most 8).
void setWorkerThreads(int threads);

}  // namespace tandem::emu
