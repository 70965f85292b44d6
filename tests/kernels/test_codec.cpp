// The fp16 pseudo-gradient codec: every half value, ties to even, saturation, NaN/Inf refusal,
// weighted accumulation against a double-precision oracle, and threads not changing any bit.
#include "codec.hpp"
#include "random.hpp"
#include "random_floats.hpp"
#include "thread_pool.hpp"

#include <QtTest>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace tandem;
using testing::randomFloats;

namespace {

// Independent decode oracle: the value a half's bits stand for, from the IEEE definition.
double halfValue(uint16_t h) {
    const int sign = (h & 0x8000) ? -1 : 1;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    if (exponent == 0x1f) {
        return mantissa ? std::numeric_limits<double>::quiet_NaN()
                        : sign * std::numeric_limits<double>::infinity();
    }
    if (exponent == 0)
        return sign * std::ldexp(static_cast<double>(mantissa), -24);
    return sign * std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
}

bool isNanHalf(uint16_t h) {
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

uint32_t bitsOf(float f) {
    return std::bit_cast<uint32_t>(f);
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hardwareFloatToHalf(float f) {
    return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hardwareHalfToFloat(uint16_t h) {
    return _cvtsh_ss(h);
}
#endif

}  // namespace

class TestCodec : public QObject {
    Q_OBJECT
  private slots:
    void decodeMatchesDefinitionForAllHalves() {
        for (uint32_t h = 0; h < 65536; ++h) {
            const float f = halfToFloat(static_cast<uint16_t>(h));
            const double expected = halfValue(static_cast<uint16_t>(h));
            if (std::isnan(expected)) {
                QVERIFY2(std::isnan(f), qPrintable(QString::number(h, 16)));
            } else {
                QVERIFY2(static_cast<double>(f) == expected, qPrintable(QString::number(h, 16)));
                QCOMPARE(std::signbit(f), (h & 0x8000) != 0);  // -0 stays -0
            }
        }
    }

    void everyHalfRoundTrips() {
        int finite = 0;
        for (uint32_t h = 0; h < 65536; ++h) {
            const uint16_t half = static_cast<uint16_t>(h);
            bool saturated = true;
            const uint16_t back = floatToHalf(halfToFloat(half), &saturated);
            QVERIFY(!saturated);
            if (isNanHalf(half)) {
                QVERIFY2(isNanHalf(back), qPrintable(QString::number(h, 16)));
                QCOMPARE(back & 0x8000, half & 0x8000);
            } else {
                QVERIFY2(back == half,
                         qPrintable(QString("%1 -> %2").arg(h, 0, 16).arg(back, 0, 16)));
                finite += (h & 0x7c00) != 0x7c00;
            }
        }
        QCOMPARE(finite, 65536 - 2048);  // 2 signs x (1 Inf + 1023 NaN) are not finite
    }

    // Midpoints between consecutive halves (exact in float: 12 significant bits) go to the even
    // one; a float step either side goes to the nearer one. Covers subnormals (h < 0x400), the
    // subnormal/normal border and every binade up to the largest normal.
    void tiesToEven() {
        // Also gathered into one vector for the (vectorized) encoder.
        std::vector<float> values;
        std::vector<uint16_t> expected;
        for (uint16_t h = 0; h < 0x7bff; ++h) {
            for (const uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
                const uint16_t lo = h | sign, hi = static_cast<uint16_t>(h + 1) | sign;
                const double mid = (halfValue(lo) + halfValue(hi)) / 2;
                const float midF = static_cast<float>(mid);
                QVERIFY(static_cast<double>(midF) == mid);
                const uint16_t even = (h & 1) == 0 ? lo : hi;
                QVERIFY2(floatToHalf(midF) == even, qPrintable(QString::number(h, 16)));
                const float towardLo = std::nextafter(midF, 0.0f);
                const float towardHi = std::nextafter(midF, sign ? -1e9f : 1e9f);
                QCOMPARE(floatToHalf(towardLo), lo);
                QCOMPARE(floatToHalf(towardHi), hi);
                values.insert(values.end(), {midF, towardLo, towardHi, halfToFloat(lo)});
                expected.insert(expected.end(), {even, lo, hi, lo});
            }
        }
        const std::vector<float> zeros(values.size(), 0.0f);
        std::vector<uint16_t> encoded(values.size());
        for (int threads : {0, 2}) {
            std::unique_ptr<ThreadPool> pool =
                threads ? std::make_unique<ThreadPool>(threads) : nullptr;
            auto stats = encodeDeltaFp16(values, zeros, encoded, pool.get());
            QVERIFY(stats.ok());
            QCOMPARE(stats->saturated, int64_t{0});
            QVERIFY(encoded == expected);
        }
        // Hand-picked: 1 + 2^-11 is the tie between 1 (0x3c00, even) and 1 + 2^-10 (0x3c01).
        QCOMPARE(floatToHalf(1.0f + 0x1p-11f), uint16_t{0x3c00});
        QCOMPARE(floatToHalf(1.0f + 3 * 0x1p-11f), uint16_t{0x3c02});  // tie 0x3c01/0x3c02
        QCOMPARE(floatToHalf(0x1p-25f), uint16_t{0x0000});             // tie 0 / 2^-24
        QCOMPARE(floatToHalf(3 * 0x1p-25f), uint16_t{0x0002});         // tie 2^-24 / 2^-23
        QCOMPARE(floatToHalf(0x1p-26f), uint16_t{0x0000});             // below half a unit
        QCOMPARE(floatToHalf(std::numeric_limits<float>::denorm_min()), uint16_t{0x0000});
        QCOMPARE(floatToHalf(-std::numeric_limits<float>::denorm_min()), uint16_t{0x8000});
        QCOMPARE(floatToHalf(-0.0f), uint16_t{0x8000});
    }

    void saturatesBeyondLargestHalf() {
        bool saturated = true;
        QCOMPARE(floatToHalf(65504.0f, &saturated), uint16_t{0x7bff});
        QVERIFY(!saturated);
        // Between 65504 and the (Inf-producing) tie at 65520, and beyond: clamp and report.
        for (const float v :
             {std::nextafter(65504.0f, 1e9f), 65519.0f, 65520.0f, 65536.0f, 1e6f, 3e38f, FLT_MAX}) {
            saturated = false;
            QCOMPARE(floatToHalf(v, &saturated), uint16_t{0x7bff});
            QVERIFY(saturated);
            saturated = false;
            QCOMPARE(floatToHalf(-v, &saturated), uint16_t{0xfbff});
            QVERIFY(saturated);
        }
        QCOMPARE(floatToHalf(std::numeric_limits<float>::infinity(), &saturated), uint16_t{0x7c00});
        QVERIFY(!saturated);
        QCOMPARE(floatToHalf(-std::numeric_limits<float>::infinity()), uint16_t{0xfc00});
        QVERIFY(isNanHalf(floatToHalf(std::numeric_limits<float>::quiet_NaN(), &saturated)));
        QVERIFY(!saturated);

        // Counted by the encoder: 3 of these 6 deltas are beyond +-65504.
        const std::vector<float> start = {70000.0f, 0.0f, 1.0f, -1e9f, 65504.0f, 5.0f};
        const std::vector<float> end = {0.0f, 70000.0f, 2.0f, 0.0f, 0.0f, 5.0f};
        std::vector<uint16_t> out(start.size());
        auto stats = encodeDeltaFp16(start, end, out);
        QVERIFY(stats.ok());
        QCOMPARE(stats->saturated, int64_t{3});
        QCOMPARE(stats->nonFinite, int64_t{0});
        const std::vector<uint16_t> expected = {0x7bff, 0xfbff, 0xbc00, 0xfbff, 0x7bff, 0x0000};
        QCOMPARE(out, expected);
    }

    // The x86 F16C instruction as an independent oracle, on all halves and many floats.
    void matchesF16cInstruction() {
#if defined(__x86_64__)
        if (!__builtin_cpu_supports("f16c"))
            QSKIP("this CPU has no F16C instruction");
        for (uint32_t h = 0; h < 65536; ++h) {
            QCOMPARE(bitsOf(halfToFloat(static_cast<uint16_t>(h))),
                     bitsOf(hardwareHalfToFloat(static_cast<uint16_t>(h))));
        }
        // Every float exponent, random mantissas, plus the low mantissa bits near ties.
        Rng rng(7);
        int compared = 0;
        for (uint32_t exponent = 0; exponent < 256; ++exponent) {
            for (int i = 0; i < 4000; ++i) {
                uint32_t mantissa = static_cast<uint32_t>(rng.next()) & 0x7fffffu;
                if (i % 4 == 1)
                    mantissa = (mantissa & ~0x1fffu) | 0x1000u;  // exact tie
                if (i % 4 == 2)
                    mantissa = (mantissa & ~0x1fffu) | 0x0fffu;  // just below
                const uint32_t bits = (exponent << 23) | mantissa | (i % 2 ? 0x80000000u : 0);
                const float f = std::bit_cast<float>(bits);
                if (std::fabs(f) > kHalfMax && std::isfinite(f))
                    continue;  // hardware gives Inf
                QCOMPARE(floatToHalf(f), hardwareFloatToHalf(f));
                ++compared;
            }
        }
        QVERIFY(compared > 500000);
#else
        QSKIP("F16C comparison runs on x86-64 only");
#endif
    }

    void encodeRefusesNanAndInf_data() {
        QTest::addColumn<float>("startValue");
        QTest::addColumn<float>("endValue");
        QTest::addColumn<int>("threads");
        const float inf = std::numeric_limits<float>::infinity();
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (int threads : {0, 2, 3}) {
            const QByteArray t = "/threads=" + QByteArray::number(threads);
            QTest::newRow("NaN start" + t) << nan << 1.0f << threads;
            QTest::newRow("NaN end" + t) << 1.0f << nan << threads;
            QTest::newRow("Inf end" + t) << 0.0f << inf << threads;
            QTest::newRow("-Inf start" + t) << -inf << 0.0f << threads;
            QTest::newRow("Inf - Inf" + t) << inf << inf << threads;
            QTest::newRow("overflowing difference" + t) << FLT_MAX << -FLT_MAX << threads;
        }
    }
    void encodeRefusesNanAndInf() {
        QFETCH(float, startValue);
        QFETCH(float, endValue);
        QFETCH(int, threads);
        const int64_t n = 300001;
        const int64_t badIndex = 234567;  // in the last piece when threaded
        std::vector<float> start = randomFloats(n, 1, 0.01f);
        std::vector<float> end = randomFloats(n, 2, 0.01f);
        start[badIndex] = startValue;
        end[badIndex] = endValue;
        std::vector<uint16_t> out(n);
        std::unique_ptr<ThreadPool> pool =
            threads ? std::make_unique<ThreadPool>(threads) : nullptr;
        auto stats = encodeDeltaFp16(start, end, out, pool.get());
        QVERIFY(!stats.ok());
        const QString message = QString::fromStdString(stats.error().message);
        QVERIFY2(message.contains("1 non-finite"), qPrintable(message));
        QVERIFY2(message.contains("parameter 234567"), qPrintable(message));
        QVERIFY2(message.contains("expected all finite"), qPrintable(message));

        // Many bad values: all counted, the first one named.
        start[10] = std::numeric_limits<float>::quiet_NaN();
        start[n - 1] = std::numeric_limits<float>::infinity();
        stats = encodeDeltaFp16(start, end, out, pool.get());
        QVERIFY(!stats.ok());
        QVERIFY2(QString::fromStdString(stats.error().message).contains("3 non-finite"),
                 stats.error().message.c_str());
        QVERIFY2(QString::fromStdString(stats.error().message).contains("parameter 10:"),
                 stats.error().message.c_str());
    }

    void encodeRefusesMismatchedSizes() {
        std::vector<float> start(5), end(4);
        std::vector<uint16_t> out(5);
        auto stats = encodeDeltaFp16(start, end, out);
        QVERIFY(!stats.ok());
        QVERIFY(QString::fromStdString(stats.error().message).contains("sizes differ"));
    }

    void encodeIsElementwiseFloatToHalf() {
        const int64_t n = 100003;
        // Deltas spread from subnormal halves to beyond the range.
        std::vector<float> start = randomFloats(n, 3, 1.0f), end(n);
        Rng rng(4);
        for (int64_t i = 0; i < n; ++i) {
            end[i] = start[i] - std::ldexp(rng.normal(), static_cast<int>(rng.below(46)) - 28);
        }
        std::vector<uint16_t> out(n);
        auto stats = encodeDeltaFp16(start, end, out);
        QVERIFY(stats.ok());
        int64_t saturated = 0;
        for (int64_t i = 0; i < n; ++i) {
            bool s = false;
            QCOMPARE(out[i], floatToHalf(start[i] - end[i], &s));
            saturated += s;
        }
        QVERIFY(saturated > 100);
        QCOMPARE(stats->saturated, saturated);
    }

    // sum += w * decode(delta) for three deltas, against double arithmetic on the exact values.
    void accumulateMatchesDoubleOracle() {
        const int64_t n = 200001;
        const std::vector<float> initial = randomFloats(n, 5, 1.0f);
        std::vector<float> sum = initial;
        const float weights[3] = {0.25f, 1.7f, 3000.0f};
        std::vector<std::vector<uint16_t>> deltas(3, std::vector<uint16_t>(n));
        Rng rng(6);
        for (auto& d : deltas) {
            for (uint16_t& h : d) {
                h = static_cast<uint16_t>(rng.below(65536));
                if ((h & 0x7c00) == 0x7c00)
                    h &= 0xbfff;  // keep finite
            }
        }
        for (int k = 0; k < 3; ++k)
            accumulateFp16(sum, deltas[k], weights[k]);
        for (int64_t i = 0; i < n; ++i) {
            double exact = initial[i], magnitude = std::fabs(initial[i]);
            for (int k = 0; k < 3; ++k) {
                exact += static_cast<double>(weights[k]) * halfValue(deltas[k][i]);
                magnitude += std::fabs(static_cast<double>(weights[k]) * halfValue(deltas[k][i]));
            }
            // Three float multiply-adds: at most ~6 roundings of at most half an ulp each.
            const double bound = 6 * 0x1p-24 * magnitude + 1e-30;
            if (std::fabs(sum[i] - exact) > bound) {
                QFAIL(qPrintable(QString("element %1: %2 vs %3").arg(i).arg(sum[i]).arg(exact)));
            }
        }
    }

    void scanCountsNonFiniteAndSumsSquares() {
        std::vector<uint16_t> delta(150000);
        Rng rng(8);
        double expected = 0;
        int64_t nonFinite = 0;
        for (uint16_t& h : delta) {
            h = static_cast<uint16_t>(rng.below(65536));
            if ((h & 0x7c00) == 0x7c00) {
                ++nonFinite;
            } else {
                expected += halfValue(h) * halfValue(h);
            }
        }
        QVERIFY(nonFinite > 0);
        const Fp16Scan scan = scanFp16(delta);
        QCOMPARE(scan.nonFinite, nonFinite);
        // Float lanes of 16 exact squares each: relative error below 16 * 2^-24.
        QVERIFY(std::fabs(scan.sumSquares - expected) <= 1e-6 * expected);
        const std::vector<uint16_t> fine = {0x3c00, 0xc000, 0x0001};  // 1, -2, 2^-24
        const Fp16Scan small = scanFp16(fine);
        QCOMPARE(small.nonFinite, int64_t{0});
        QCOMPARE(small.sumSquares, 1.0 + 4.0 + 0x1p-48);
        QCOMPARE(scanFp16({}).sumSquares, 0.0);
    }

    void threadsChangeNoBit() {
        const int64_t n = (1 << 20) + 13;
        const std::vector<float> start = randomFloats(n, 9, 1.0f);
        std::vector<float> end = randomFloats(n, 10, 1.0f);
        for (int64_t i = 0; i < n; i += 1000)
            end[i] = start[i] - 1e5f;  // some saturate
        std::vector<uint16_t> single(n);
        auto singleStats = encodeDeltaFp16(start, end, single);
        QVERIFY(singleStats.ok());
        std::vector<float> singleSum = randomFloats(n, 11, 1.0f);
        const std::vector<float> initialSum = singleSum;
        accumulateFp16(singleSum, single, 0.37f);
        const Fp16Scan singleScan = scanFp16(single);
        for (int threads : {2, 3, 8}) {
            ThreadPool pool(threads);
            std::vector<uint16_t> out(n);
            auto stats = encodeDeltaFp16(start, end, out, &pool);
            QVERIFY(stats.ok());
            QCOMPARE(stats->saturated, singleStats->saturated);
            QVERIFY(out == single);
            std::vector<float> sum = initialSum;
            accumulateFp16(sum, out, 0.37f, &pool);
            QVERIFY(std::memcmp(sum.data(), singleSum.data(), n * sizeof(float)) == 0);
            const Fp16Scan scan = scanFp16(out, &pool);
            QCOMPARE(scan.nonFinite, singleScan.nonFinite);
            QVERIFY(std::memcmp(&scan.sumSquares, &singleScan.sumSquares, sizeof(double)) == 0);
        }
        QVERIFY(singleStats->saturated >= n / 1000);
    }
};

QTEST_APPLESS_MAIN(TestCodec)
#include "test_codec.moc"
