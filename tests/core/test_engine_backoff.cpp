// The engine's backoff (core/engine_backoff.hpp and backoffDelayMs in engine.hpp): the formula
// at its edges, the waits growing after each failure and starting over after a success, the
// server's Retry-After winning, the same seed giving the same jittered waits, "no work" shown as
// Idle, and waitIfEarly() showing the wait and ending with the clock.
#include "engine_backoff.hpp"
#include "engine_parts_fixture.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;

namespace {

EngineConfig exactDelays() {
    EngineConfig c;
    c.backoffInitialMs = 2000;
    c.backoffMaxMs = 10000;
    c.backoffJitter = 0;
    c.maxRetryAfterMs = 60000;
    return c;
}

}  // namespace

class TestEngineBackoff : public QObject {
    Q_OBJECT

  private slots:
    void formulaEdges() {
        EngineConfig c = exactDelays();
        c.backoffJitter = 0.5;
        QCOMPARE(backoffDelayMs(c, 0, 0.0, std::nullopt), int64_t{2000});   // as the first
        QCOMPARE(backoffDelayMs(c, -3, 0.0, std::nullopt), int64_t{2000});  // as the first
        QCOMPARE(backoffDelayMs(c, 1000000, 0.0, std::nullopt), int64_t{10000});
        QCOMPARE(backoffDelayMs(c, 2, 7.0, std::nullopt), int64_t{2000});   // u clamped to 1
        QCOMPARE(backoffDelayMs(c, 2, -1.0, std::nullopt), int64_t{4000});  // u clamped to 0
        c.backoffJitter = 3;  // clamped to 1: the whole wait may go
        QCOMPARE(backoffDelayMs(c, 2, 1.0, std::nullopt), int64_t{0});
        QCOMPARE(backoffDelayMs(c, 2, 0.25, std::nullopt), int64_t{3000});
        QCOMPARE(backoffDelayMs(c, 2, 0.25, int64_t{-5}), int64_t{0});  // Retry-After >= 0
        QCOMPARE(backoffDelayMs(c, 2, 0.25, int64_t{0}), int64_t{0});
    }

    void waitsGrowThenStartOver() {
        EnginePartsFixture f(exactDelays());
        QVERIFY(f.shared);
        EngineBackoff b(*f.shared);
        QCOMPARE(b.notBeforeMs(), int64_t{0});
        const ApiFailure down = apiFailure("connection refused", true);
        for (int64_t expected : {2000, 4000, 8000, 10000, 10000}) {
            b.fail("asking for work failed", down);
            QCOMPARE(b.notBeforeMs() - kPartsStart, expected);
        }
        QCOMPARE(f.recorder.lastLog(),
                 std::string("asking for work failed: connection refused (retry in 10 s)"));
        b.succeeded();
        b.fail("asking for work failed", down);
        QCOMPARE(b.notBeforeMs() - kPartsStart, int64_t{2000});
        // The failures are in the ledger's events (warnings).
        EventFilter warnings;
        warnings.minLevel = EventLevel::Warning;
        auto events = f.ledger->events(warnings);
        QVERIFY(events);
        QCOMPARE(events->size(), size_t{6});
    }

    void retryAfterWinsAndIsCapped() {
        EnginePartsFixture f(exactDelays());
        QVERIFY(f.shared);
        EngineBackoff b(*f.shared);
        b.fail("x", apiFailure("busy", true, int64_t{7000}, "busy", 503));
        QCOMPARE(b.notBeforeMs() - kPartsStart, int64_t{7000});
        b.fail("x", apiFailure("busy", true, int64_t{3600000}, "busy", 503));
        QCOMPARE(b.notBeforeMs() - kPartsStart, int64_t{60000});  // maxRetryAfterMs
        // Without it, the attempts counted meanwhile still count.
        b.fail("x", apiFailure("down", true));
        QCOMPARE(b.notBeforeMs() - kPartsStart, int64_t{8000});
    }

