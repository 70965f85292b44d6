// The int8 pseudo-gradient codec: hand-worked blocks, the half-step error bound against a double
// oracle, zero blocks, a partial last block, NaN/Inf refusal, size errors, weighted accumulation,
// and threads not changing any byte.
#include "codec_int8.hpp"
#include "random_floats.hpp"
#include "thread_pool.hpp"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace tandem;
using testing::randomFloats;

namespace {

struct Encoded {
    std::vector<int8_t> values;
    std::vector<float> scales;
};

// Encodes delta = d - 0 (end all zeros, so start - end is exactly d).
Encoded encode(const std::vector<float>& d, int blockSize, ThreadPool* pool = nullptr) {
    const std::vector<float> zeros(d.size(), 0.0f);
    Encoded e;
    e.values.assign(d.size(), int8_t{99});
    e.scales.assign(static_cast<size_t>(int8BlockCount(static_cast<int64_t>(d.size()), blockSize)),
                    -1.0f);
    auto r = encodeDeltaInt8(d, zeros, blockSize, e.values, e.scales, pool);
    if (!r)
        qFatal("encode failed: %s", r.error().message.c_str());
    return e;
}

std::vector<float> decode(const Encoded& e, int blockSize) {
    std::vector<float> out(e.values.size(), 0.0f);
    auto st = accumulateInt8(out, e.values, e.scales, blockSize, 1.0f);
    if (!st)
        qFatal("accumulate failed: %s", st.error().message.c_str());
    return out;
}

}  // namespace

class TestCodecInt8 : public QObject {
    Q_OBJECT
  private slots:
    void handWorkedBlocks() {
        // Block 0: absmax 127 -> scale 1, values round to nearest (ties to even).
        // Block 1: absmax 2.54 -> scale 0.02; 1.0 / 0.02 = 50, -0.011 / 0.02 = -0.55 -> -1.
        const std::vector<float> d = {127.0f, -127.0f, 3.4f,  -3.6f, 2.5f,    0.5f,
                                      -1.5f,  0.0f,    2.54f, 1.0f,  -0.011f, 0.009f};
        const Encoded e = encode(d, 8);
        QCOMPARE(e.scales.size(), size_t{2});
        QCOMPARE(e.scales[0], 1.0f);
        QCOMPARE(e.scales[1], 2.54f / 127.0f);
        const std::vector<int8_t> want = {127, -127, 3, -4, 2, 0, -2, 0, 127, 50, -1, 0};
        for (size_t i = 0; i < want.size(); ++i)
            QVERIFY2(e.values[i] == want[i], qPrintable(QString("element %1: got %2, expected %3")
                                                            .arg(i)
                                                            .arg(e.values[i])
                                                            .arg(want[i])));
        const std::vector<float> back = decode(e, 8);
        QCOMPARE(back[3], -4.0f);
        QCOMPARE(back[9], 50.0f * (2.54f / 127.0f));
    }

    void startMinusEnd() {
        // The codec encodes start - end, not either alone.
        const std::vector<float> start = {127.0f, 2.0f, 3.0f, 4.0f};
        const std::vector<float> end = {0.0f, 2.0f, 66.5f, 4.0f};  // delta 127, 0, -63.5, 0
        std::vector<int8_t> values(4);
        std::vector<float> scales(1);
        QVERIFY(encodeDeltaInt8(start, end, 4, values, scales).ok());
        QCOMPARE(scales[0], 1.0f);
        QCOMPARE(values, (std::vector<int8_t>{127, 0, -64, 0}));  // -63.5 -> -64 (even)
    }

