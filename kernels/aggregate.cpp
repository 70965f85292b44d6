#include "aggregate.hpp"

#include "thread_pool.hpp"

#include <algorithm>
#include <cstdint>

namespace tandem::coord {

namespace {
void addScaledRange(float* sum, const float* x, float weight, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        sum[i] += weight * x[i];
}
void rebaseRange(float* sum, const float* base, const float* current, float weight, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        sum[i] -= weight * (base[i] - current[i]);
}
}  // namespace

void addScaled(std::span<float> sum, std::span<const float> x, float weight, ThreadPool* pool) {
    const int64_t n = static_cast<int64_t>(std::min(sum.size(), x.size()));
    if (pool == nullptr) {
        addScaledRange(sum.data(), x.data(), weight, n);
        return;
    }
    pool->parallelFor(n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
        addScaledRange(sum.data() + begin, x.data() + begin, weight, end - begin);
    });
}

void rebaseOnto(std::span<float> sum, std::span<const float> base, std::span<const float> current,
                float weight, ThreadPool* pool) {
    const int64_t n = static_cast<int64_t>(std::min({sum.size(), base.size(), current.size()}));
    if (pool == nullptr) {
        rebaseRange(sum.data(), base.data(), current.data(), weight, n);
        return;
    }
    pool->parallelFor(n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
        rebaseRange(sum.data() + begin, base.data() + begin, current.data() + begin, weight,
                    end - begin);
    });
}

}  // namespace tandem::coord