    void jitterFollowsTheSeed() {
        EngineConfig c = exactDelays();
        c.backoffJitter = 0.5;
        c.jitterSeed = 7;
        auto waits = [&](const EngineConfig& config) {
            EnginePartsFixture f(config);
            EngineBackoff b(*f.shared);
            std::vector<int64_t> out;
            for (int i = 0; i < 6; ++i) {
                b.fail("x", apiFailure("down", true));
                out.push_back(b.notBeforeMs() - kPartsStart);
            }
            return out;
        };
        const auto a = waits(c);
        QVERIFY(a == waits(c));
        const int64_t full[] = {2000, 4000, 8000, 10000, 10000, 10000};
        bool anyReduced = false;
        for (size_t i = 0; i < a.size(); ++i) {
            QVERIFY2(a[i] <= full[i] && a[i] >= full[i] / 2, std::to_string(a[i]).c_str());
            anyReduced = anyReduced || a[i] < full[i];
        }
        QVERIFY(anyReduced);
        c.jitterSeed = 8;
        QVERIFY(a != waits(c));
    }

    void waitIfEarlyShowsTheWaitUntilTheClockPassesIt() {
        EnginePartsFixture f(exactDelays());
        QVERIFY(f.shared);
        EngineBackoff b(*f.shared);
        QVERIFY(!b.waitIfEarly());  // nothing failed yet
        b.failLocal("disk full");
        QVERIFY(b.waitIfEarly());
        auto s = f.snap();
        QCOMPARE(s.state, EngineState::Backoff);
        QCOMPARE(s.reason, std::string("error: disk full"));
        QCOMPARE(s.stateText, s.reason);
        QCOMPARE(s.nextActionAtMs, std::optional<int64_t>(kPartsStart + 2000));
        f.clock.advanceMs(1999);
        QVERIFY(b.waitIfEarly());
        f.clock.advanceMs(1);
        QVERIFY(!b.waitIfEarly());
    }

    // The snapshot says what kind of trouble a backoff is, as a code (the UI words it): the
    // transport's kind where it knows, else the HTTP status and the words; cleared once the
    // state moves on.
    void backoffCarriesTheProblemAsACode() {
        EnginePartsFixture f(exactDelays());
        QVERIFY(f.shared);
        EngineBackoff b(*f.shared);
        auto problemAfter = [&](const ApiFailure& failure) {
            b.fail("asking for work failed", failure);
            b.waitIfEarly();
            f.clock.advanceMs(60000);
            return f.snap().problem;
        };
        ApiFailure refused = apiFailure("connection refused by 127.0.0.1:9", true);
        refused.problem = Problem::Unreachable;
        QCOMPARE(problemAfter(refused), Problem::Unreachable);
        QCOMPARE(f.snap().problemDetail,
                 std::string("asking for work failed: connection refused by 127.0.0.1:9"));
        ApiFailure pin = apiFailure("the server's public key is not the pinned one", true);
        pin.problem = Problem::WrongPin;
        QCOMPARE(problemAfter(pin), Problem::WrongPin);
        QVERIFY(needsAttention(f.snap().problem));
        QCOMPARE(problemAfter(apiFailure("unknown token", false, {}, "unauthorized", 401)),
                 Problem::Unauthorized);
        QCOMPARE(problemAfter(apiFailure("busy", true, {}, "busy", 503)), Problem::ServerBusy);
        QVERIFY(!needsAttention(f.snap().problem));
        b.failLocal("cannot write /data/ckpt: No space left on device");
        b.waitIfEarly();
        QCOMPARE(f.snap().problem, Problem::DiskFull);
        f.clock.advanceMs(60000);
        QCOMPARE(problemAfter(apiFailure(
                     "manifest: protocol version 3 is not supported, expected 2", false)),
                 Problem::ProtocolMismatch);
        QCOMPARE(problemAfter(apiFailure("odd answer", true)), Problem::Other);
        // Idle (no work) is no problem.
        b.idleUntil(f.clock.nowMs() + 30000, "no work available");
        QVERIFY(b.waitIfEarly());
        QCOMPARE(f.snap().problem, Problem::None);
        QVERIFY(f.snap().problemDetail.empty());
    }

    void noWorkIsIdleAndResetsTheAttempts() {
        EnginePartsFixture f(exactDelays());
        QVERIFY(f.shared);
        EngineBackoff b(*f.shared);
        b.fail("x", apiFailure("down", true));
        b.fail("x", apiFailure("down", true));
        b.idleUntil(kPartsStart + 30000, "no work available");
        QVERIFY(b.waitIfEarly());
        QCOMPARE(f.snap().state, EngineState::Idle);
        QCOMPARE(f.snap().reason, std::string("no work available"));
        b.fail("x", apiFailure("down", true));
        QCOMPARE(b.notBeforeMs() - kPartsStart, int64_t{2000});
    }
};

QTEST_APPLESS_MAIN(TestEngineBackoff)
#include "test_engine_backoff.moc"
