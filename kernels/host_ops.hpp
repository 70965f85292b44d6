// HostOps: the memory half of an Ops for op sets that compute in host memory (the CPU
// reference and the fast CPU ops derive from it and implement only the graph).
//
// Dimensions: N element count.
#pragma once

#include "ops.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace tandem {

class HostOps : public Ops {
  public:
    // 64-byte aligned (one cache line, a full AVX-512 vector), zero-filled; nullptr on failure.
    static constexpr size_t kAlignmentBytes = 64;

    float* allocateFloats(size_t count) override {
        return static_cast<float*>(allocateZeroed(count, sizeof(float)));
    }
    int32_t* allocateInts(size_t count) override {
        return static_cast<int32_t*>(allocateZeroed(count, sizeof(int32_t)));
    }
    void release(void* buffer) override { std::free(buffer); }

    // dst (N), hostSrc (N)
    void copyIn(float* dst, const float* hostSrc, size_t count) override {
        copy(dst, hostSrc, count * sizeof(float));
    }
    // hostDst (N), src (N)
    void copyOut(float* hostDst, const float* src, size_t count) override {
        copy(hostDst, src, count * sizeof(float));
    }
    // dst (N), hostSrc (N)
    void copyInInts(int32_t* dst, const int32_t* hostSrc, size_t count) override {
        copy(dst, hostSrc, count * sizeof(int32_t));
    }
    // buffer (N)
    void fillZero(float* buffer, size_t count) override {
        if (count > 0)
            std::memset(buffer, 0, count * sizeof(float));
    }

  protected:
    static void* allocateZeroed(size_t count, size_t elementBytes) {
        if (count > SIZE_MAX / elementBytes - kAlignmentBytes)
            return nullptr;
        // aligned_alloc wants a size that is a multiple of the alignment; zero-size requests
        // still get a valid, releasable buffer.
        size_t bytes = count * elementBytes;
        bytes = (bytes + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
        if (bytes == 0)
            bytes = kAlignmentBytes;
        void* buffer = std::aligned_alloc(kAlignmentBytes, bytes);
        if (buffer)
            std::memset(buffer, 0, bytes);
        return buffer;
    }
    static void copy(void* dst, const void* src, size_t bytes) {
        if (bytes > 0 && dst != src)
            std::memmove(dst, src, bytes);
    }
};

}  // namespace tandem
