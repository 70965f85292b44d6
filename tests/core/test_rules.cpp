// Local time conversions, the scheduling rules with injected inputs, and snooze times.
// Epoch values were computed independently (Python datetime) and written out as numbers.
#include "rules.hpp"

#include <QtTest>

#include <ctime>

using namespace tandem::core;

namespace {

const FixedOffsetTimeZone kCet(3600);  // UTC+1, no daylight saving
// Central Europe 2026: UTC+1 until 2026-03-29 01:00Z, then UTC+2.
const SwitchingTimeZone kSpring(3600, 1774746000, 7200);
// Autumn: UTC+2 until 2026-10-25 01:00Z, then UTC+1 (02:00..03:00 local happens twice).
const SwitchingTimeZone kAutumn(7200, 1792890000, 3600);

// 2026-03-09 is a Monday.
int64_t local(int day, int hour, int minute, const TimeZone& zone = kCet) {
    return fromLocal({2026, 3, day}, hour * 60 + minute, zone);
}

RulesConfig nightWindows() {
    RulesConfig c;
    c.useTimeWindows = true;
    c.timeWindows = {{TimeWindow::kWeekdays, 18 * 60, 8 * 60}};  // Mon-Fri 18:00-08:00
    return c;
}

RuleInputs at(int64_t nowMs) {
    RuleInputs in;
    in.nowMs = nowMs;
    return in;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

class TestRules : public QObject {
    Q_OBJECT
  private slots:
    // --- clock.hpp ---

    void calendarArithmetic() {
        QCOMPARE((LocalDate{1970, 1, 1}).daysSinceEpoch(), int64_t{0});
        QCOMPARE((LocalDate{1969, 12, 31}).daysSinceEpoch(), int64_t{-1});
        QCOMPARE((LocalDate{2000, 3, 1}).daysSinceEpoch(), int64_t{11017});
        QCOMPARE((LocalDate{2026, 3, 9}).daysSinceEpoch(), int64_t{20521});
        QCOMPARE((LocalDate{1600, 2, 29}).daysSinceEpoch(), int64_t{-135081});
        QCOMPARE(LocalDate::fromDaysSinceEpoch(-135081), (LocalDate{1600, 2, 29}));
        for (int64_t d = -800000; d < 800000; d += 997) {
            QCOMPARE(LocalDate::fromDaysSinceEpoch(d).daysSinceEpoch(), d);
        }
        QCOMPARE((LocalDate{1970, 1, 1}).weekday(), 3);  // Thursday
        QCOMPARE((LocalDate{2026, 3, 9}).weekday(), 0);  // Monday
        QCOMPARE((LocalDate{2026, 3, 15}).weekday(), 6);
        QCOMPARE((LocalDate{2026, 2, 28}).plusDays(1), (LocalDate{2026, 3, 1}));
        QCOMPARE((LocalDate{2028, 2, 28}).plusDays(1), (LocalDate{2028, 2, 29}));
        QCOMPARE((LocalDate{2026, 3, 9}).toString(), std::string("2026-03-09"));
    }

    void localConversions() {
        const LocalDateTime t = toLocal(1773091800000, kCet);  // 2026-03-09 21:30Z
        QCOMPARE(t.date, (LocalDate{2026, 3, 9}));
        QCOMPARE(t.minuteOfDay, 22 * 60 + 30);
        QCOMPARE(local(9, 17, 59), int64_t{1773075540000});
        QCOMPARE(local(9, 18, 0), int64_t{1773075600000});
        QCOMPARE(local(10, 0, 0), int64_t{1773097200000});
        QCOMPARE(toLocal(-1, FixedOffsetTimeZone(0)).date, (LocalDate{1969, 12, 31}));
        QCOMPARE(toLocal(-1, FixedOffsetTimeZone(0)).second, 59);
        // Spring forward: 02:30 on Mar 29 does not exist; it maps to the end of the gap.
        QCOMPARE(fromLocal({2026, 3, 29}, 2 * 60 + 30, kSpring), int64_t{1774746000000});
        QCOMPARE(fromLocal({2026, 3, 29}, 0, kSpring), int64_t{1774738800000});
        QCOMPARE(fromLocal({2026, 3, 30}, 0, kSpring), int64_t{1774821600000});
        // Fall back: 02:30 on Oct 25 happens twice; the first is 00:30Z.
        QCOMPARE(fromLocal({2026, 10, 25}, 2 * 60 + 30, kAutumn), int64_t{1792888200000});
        QCOMPARE(formatMinuteOfDay(0), std::string("00:00"));
        QCOMPARE(formatMinuteOfDay(18 * 60 + 5), std::string("18:05"));
    }

    // The process's zone through localtime_r, with a zone from the tz database.
    void systemTimeZone() {
        if (!QFile::exists("/usr/share/zoneinfo/Europe/Berlin"))
            QSKIP("no tz database here");
        const QByteArray saved = qgetenv("TZ");
        qputenv("TZ", "Europe/Berlin");
        tzset();
        const SystemTimeZone zone;
        const int32_t before = zone.utcOffsetSecondsAt(1774745999);
        const int32_t after = zone.utcOffsetSecondsAt(1774746000);
        const int64_t midnight = fromLocal({2026, 3, 30}, 0, zone);
        if (saved.isNull()) {
            qunsetenv("TZ");
        } else {
            qputenv("TZ", saved);
        }
        tzset();
        QCOMPARE(before, 3600);
        QCOMPARE(after, 7200);
        QCOMPARE(midnight, int64_t{1774821600000});
    }

    // --- rules ---

    void nothingConfiguredAllows() {
        RuleInputs in = at(local(9, 12, 0));
        in.power = PowerSource::Battery;  // pauseOnBattery is on by default
        RulesConfig c;
        c.pauseOnBattery = false;
        in.idleSeconds = 0;
        in.temperatureC = 99;
        in.bytesUpToday = int64_t{1} << 40;
        const RulesVerdict v = evaluateRules(c, in, kCet);
        QVERIFY(v.allowed());
        QCOMPARE(v.reason(), std::string());
        QVERIFY(!v.freeUntilMs.has_value());
    }

    void battery() {
        RulesConfig c;
        RuleInputs in = at(local(9, 12, 0));
        in.power = PowerSource::Battery;
        RulesVerdict v = evaluateRules(c, in, kCet);
        QVERIFY(!v.allowed());
        QCOMPARE(v.holds.size(), size_t{1});
        QCOMPARE(v.holds[0].rule, Rule::OnBattery);
        QCOMPARE(v.reason(), std::string("Waiting: on battery"));
        QVERIFY(!v.holds[0].mayChangeAtMs.has_value());
        in.power = PowerSource::Mains;
        QVERIFY(evaluateRules(c, in, kCet).allowed());
        in.power = PowerSource::Unknown;  // a desktop without power-supply information
        QVERIFY(evaluateRules(c, in, kCet).allowed());
    }

    void idle() {
        RulesConfig c;
        c.onlyWhenIdle = true;
        c.idleThresholdSeconds = 300;
        RuleInputs in = at(local(9, 12, 0));
        in.idleSeconds = 60;
        RulesVerdict v = evaluateRules(c, in, kCet);
        QVERIFY(!v.allowed());
        QCOMPARE(v.holds[0].rule, Rule::UserActive);
        QCOMPARE(v.reason(), std::string("Waiting: computer in use (resumes after 5 min idle)"));
        QCOMPARE(v.holds[0].mayChangeAtMs.value(), in.nowMs + 240 * 1000);
        in.idleSeconds = 299;
        QVERIFY(!evaluateRules(c, in, kCet).allowed());
        in.idleSeconds = 300;
        QVERIFY(evaluateRules(c, in, kCet).allowed());
        QCOMPARE(v.holds[0].idleThresholdSeconds, int64_t{300});
        c.onlyWhenIdle = false;
        in.idleSeconds = 0;
        QVERIFY(evaluateRules(c, in, kCet).allowed());
    }

    // No idle source (no desktop session, no X display): "only when idle" cannot be followed, so
    // it holds; it never works as if the computer were idle.
    void unknownIdleTimeHolds() {
        RulesConfig c;
        c.onlyWhenIdle = true;
        RuleInputs in = at(local(9, 12, 0));
        in.idleSeconds.reset();
        const RulesVerdict v = evaluateRules(c, in, kCet);
        QVERIFY(!v.allowed());
        QCOMPARE(v.holds.size(), size_t{1});
        QCOMPARE(v.holds[0].rule, Rule::IdleUnknown);
        QVERIFY(!v.holds[0].mayChangeAtMs.has_value());
        QVERIFY(contains(v.reason(), "cannot tell whether the computer is in use"));
        c.onlyWhenIdle = false;
        QVERIFY(evaluateRules(c, in, kCet).allowed());
    }

    void timeWindowAcrossMidnightOnWeekdays_data() {
        QTest::addColumn<qint64>("now");
        QTest::addColumn<bool>("allowed");
        QTest::addColumn<QString>("reason");
        QTest::addColumn<qint64>("change");  // mayChangeAtMs when held, freeUntilMs when free
        QTest::newRow("Mon 17:59")
            << qint64(local(9, 17, 59)) << false
            << "Waiting: outside the time window (resumes at 18:00)" << qint64(local(9, 18, 0));
        QTest::newRow("Mon 18:00")
            << qint64(local(9, 18, 0)) << true << "" << qint64(local(10, 8, 0));
        QTest::newRow("Tue 07:59 (Monday's window)")
            << qint64(local(10, 7, 59)) << true << "" << qint64(local(10, 8, 0));
        QTest::newRow("Tue 08:00")
            << qint64(local(10, 8, 0)) << false
            << "Waiting: outside the time window (resumes at 18:00)" << qint64(local(10, 18, 0));
        QTest::newRow("Sat 07:00 (Friday's window)")
            << qint64(local(14, 7, 0)) << true << "" << qint64(local(14, 8, 0));
        QTest::newRow("Sat 08:00")
            << qint64(local(14, 8, 0)) << false
            << "Waiting: outside the time window (resumes on Monday at 18:00)"
            << qint64(local(16, 18, 0));
        QTest::newRow("Sun 12:00") << qint64(local(15, 12, 0)) << false
                                   << "Waiting: outside the time window (resumes tomorrow at 18:00)"
                                   << qint64(local(16, 18, 0));
        QTest::newRow("Mon 03:00 (Sunday not chosen)")
            << qint64(local(16, 3, 0)) << false
            << "Waiting: outside the time window (resumes at 18:00)" << qint64(local(16, 18, 0));
    }
    void timeWindowAcrossMidnightOnWeekdays() {
        QFETCH(qint64, now);
        QFETCH(bool, allowed);
        QFETCH(QString, reason);
        QFETCH(qint64, change);
        const RulesVerdict v = evaluateRules(nightWindows(), at(now), kCet);
        QCOMPARE(v.allowed(), allowed);
        QCOMPARE(QString::fromStdString(v.reason()), reason);
        if (allowed) {
            QCOMPARE(v.freeUntilMs.value(), change);
        } else {
            QCOMPARE(v.holds[0].rule, Rule::OutsideTimeWindow);
            QCOMPARE(v.holds[0].mayChangeAtMs.value(), change);
            QVERIFY(!v.freeUntilMs.has_value());
        }
    }

    void overlappingWindowsMerge() {
        RulesConfig c = nightWindows();
        constexpr uint8_t kWeekend = 0x60;
        c.timeWindows.push_back({kWeekend, 0, 0});  // Sat and Sun, 24 hours each
        // Fri 18:00 .. Mon 00:00 is one stretch (no window starts on Sunday evening).
        RulesVerdict v = evaluateRules(c, at(local(14, 12, 0)), kCet);
        QVERIFY(v.allowed());
        QCOMPARE(v.freeUntilMs.value(), local(16, 0, 0));
        v = evaluateRules(c, at(local(13, 19, 0)), kCet);
        QCOMPARE(v.freeUntilMs.value(), local(16, 0, 0));
        QVERIFY(!evaluateRules(c, at(local(16, 0, 0)), kCet).allowed());
        // With Sunday evenings too, it runs on to Mon 08:00.
        c.timeWindows[0].weekdays = TimeWindow::kWeekdays | 0x40;
        QCOMPARE(evaluateRules(c, at(local(14, 12, 0)), kCet).freeUntilMs.value(), local(16, 8, 0));
        // Every day, all day: no end.
        c.timeWindows = {{TimeWindow::kEveryDay, 9 * 60, 9 * 60}};
        v = evaluateRules(c, at(local(11, 3, 0)), kCet);
        QVERIFY(v.allowed());
        QVERIFY(!v.freeUntilMs.has_value());
        QVERIFY(insideTimeWindows(c.timeWindows, local(11, 8, 59), kCet));
    }

    void sameDayWindowAndNoWindows() {
        RulesConfig c;
        c.useTimeWindows = true;
        c.timeWindows = {{0x01, 9 * 60, 17 * 60}};  // Mondays 09:00-17:00
        QVERIFY(evaluateRules(c, at(local(9, 9, 0)), kCet).allowed());
        QVERIFY(!evaluateRules(c, at(local(9, 17, 0)), kCet).allowed());
        const RulesVerdict v = evaluateRules(c, at(local(9, 17, 0)), kCet);
        QCOMPARE(v.reason(),
                 std::string("Waiting: outside the time window (resumes on 2026-03-16 at 09:00)"));
        QCOMPARE(describeLocalTime(local(13, 9, 0), local(9, 17, 0), kCet),
                 std::string("on Friday at 09:00"));
        QCOMPARE(describeLocalTime(local(10, 0, 0), local(9, 17, 0), kCet),
                 std::string("at midnight"));
        QCOMPARE(describeLocalTime(local(10, 0, 5), local(9, 17, 0), kCet),
                 std::string("tomorrow at 00:05"));
        QCOMPARE(describeLocalTime(local(8, 23, 0), local(9, 17, 0), kCet),
                 std::string("yesterday at 23:00"));
        QVERIFY(v.holds[0].mayChangeAtMs.has_value());
        QVERIFY(!v.holds[0].noTimeWindow);
        c.timeWindows.clear();
        const RulesVerdict none = evaluateRules(c, at(local(9, 12, 0)), kCet);
        QVERIFY(!none.allowed());
        QCOMPARE(none.reason(), std::string("Waiting: no time window is set"));
        QVERIFY(none.holds[0].noTimeWindow);
        c.useTimeWindows = false;
        QVERIFY(evaluateRules(c, at(local(9, 12, 0)), kCet).allowed());
    }

    void windowsFollowDaylightSaving() {
        // Every day 01:00-04:00 local; on Mar 29 local 02:00-03:00 is skipped, so the window is
        // two real hours long, and 04:00 CEST is 02:00Z.
        const std::vector<TimeWindow> w{{TimeWindow::kEveryDay, 60, 240}};
        QCOMPARE(windowCoverageEndMs(w, local(29, 1, 30, kSpring), kSpring).value(),
                 int64_t{1774749600000});
        QCOMPARE(nextWindowStartMs(w, local(29, 5, 0, kSpring), kSpring).value(),
                 fromLocal({2026, 3, 30}, 60, kSpring));
    }

    void temperatureWithHysteresis() {
        RulesConfig c;
        c.maxTemperatureC = 85;
        c.temperatureHysteresisC = 5;
        RuleInputs in = at(local(9, 12, 0));
        // No temperature reported: the limit cannot be applied, and the verdict says so.
        QVERIFY(evaluateRules(c, in, kCet).allowed());
        QVERIFY(evaluateRules(c, in, kCet).temperatureUnknown);
        in.temperatureC = 85;
        RulesVerdict v = evaluateRules(c, in, kCet);
        QVERIFY(!v.allowed());
        QVERIFY(!v.temperatureUnknown);
        QCOMPARE(v.holds[0].rule, Rule::TooHot);
        QCOMPARE(v.holds[0].temperatureC, 85.0);
        QCOMPARE(v.holds[0].limitC, 85.0);
        QVERIFY(!v.holds[0].coolingDown);
        QCOMPARE(v.reason(), std::string("Waiting: device too hot (85 °C, limit 85 °C)"));
        in.temperatureC = 84;
        QVERIFY(evaluateRules(c, in, kCet).allowed());
        in.heldByTemperature = true;
        v = evaluateRules(c, in, kCet);
        QVERIFY(!v.allowed());
        QCOMPARE(v.reason(), std::string("Waiting: device cooling down (84 °C, resumes at 80 °C)"));
        QVERIFY(v.holds[0].coolingDown);
        QCOMPARE(v.holds[0].limitC, 80.0);
        in.temperatureC = 80;
        QVERIFY(evaluateRules(c, in, kCet).allowed());
    }

    void dailyCaps() {
        RulesConfig c;
        c.dailyUploadCapBytes = 1'000'000'000;
        c.dailyDownloadCapBytes = 5'000'000'000;
        RuleInputs in = at(local(9, 22, 30));
        in.bytesUpToday = 999'999'999;
        in.bytesDownToday = 4'000'000'000;
        QVERIFY(evaluateRules(c, in, kCet).allowed());
        in.bytesUpToday = 1'000'000'000;
        RulesVerdict v = evaluateRules(c, in, kCet);
        QVERIFY(!v.allowed());
        QCOMPARE(v.holds.size(), size_t{1});
        QCOMPARE(v.holds[0].rule, Rule::UploadCap);
        QCOMPARE(v.reason(), std::string("Waiting: daily upload cap reached (1.0 GB of 1.0 GB "
                                         "used; resets at midnight)"));
        QCOMPARE(v.holds[0].mayChangeAtMs.value(), local(10, 0, 0));
        QCOMPARE(v.holds[0].usedBytes, int64_t{1'000'000'000});
        QCOMPARE(v.holds[0].capBytes, int64_t{1'000'000'000});
        QVERIFY(v.holds[0].capReached);
        // The next unit's download would pass the cap.
        in.bytesUpToday = 0;
        in.nextDownloadBytes = 1'000'000'001;
        v = evaluateRules(c, in, kCet);
        QCOMPARE(v.holds.size(), size_t{1});
        QCOMPARE(v.holds[0].rule, Rule::DownloadCap);
        QVERIFY(contains(v.reason(), "daily download cap would be exceeded (4.0 GB of 5.0 GB"));
        QVERIFY(!v.holds[0].capReached);
        in.nextDownloadBytes = 1'000'000'000;
        QVERIFY(evaluateRules(c, in, kCet).allowed());
    }

    void priorityOrder() {
        RulesConfig c = nightWindows();
        c.onlyWhenIdle = true;
        c.maxTemperatureC = 80;
        c.dailyUploadCapBytes = 10;
        c.dailyDownloadCapBytes = 10;
        RuleInputs in = at(local(9, 12, 0));
        in.power = PowerSource::Battery;
        in.idleSeconds = 1;
        in.temperatureC = 90;
        in.bytesUpToday = 10;
        in.bytesDownToday = 10;
        const RulesVerdict v = evaluateRules(c, in, kCet);
        QCOMPARE(v.holds.size(), size_t{6});
        QCOMPARE(v.holds[0].rule, Rule::OnBattery);
        QCOMPARE(v.holds[1].rule, Rule::OutsideTimeWindow);
        QCOMPARE(v.holds[2].rule, Rule::UserActive);
        QCOMPARE(v.holds[3].rule, Rule::TooHot);
        QCOMPARE(v.holds[4].rule, Rule::UploadCap);
        QCOMPARE(v.holds[5].rule, Rule::DownloadCap);
        QCOMPARE(v.reason(), std::string("Waiting: on battery"));
    }

    // --- snooze ---

    void snooze() {
        const int64_t now = local(9, 22, 30);
        QCOMPARE(now, int64_t{1773091800000});
        QCOMPARE(snoozeUntilMs(Snooze::OneHour, now, kCet), int64_t{1773095400000});
        QCOMPARE(snoozeUntilMs(Snooze::ThreeHours, now, kCet), int64_t{1773102600000});  // 01:30
        QCOMPARE(snoozeUntilMs(Snooze::UntilTomorrow, now, kCet), int64_t{1773097200000});
        // Just after midnight "tomorrow" is the next midnight, almost a day away.
        QCOMPARE(snoozeUntilMs(Snooze::UntilTomorrow, int64_t{1773097200000}, kCet),
                 int64_t{1773097200000} + 86400 * 1000);
    }

    void snoozeAcrossDaylightSaving() {
        // Mar 28 22:00 (UTC+1): tomorrow is Mar 29 00:00 local, still UTC+1.
        QCOMPARE(snoozeUntilMs(Snooze::UntilTomorrow, 1774731600000, kSpring),
                 int64_t{1774738800000});
        // Mar 29 12:00 (UTC+2): tomorrow starts at 22:00Z, 23 h after the previous midnight.
        QCOMPARE(snoozeUntilMs(Snooze::UntilTomorrow, 1774778400000, kSpring),
                 int64_t{1774821600000});
        // Three hours are real hours: 00:30 local + 3 h = 04:30 local across the jump.
        QCOMPARE(snoozeUntilMs(Snooze::ThreeHours, 1774740600000, kSpring), int64_t{1774751400000});
    }

    void formatting() {
        QCOMPARE(formatBytes(0), std::string("0 B"));
        QCOMPARE(formatBytes(999), std::string("999 B"));
        QCOMPARE(formatBytes(1000), std::string("1.0 kB"));
        QCOMPARE(formatBytes(999'000), std::string("999 kB"));
        QCOMPARE(formatBytes(999'950), std::string("1.0 MB"));
        QCOMPARE(formatBytes(12'345'678), std::string("12 MB"));
        QCOMPARE(formatBytes(1'500'000'000), std::string("1.5 GB"));
        QCOMPARE(toString(PowerSource::Battery), "battery");
    }
};

QTEST_APPLESS_MAIN(TestRules)
#include "test_rules.moc"
