// The one backoff formula: doubling, the cap, the jitter's range, Retry-After.
#include "backoff.hpp"

#include <QtTest>

using namespace tandem;

namespace {

BackoffPolicy policy(double jitter = 0.5) {
    return BackoffPolicy{
        .initialMs = 1000, .maxMs = 10000, .jitter = jitter, .maxRetryAfterMs = 60000};
}

}  // namespace

class TestBackoff : public QObject {
    Q_OBJECT
  private slots:
    void doublesFromTheInitialWait() {
        const BackoffPolicy p = policy();
        QCOMPARE(backoffDelayMs(p, 1, 0.0), int64_t{1000});
        QCOMPARE(backoffDelayMs(p, 2, 0.0), int64_t{2000});
        QCOMPARE(backoffDelayMs(p, 3, 0.0), int64_t{4000});
        QCOMPARE(backoffDelayMs(p, 4, 0.0), int64_t{8000});
        // Attempts before the first count as the first.
        QCOMPARE(backoffDelayMs(p, 0, 0.0), int64_t{1000});
        QCOMPARE(backoffDelayMs(p, -3, 0.0), int64_t{1000});
    }

    void stopsAtTheCap() {
        const BackoffPolicy p = policy();
        QCOMPARE(backoffDelayMs(p, 5, 0.0), int64_t{10000});
        QCOMPARE(backoffDelayMs(p, 50, 0.0), int64_t{10000});
        // No overflow however many attempts failed.
        QCOMPARE(backoffDelayMs(p, std::numeric_limits<int>::max(), 0.0), int64_t{10000});
        // A cap below the initial wait wins.
        BackoffPolicy low = p;
        low.maxMs = 300;
        QCOMPARE(backoffDelayMs(low, 1, 0.0), int64_t{300});
    }

    void jitterTakesUpToItsFractionOff() {
        const BackoffPolicy p = policy(0.5);
        QCOMPARE(backoffDelayMs(p, 3, 1.0), int64_t{2000});  // half off at most
        QCOMPARE(backoffDelayMs(p, 3, 0.5), int64_t{3000});
        QCOMPARE(backoffDelayMs(p, 3, 0.25), int64_t{3500});
        for (int attempt = 1; attempt <= 8; ++attempt) {
            const int64_t b = std::min<int64_t>(int64_t{1000} << (attempt - 1), 10000);
            for (int i = 0; i <= 100; ++i) {
                const int64_t d = backoffDelayMs(p, attempt, i / 100.0);
                QVERIFY2(d >= b / 2 && d <= b,
                         qPrintable(
                             QString("attempt %1 u %2: %3 ms").arg(attempt).arg(i / 100.0).arg(d)));
            }
        }
        // u outside [0, 1] is clamped.
        QCOMPARE(backoffDelayMs(p, 3, -2.0), int64_t{4000});
        QCOMPARE(backoffDelayMs(p, 3, 7.0), int64_t{2000});
    }

    void jitterIsClampedToAFraction() {
        QCOMPARE(backoffDelayMs(policy(0.0), 3, 0.9), int64_t{4000});  // exact
        QCOMPARE(backoffDelayMs(policy(1.0), 3, 1.0), int64_t{0});
        QCOMPARE(backoffDelayMs(policy(3.0), 3, 0.5), int64_t{2000});   // as 1.0
        QCOMPARE(backoffDelayMs(policy(-1.0), 3, 0.5), int64_t{4000});  // as 0.0
    }

    void retryAfterWins() {
        const BackoffPolicy p = policy();
        QCOMPARE(backoffDelayMs(p, 3, 0.5, int64_t{7000}), int64_t{7000});
        QCOMPARE(backoffDelayMs(p, 1, 0.0, int64_t{45000}), int64_t{45000});  // above maxMs
        QCOMPARE(backoffDelayMs(p, 1, 0.0, int64_t{0}), int64_t{0});
        QCOMPARE(backoffDelayMs(p, 1, 0.0, int64_t{999999999}), int64_t{60000});  // capped
        QCOMPARE(backoffDelayMs(p, 1, 0.0, int64_t{-5}), int64_t{0});
        QCOMPARE(backoffDelayMs(p, 2, 0.0, std::nullopt), int64_t{2000});
    }
};

QTEST_APPLESS_MAIN(TestBackoff)
#include "test_backoff.moc"
