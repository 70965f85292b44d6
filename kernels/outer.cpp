// The outer Nesterov step of DiLoCo: an elementwise, memory-bound loop split over the threads.
//
// Dimensions: P parameters.
#include "outer.hpp"

#include "thread_pool.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace tandem {
namespace {

constexpr int64_t kMinChunk = 1 << 16;

// theta (n), velocity (n), deltaSum (n)
void outerRange(float* theta, float* velocity, const float* deltaSum, float deltaScale, float lr,
                float mu, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float d = deltaScale * deltaSum[i];
        const float v = mu * velocity[i] + d;
        velocity[i] = v;
        theta[i] -= lr * (d + mu * v);
    }
}

}  // namespace

void outerNesterovStep(std::span<float> theta, std::span<float> velocity,
                       std::span<const float> deltaSum, float deltaScale, const OuterConfig& config,
                       ThreadPool* pool) {
    assert(theta.size() == velocity.size() && theta.size() == deltaSum.size());
    const int64_t n =
        static_cast<int64_t>(std::min({theta.size(), velocity.size(), deltaSum.size()}));
    auto range = [&](int64_t begin, int64_t end) {
        outerRange(theta.data() + begin, velocity.data() + begin, deltaSum.data() + begin,
                   deltaScale, config.lr, config.momentum, end - begin);
    };
    if (pool == nullptr) {
        range(0, n);
    } else {
        pool->parallelFor(n, kMinChunk, range);
    }
}

}  // namespace tandem