    void errorBoundPerBlock() {
        // Blocks of very different magnitudes: each block's error is bounded by its own absmax.
        const int S = 256;
        const int64_t n = 40 * S + 77;
        std::vector<float> d = randomFloats(n, 7, 1.0f);
        for (int64_t i = 0; i < n; ++i)
            d[i] *= std::ldexp(1.0f, static_cast<int>(i / S) % 30 - 20);
        d[5] = 1e6f;  // one outlier only coarsens its own block
        const Encoded e = encode(d, S);
        const std::vector<float> back = decode(e, S);
        for (int64_t b = 0; b < int8BlockCount(n, S); ++b) {
            const int64_t lo = b * S, hi = std::min(n, lo + S);
            double absmax = 0;
            for (int64_t i = lo; i < hi; ++i)
                absmax = std::max(absmax, std::fabs(static_cast<double>(d[i])));
            // Half a step, plus the fp32 rounding of the scale and of q * scale.
            const double bound = absmax / 254.0 * (1.0 + 1e-5);
            for (int64_t i = lo; i < hi; ++i) {
                const double err = std::fabs(static_cast<double>(d[i]) - back[i]);
                QVERIFY2(err <= bound, qPrintable(QString("element %1 (block %2): error %3 > %4")
                                                      .arg(i)
                                                      .arg(b)
                                                      .arg(err)
                                                      .arg(bound)));
                QVERIFY(e.values[i] >= -127);
            }
            // The largest element of a block is exact up to the scale's rounding.
            QVERIFY(std::fabs(std::fabs(static_cast<double>(e.scales[b])) * 127.0 - absmax) <=
                    absmax * 1e-6);
        }
        // Small blocks next to the outlier keep their precision.
        QVERIFY(std::fabs(d[S + 3] - back[S + 3]) <= std::fabs(e.scales[1]));
    }

    void zeroBlocksAndPartialLastBlock() {
        const int S = 16;
        std::vector<float> d(3 * S + 5, 0.0f);  // block 3 holds 5 elements
        for (int i = S; i < 2 * S; ++i)
            d[i] = 0.25f * static_cast<float>(i - S) - 2.0f;
        d[3 * S + 4] = -0.3f;  // the very last element
        const Encoded e = encode(d, S);
        QCOMPARE(e.scales.size(), size_t{4});
        QCOMPARE(e.scales[0], 0.0f);
        QCOMPARE(e.scales[2], 0.0f);
        QCOMPARE(e.scales[3], 0.3f / 127.0f);
        for (int i = 0; i < S; ++i) {
            QCOMPARE(e.values[i], int8_t{0});
            QCOMPARE(e.values[2 * S + i], int8_t{0});
        }
        QCOMPARE(e.values[3 * S + 4], int8_t{-127});
        const std::vector<float> back = decode(e, S);
        for (int i = 0; i < S; ++i)
            QCOMPARE(back[i], 0.0f);
        QCOMPARE(back[3 * S + 4], -127.0f * (0.3f / 127.0f));
        QCOMPARE(int8EncodedBytes(3 * S + 5, S), int64_t{3 * S + 5 + 4 * 4});
        // A negative zero delta block decodes to zeros too.
        const Encoded z = encode(std::vector<float>(S, -0.0f), S);
        QCOMPARE(z.scales[0], 0.0f);
    }

    void nanAndInfAreRefused() {
        for (float bad :
             {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
              -std::numeric_limits<float>::infinity()}) {
            std::vector<float> d = randomFloats(1000, 3, 0.01f);
            d[700] = bad;
            d[900] = bad;
            const std::vector<float> zeros(d.size(), 0.0f);
            std::vector<int8_t> values(d.size());
            std::vector<float> scales(static_cast<size_t>(int8BlockCount(1000, 256)));
            auto r = encodeDeltaInt8(d, zeros, 256, values, scales);
            QVERIFY(!r.ok());
            QVERIFY2(r.error().message.find("2 non-finite") != std::string::npos,
                     r.error().message.c_str());
            QVERIFY2(r.error().message.find("parameter 700") != std::string::npos,
                     r.error().message.c_str());
        }
        // Finite start and end whose difference overflows are refused too.
        const std::vector<float> start = {3e38f, 0.0f}, end = {-3e38f, 0.0f};
        std::vector<int8_t> values(2);
        std::vector<float> scales(1);
        QVERIFY(!encodeDeltaInt8(start, end, 4, values, scales).ok());
    }

