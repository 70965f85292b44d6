// Lane math shared by the fast CPU op files (cpu_ops.cpp, cpu_ops_attention.cpp): the
// target_clones marker for hot loops, row sums and maxima in kLanes fixed lanes, and a
// branch-free exp. Private to kernels/cpu/; compile users with cpu_ops.cpp's flags (see
// kernels/CMakeLists.txt) so every copy rounds alike.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TANDEM_HOT __attribute__((target_clones("avx2", "default")))
#else
#define TANDEM_HOT
#endif

namespace tandem {

// Internal linkage, as when these lived in cpu_ops.cpp: each file inlines its own copy.
namespace {

constexpr int kLanes = 16;

// Combines kLanes partial sums in a fixed pairwise order.
inline float combineLanes(float* acc) {
    for (int width = kLanes / 2; width >= 1; width /= 2) {
        for (int j = 0; j < width; ++j)
            acc[j] += acc[j + width];
    }
    return acc[0];
}

// x (n)
inline float sumRow(const float* x, int n) {
    float acc[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int j = 0; j < kLanes; ++j)
            acc[j] += x[i + j];
    }
    float tail = 0.0f;
    for (; i < n; ++i)
        tail += x[i];
    return combineLanes(acc) + tail;
}

// x (n). A NaN is not picked up here, but exp(NaN - max) carries it into every result.
inline float maxRow(const float* x, int n) {
    float acc[kLanes];
    for (int j = 0; j < kLanes; ++j)
        acc[j] = -INFINITY;
    int i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int j = 0; j < kLanes; ++j)
            acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
    }
    float m = -INFINITY;
    for (int j = 0; j < kLanes; ++j)
        m = acc[j] > m ? acc[j] : m;
    for (; i < n; ++i)
        m = x[i] > m ? x[i] : m;
    return m;
}

// exp(x) for x in [-87, 88] within 2 ulp (Cephes expf polynomial), branch-free so that loops
// calling it vectorise.
inline float expInRange(float x) {
    constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float shifted = x * 1.44269504088896341f + kMagic;
    const float n = shifted - kMagic;
    const int32_t exponent = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kMagic);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    return p * std::bit_cast<float>((exponent + 127) << 23);
}

// exp(x) with x clamped to [-87, 88] (results stay normal); NaN stays NaN.
inline float expFast(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    return expInRange(x);
}

}  // namespace

}  // namespace tandem
