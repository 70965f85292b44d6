// Test data for the codec tests: n values drawn from a normal distribution of the given scale,
// the same for the same seed.
#pragma once

#include "random.hpp"

#include <cstdint>
#include <vector>

namespace tandem::testing {

inline std::vector<float> randomFloats(int64_t n, uint64_t seed, float scale) {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v)
        x = scale * rng.normal();
    return v;
}

}  // namespace tandem::testing
