// The emulated CUDA runtime API: errors, device memory (NaN-filled, exact-size allocations with
// a capacity), copies, streams and the one device. See cuda_emulation.hpp.
#include "emulation_internal.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace tandem::emu {

namespace {

// ---- errors -------------------------------------------------------------------------------------
std::mutex gErrorMutex;
cudaError_t gLastError = cudaSuccess;

// ---- device memory ------------------------------------------------------------------------------
std::mutex gMemoryMutex;
std::unordered_map<void*, size_t> gAllocations;
size_t gCapacity = size_t{4} << 30;
size_t gInUse = 0;

}  // namespace

struct EmulatedStream {};

void recordError(cudaError_t error) {
    std::lock_guard lock(gErrorMutex);
    if (gLastError == cudaSuccess)
        gLastError = error;
}

void setDeviceMemoryCapacity(size_t bytes) {
    std::lock_guard lock(gMemoryMutex);
    gCapacity = bytes;
}
size_t deviceMemoryCapacity() {
    std::lock_guard lock(gMemoryMutex);
    return gCapacity;
}
size_t deviceMemoryInUse() {
    std::lock_guard lock(gMemoryMutex);
    return gInUse;
}
size_t deviceAllocationsLive() {
    std::lock_guard lock(gMemoryMutex);
    return gAllocations.size();
}

// ---- the runtime API ----------------------------------------------------------------------------
const char* cudaGetErrorName(cudaError_t error) {
    switch (error) {
        case cudaSuccess:
            return "cudaSuccess";
        case cudaErrorInvalidValue:
            return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation:
            return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration:
            return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevicePointer:
            return "cudaErrorInvalidDevicePointer";
        case cudaErrorInvalidMemcpyDirection:
            return "cudaErrorInvalidMemcpyDirection";
        case cudaErrorNoDevice:
            return "cudaErrorNoDevice";
        case cudaErrorInvalidDevice:
            return "cudaErrorInvalidDevice";
        case cudaErrorLaunchFailure:
            return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
    switch (error) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInvalidValue:
            return "invalid argument";
        case cudaErrorMemoryAllocation:
            return "out of memory";
        case cudaErrorInvalidConfiguration:
            return "invalid configuration argument";
        case cudaErrorInvalidDevicePointer:
            return "invalid device pointer";
        case cudaErrorInvalidMemcpyDirection:
            return "invalid copy direction for memcpy";
        case cudaErrorNoDevice:
            return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice:
            return "invalid device ordinal";
        case cudaErrorLaunchFailure:
            return "unspecified launch failure (emulation: the threads of a block deadlocked at "
                   "barriers)";
    }
    return "unknown error";
}

cudaError_t cudaGetLastError() {
    std::lock_guard lock(gErrorMutex);
    const cudaError_t e = gLastError;
    gLastError = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError() {
    std::lock_guard lock(gErrorMutex);
    return gLastError;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
    if (!pointer)
        return cudaErrorInvalidValue;
    *pointer = nullptr;
    const size_t rounded = std::max<size_t>(256, (bytes + 255) / 256 * 256);
    {
        std::lock_guard lock(gMemoryMutex);
        if (gInUse + rounded > gCapacity)
            return cudaErrorMemoryAllocation;
        gInUse += rounded;
    }
    // Exactly the bytes asked for (256-byte aligned, like cudaMalloc), so ASan sees a kernel that
    // reads past the end; the accounting counts whole 256-byte granules.
    void* p = nullptr;
    if (posix_memalign(&p, 256, std::max<size_t>(bytes, 1)) != 0) {
        std::lock_guard lock(gMemoryMutex);
        gInUse -= rounded;
        return cudaErrorMemoryAllocation;
    }
    // Fresh device memory holds garbage: all-ones bytes are NaN floats and -1 ints, so code that
    // reads memory it never wrote shows it.
    std::memset(p, 0xff, std::max<size_t>(bytes, 1));
    std::lock_guard lock(gMemoryMutex);
    gAllocations[p] = rounded;
    *pointer = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
    if (!pointer)
        return cudaSuccess;
    {
        std::lock_guard lock(gMemoryMutex);
        auto it = gAllocations.find(pointer);
        if (it == gAllocations.end())
            return cudaErrorInvalidDevicePointer;
        gInUse -= it->second;
        gAllocations.erase(it);
    }
    std::free(pointer);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
        return cudaErrorInvalidMemcpyDirection;
    }
    if (bytes == 0)
        return cudaSuccess;
    if (!dst || !src)
        return cudaErrorInvalidValue;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
    if (bytes == 0)
        return cudaSuccess;
    if (!dst)
        return cudaErrorInvalidValue;
    std::memset(dst, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t) {
    return cudaMemset(dst, value, bytes);
}

cudaError_t cudaMemGetInfo(size_t* freeBytes, size_t* totalBytes) {
    std::lock_guard lock(gMemoryMutex);
    if (freeBytes)
        *freeBytes = gCapacity > gInUse ? gCapacity - gInUse : 0;
    if (totalBytes)
        *totalBytes = gCapacity;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
    if (!stream)
        return cudaErrorInvalidValue;
    *stream = new EmulatedStream;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    delete stream;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
    return cudaPeekAtLastError();
}
cudaError_t cudaDeviceSynchronize() {
    return cudaPeekAtLastError();
}
cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t cudaGetDevice(int* device) {
    if (!device)
        return cudaErrorInvalidValue;
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* count) {
    if (!count)
        return cudaErrorInvalidValue;
    *count = 1;
    return cudaSuccess;
}

}  // namespace tandem::emu
