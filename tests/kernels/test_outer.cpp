// The outer Nesterov step (DESIGN.md §3) against values worked out by hand, and threads not
// changing any bit.
#include "outer.hpp"
#include "random.hpp"
#include "thread_pool.hpp"

#include <QtTest>

#include <cstring>
#include <vector>

using namespace tandem;

class TestOuter : public QObject {
    Q_OBJECT
  private slots:
    void defaults() {
        const OuterConfig config;
        QCOMPARE(config.lr, 0.35f);
        QCOMPARE(config.momentum, 0.9f);
    }

    // lr 0.5, mu 0.5, deltaScale 0.25 (four workers of weight 1): every number is a short
    // binary fraction, so float arithmetic is exact and the comparison is exact.
    void handWorkedExact() {
        std::vector<float> theta = {1.0f, -2.0f};
        std::vector<float> velocity = {0.0f, 1.0f};
        const OuterConfig config{0.5f, 0.5f};
        // Step 1, deltaSum {2, 0}:
        //   [0] d = 0.25*2 = 0.5;  v = 0.5*0 + 0.5 = 0.5;  theta = 1 - 0.5*(0.5 + 0.5*0.5) = 0.625
        //   [1] d = 0;  v = 0.5*1 + 0 = 0.5;  theta = -2 - 0.5*(0 + 0.25) = -2.125
        outerNesterovStep(theta, velocity, std::vector<float>{2.0f, 0.0f}, 0.25f, config);
        QCOMPARE(theta, (std::vector<float>{0.625f, -2.125f}));
        QCOMPARE(velocity, (std::vector<float>{0.5f, 0.5f}));
        // Step 2, deltaSum {-4, 1}:
        //   [0] d = -1;  v = 0.25 - 1 = -0.75;  theta = 0.625 - 0.5*(-1 - 0.375) = 1.3125
        //   [1] d = 0.25;  v = 0.25 + 0.25 = 0.5;  theta = -2.125 - 0.5*(0.25 + 0.25) = -2.375
        outerNesterovStep(theta, velocity, std::vector<float>{-4.0f, 1.0f}, 0.25f, config);
        QCOMPARE(theta, (std::vector<float>{1.3125f, -2.375f}));
        QCOMPARE(velocity, (std::vector<float>{-0.75f, 0.5f}));
        // Step 3, deltaSum {8, -2}:
        //   [0] d = 2;  v = -0.375 + 2 = 1.625;  theta = 1.3125 - 0.5*(2 + 0.8125) = -0.09375
        //   [1] d = -0.5;  v = 0.25 - 0.5 = -0.25;  theta = -2.375 - 0.5*(-0.5 - 0.125) = -2.0625
        outerNesterovStep(theta, velocity, std::vector<float>{8.0f, -2.0f}, 0.25f, config);
        QCOMPARE(theta, (std::vector<float>{-0.09375f, -2.0625f}));
        QCOMPARE(velocity, (std::vector<float>{1.625f, -0.25f}));
    }

    // The DiLoCo paper's lr 0.7, mu 0.9 with deltaScale 1/3 (three workers): decimal hand
    // arithmetic, compared within float rounding.
    void handWorkedPaperSettings() {
        std::vector<float> theta = {0.5f};
        std::vector<float> velocity = {0.1f};
        OuterConfig config;
        config.lr = 0.7f;  // mu 0.9: the default
        const float scale = 1.0f / 3.0f;
        // Step 1, deltaSum 0.3: d = 0.1;  v = 0.09 + 0.1 = 0.19;
        //   theta = 0.5 - 0.7*(0.1 + 0.9*0.19) = 0.5 - 0.7*0.271 = 0.5 - 0.1897 = 0.3103
        outerNesterovStep(theta, velocity, std::vector<float>{0.3f}, scale, config);
        QVERIFY(qAbs(velocity[0] - 0.19f) < 1e-6f);
        QVERIFY(qAbs(theta[0] - 0.3103f) < 1e-6f);
        // Step 2, deltaSum 0.3: d = 0.1;  v = 0.171 + 0.1 = 0.271;
        //   theta = 0.3103 - 0.7*(0.1 + 0.2439) = 0.3103 - 0.24073 = 0.06957
        outerNesterovStep(theta, velocity, std::vector<float>{0.3f}, scale, config);
        QVERIFY(qAbs(velocity[0] - 0.271f) < 1e-6f);
        QVERIFY(qAbs(theta[0] - 0.06957f) < 1e-6f);
        // Step 3, deltaSum -0.6: d = -0.2;  v = 0.2439 - 0.2 = 0.0439;
        //   theta = 0.06957 - 0.7*(-0.2 + 0.03951) = 0.06957 + 0.112343 = 0.181913
        outerNesterovStep(theta, velocity, std::vector<float>{-0.6f}, scale, config);
        QVERIFY(qAbs(velocity[0] - 0.0439f) < 1e-6f);
        QVERIFY2(qAbs(theta[0] - 0.181913f) < 1e-6f, qPrintable(QString::number(theta[0], 'g', 9)));
    }

    void threadsChangeNoBit() {
        const size_t n = (1 << 20) + 7;
        Rng rng(3);
        std::vector<float> theta(n), velocity(n), deltaSum(n);
        for (size_t i = 0; i < n; ++i) {
            theta[i] = rng.normal();
            velocity[i] = 0.1f * rng.normal();
            deltaSum[i] = 0.01f * rng.normal();
        }
        std::vector<float> thetaSingle = theta, velocitySingle = velocity;
        for (int step = 0; step < 2; ++step) {
            outerNesterovStep(thetaSingle, velocitySingle, deltaSum, 0.3f, OuterConfig{});
        }
        for (int threads : {2, 3}) {
            ThreadPool pool(threads);
            std::vector<float> t = theta, v = velocity;
            for (int step = 0; step < 2; ++step) {
                outerNesterovStep(t, v, deltaSum, 0.3f, OuterConfig{}, &pool);
            }
            QVERIFY(std::memcmp(t.data(), thetaSingle.data(), n * sizeof(float)) == 0);
            QVERIFY(std::memcmp(v.data(), velocitySingle.data(), n * sizeof(float)) == 0);
        }
        QVERIFY(thetaSingle != theta);
    }
};

QTEST_APPLESS_MAIN(TestOuter)
#include "test_outer.moc"