    void sizeErrors() {
        const std::vector<float> a(10, 1.0f), b(10, 0.0f);
        std::vector<int8_t> values(10);
        std::vector<float> scales(3);  // blocks of 4 -> 3 scales
        QVERIFY(encodeDeltaInt8(a, b, 4, values, scales).ok());
        std::vector<float> twoScales(2);
        QVERIFY(!encodeDeltaInt8(a, b, 4, values, twoScales).ok());
        QVERIFY(!encodeDeltaInt8(a, b, 0, values, scales).ok());
        std::vector<int8_t> shortValues(9);
        QVERIFY(!encodeDeltaInt8(a, b, 4, shortValues, scales).ok());
        std::vector<float> sum(10);
        QVERIFY(!accumulateInt8(sum, values, twoScales, 4, 1.0f).ok());
        QVERIFY(!accumulateInt8(sum, shortValues, scales, 4, 1.0f).ok());
    }

    void weightedAccumulate() {
        const int S = 64;
        const std::vector<float> d = randomFloats(5 * S + 3, 11, 0.1f);
        const Encoded e = encode(d, S);
        std::vector<float> sum = randomFloats(static_cast<int64_t>(d.size()), 12, 1.0f);
        const std::vector<float> before = sum;
        QVERIFY(accumulateInt8(sum, e.values, e.scales, S, 0.375f).ok());
        for (size_t i = 0; i < d.size(); ++i) {
            const double decoded =
                static_cast<double>(e.values[i]) * static_cast<double>(e.scales[i / S]);
            const double want = before[i] + 0.375 * decoded;
            QVERIFY2(std::fabs(sum[i] - want) <= 1e-6 * (std::fabs(want) + 1.0),
                     qPrintable(QString("element %1: %2 vs %3").arg(i).arg(sum[i]).arg(want)));
        }
    }

    void threadsGiveTheSameBytes() {
        const int S = 256;
        const int64_t n = (1 << 19) + 1234;  // several pieces per thread, partial last block
        const std::vector<float> start = randomFloats(n, 21, 0.05f);
        const std::vector<float> end = randomFloats(n, 22, 0.05f);
        const int64_t blocks = int8BlockCount(n, S);
        std::vector<int8_t> v1(n), v4(n);
        std::vector<float> s1(blocks), s4(blocks);
        QVERIFY(encodeDeltaInt8(start, end, S, v1, s1).ok());
        ThreadPool pool(4);
        QVERIFY(encodeDeltaInt8(start, end, S, v4, s4, &pool).ok());
        QVERIFY(std::memcmp(v1.data(), v4.data(), v1.size()) == 0);
        QVERIFY(std::memcmp(s1.data(), s4.data(), s1.size() * sizeof(float)) == 0);

        std::vector<float> sum1 = randomFloats(n, 23, 1.0f), sum4 = sum1;
        QVERIFY(accumulateInt8(sum1, v1, s1, S, 0.7f).ok());
        QVERIFY(accumulateInt8(sum4, v4, s4, S, 0.7f, &pool).ok());
        QVERIFY(std::memcmp(sum1.data(), sum4.data(), sum1.size() * sizeof(float)) == 0);

        // NaN in a block a helper thread handles is still found, with the right first index.
        std::vector<float> bad = start;
        bad[n - 10] = std::numeric_limits<float>::quiet_NaN();
        auto r = encodeDeltaInt8(bad, end, S, v4, s4, &pool);
        QVERIFY(!r.ok());
        QVERIFY2(r.error().message.find("parameter " + std::to_string(n - 10)) != std::string::npos,
                 r.error().message.c_str());
    }
};

QTEST_APPLESS_MAIN(TestCodecInt8)
#include "test_codec_int8.moc"
