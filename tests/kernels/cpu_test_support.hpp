// What the CPU backend tests share: the normalized error against a reference (CHECK_CLOSE) and
// random token streams.
#pragma once

#include "random.hpp"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tandem::testing {

using Floats = std::vector<float>;

inline constexpr int kV = 256;

// Normalized error: max |a - ref| / max(1, max |ref|). NaN anywhere counts as infinite.
inline double normalizedError(const Floats& a, const Floats& ref) {
    if (a.size() != ref.size())
        return std::numeric_limits<double>::infinity();
    double maxDiff = 0.0, maxRef = 1.0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double diff = std::fabs(double{a[i]} - double{ref[i]});
        if (std::isnan(diff))
            return std::numeric_limits<double>::infinity();
        maxDiff = std::max(maxDiff, diff);
        maxRef = std::max(maxRef, std::fabs(double{ref[i]}));
    }
    return maxDiff / maxRef;
}

inline std::vector<int32_t> randomTokens(size_t n, uint64_t seed, int V) {
    Rng rng(seed);
    std::vector<int32_t> v(n);
    for (int32_t& x : v)
        x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
    return v;
}

}  // namespace tandem::testing

#define CHECK_CLOSE(a, ref, bound)                                                                \
    do {                                                                                          \
        const double error_ = tandem::testing::normalizedError((a), (ref));                       \
        QVERIFY2(                                                                                 \
            error_ < (bound),                                                                     \
            qPrintable(                                                                           \
                QStringLiteral("%1: normalized error %2 >= %3").arg(#a).arg(error_).arg(bound))); \
    } while (0)
