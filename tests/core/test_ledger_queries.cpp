// The ledger's queries against a fixture with hand-computed values (ledger_fixture.hpp; local day
// boundaries and daylight saving included): totals, per-day sums, transfers, throughput, events,
// the work-unit list.
#include "ledger_fixture.hpp"

using namespace tandem;
using namespace tandem::core;
using namespace tandem::core::testing;

class TestLedgerQueries : public QObject, LedgerFiles {
    Q_OBJECT

  private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    void totals() {
        auto l = openFresh();
        Totals empty = must(l->totals());
        QCOMPARE(empty.workUnitsTrained, int64_t{0});
        QCOMPARE(empty.bytesUp, int64_t{0});
        fillFixture(*l);
        const Totals t = must(l->totals());
        QCOMPARE(t.workUnitsTrained, int64_t{3});  // wu1, wu2, wu3
        QCOMPARE(t.workUnitsAccepted, int64_t{2});
        QCOMPARE(t.workUnitsPending, int64_t{1});
        QCOMPARE(t.tokens, int64_t{7000});
        QCOMPARE(t.computeSeconds, 700.0);
        QCOMPARE(t.gpuSeconds, 500.0);
        QCOMPARE(t.credit, 3.75);
        QCOMPARE(t.bytesUp, int64_t{1003});
        QCOMPARE(t.bytesDown, int64_t{1107});
    }

    void totalsPerDay() {
        auto l = openFresh();
        fillFixture(*l);
        auto days = must(l->totalsPerDay({2026, 3, 9}, {2026, 3, 12}, kZone));
        QCOMPARE(days.size(), size_t{4});
        QCOMPARE(days[0].date, (LocalDate{2026, 3, 9}));
        QCOMPARE(days[3].date, (LocalDate{2026, 3, 12}));
        // Mar 9: wu1 (23:30). Mar 10: wu2 (00:00 sharp) and wu3 (23:59:59.999).
        QCOMPARE(days[0].workUnits, int64_t{1});
        QCOMPARE(days[0].tokens, int64_t{1000});
        QCOMPARE(days[0].computeSeconds, 100.0);
        QCOMPARE(days[0].gpuSeconds, 100.0);
        QCOMPARE(days[0].credit, 0.0);
        QCOMPARE(days[0].bytesDown, int64_t{100});
        QCOMPARE(days[1].workUnits, int64_t{2});
        QCOMPARE(days[1].tokens, int64_t{6000});
        QCOMPARE(days[1].computeSeconds, 600.0);
        QCOMPARE(days[1].gpuSeconds, 400.0);
        QCOMPARE(days[1].credit, 1.5);  // wu1's receipt at 00:10
        QCOMPARE(days[1].bytesUp, int64_t{1000});
        QCOMPARE(days[1].bytesDown, int64_t{1000});
        QCOMPARE(days[2].workUnits, int64_t{0});
        QCOMPARE(days[2].credit, 2.25);
        QCOMPARE(days[2].bytesUp, int64_t{3});
        QCOMPARE(days[2].bytesDown, int64_t{7});
        QCOMPARE(days[3].workUnits, int64_t{0});
        QCOMPARE(days[3].bytesUp + days[3].bytesDown, int64_t{0});

        // In UTC the same rows fall on other days: wu1 (21:30Z) and wu2 (22:00Z) on Mar 9.
        auto utc = must(l->totalsPerDay({2026, 3, 9}, {2026, 3, 10}, FixedOffsetTimeZone(0)));
        QCOMPARE(utc[0].workUnits, int64_t{2});
        QCOMPARE(utc[0].tokens, int64_t{3000});
        QCOMPARE(utc[0].credit, 1.5);  // 22:10Z
        QCOMPARE(utc[1].workUnits, int64_t{1});

        auto bad = l->totalsPerDay({2026, 3, 10}, {2026, 3, 9}, kZone);
        QVERIFY(!bad.ok());
        QVERIFY(msg(bad.error()).find("before the first") != std::string::npos);
        QVERIFY(!l->totalsPerDay({2000, 1, 1}, {2026, 1, 1}, kZone).ok());
    }

    void transfersPerDay() {
        auto l = openFresh();
        fillFixture(*l);
        auto days = must(l->transfersPerDay({2026, 3, 9}, {2026, 3, 12}, kZone));
        QCOMPARE(days.size(), size_t{4});
        QCOMPARE(days[0].bytesDown, int64_t{100});  // 23:59
        QCOMPARE(days[0].bytesUp, int64_t{0});
        QCOMPARE(days[0].transfers, int64_t{1});
        QCOMPARE(days[1].bytesDown, int64_t{1000});  // 00:00 sharp
        QCOMPARE(days[1].bytesUp, int64_t{1000});    // a failed 500 counts: it used the link
        QCOMPARE(days[1].transfers, int64_t{3});
        QCOMPARE(days[1].failed, int64_t{1});
        QCOMPARE(days[2].bytesUp, int64_t{3});
        QCOMPARE(days[2].bytesDown, int64_t{7});
        QCOMPARE(days[2].transfers, int64_t{2});
        QCOMPARE(days[3].transfers, int64_t{0});
    }

    // A 23-hour local day: UTC+1 until 2026-03-29 01:00Z, UTC+2 after.
    void daysFollowDaylightSaving() {
        const SwitchingTimeZone zone(3600, 1774746000, 7200);
        auto l = openFresh();
        must(l->recordTransfer(transfer(1774738799999, Direction::Up, "x", 1, true)));     // 28th
        must(l->recordTransfer(transfer(1774738800000, Direction::Up, "x", 10, true)));    // 29th
        must(l->recordTransfer(transfer(1774821540000, Direction::Up, "x", 100, true)));   // 29th
        must(l->recordTransfer(transfer(1774823400000, Direction::Up, "x", 1000, true)));  // 30th
        auto days = must(l->transfersPerDay({2026, 3, 28}, {2026, 3, 30}, zone));
        QCOMPARE(days[0].bytesUp, int64_t{1});
        QCOMPARE(days[1].bytesUp, int64_t{110});
        QCOMPARE(days[2].bytesUp, int64_t{1000});
        QCOMPARE(startOfLocalDay({2026, 3, 30}, zone) - startOfLocalDay({2026, 3, 29}, zone),
                 int64_t{23 * 3600 * 1000});
    }

    void bytesUsedToday() {
        auto l = openFresh();
        fillFixture(*l);
        BytesUsed b = must(l->bytesUsedToday(kMar10_1500, kZone));
        QCOMPARE(b.up, int64_t{1000});
        QCOMPARE(b.down, int64_t{1000});
        b = must(l->bytesUsedToday(kMar10_0000, kZone));
        QCOMPARE(b.up, int64_t{1000});
        b = must(l->bytesUsedToday(kMar10_0000 - 1, kZone));
        QCOMPARE(b.up, int64_t{0});
        QCOMPARE(b.down, int64_t{100});
        b = must(l->bytesUsed(kMar10_1200, kMar10_1205 + 1));
        QCOMPARE(b.up, int64_t{1000});
        QCOMPARE(b.down, int64_t{0});
    }

    void recentTransfers() {
        auto l = openFresh();
        fillFixture(*l);
        auto recent = must(l->recentTransfers(3));
        QCOMPARE(recent.size(), size_t{3});
        // Two at Mar 11 08:00: the later-recorded first.
        QCOMPARE(recent[0].atMs, kMar11_0800);
        QCOMPARE(recent[0].direction, Direction::Up);
        QCOMPARE(recent[0].bytes, int64_t{3});
        QCOMPARE(recent[1].direction, Direction::Down);
        QCOMPARE(recent[1].purpose, std::string("probe"));
        QCOMPARE(recent[2].atMs, kMar10_1205);
        QVERIFY(recent[2].ok);
        auto all = must(l->recentTransfers(100));
        QCOMPARE(all.size(), size_t{6});
        QCOMPARE(all[3].atMs, kMar10_1200);
        QVERIFY(!all[3].ok);
        QCOMPARE(all[3].detail, std::string("connection reset"));
        QCOMPARE(all[3].durationMs, int64_t{1500});
        QCOMPARE(all[3].workUnitId, std::string("wu-x"));
    }

    void throughputRawAndBucketed() {
        auto l = openFresh();
        const int64_t t0 = 1'000'000;
        auto sample = [&](int64_t dtS, double tps, std::optional<double> util,
                          std::optional<double> temp, const char* device) {
            DeviceSample s;
            s.atMs = t0 + dtS * 1000;
            s.device = device;
            s.tokensPerSecond = tps;
            s.utilisation = util;
            s.temperatureC = temp;
            s.memoryUsedBytes = 1 << 20;
            must(l->recordSample(s));
        };
        sample(-1, 999, 0.1, 99, "cuda:0");  // before the range
        sample(0, 100, 0.5, 60, "cuda:0");
        sample(30, 200, std::nullopt, 70, "cuda:0");
        sample(60, 300, 1.0, std::nullopt, "cuda:0");
        sample(90, 400, std::nullopt, std::nullopt, "cuda:1");
        sample(150, 500, 0.9, 50, "cuda:0");  // at the exclusive end

        auto raw = must(l->throughput(t0, t0 + 150'000));
        QCOMPARE(raw.size(), size_t{4});
        QCOMPARE(raw[0].atMs, t0);
        QCOMPARE(raw[0].tokensPerSecond, 100.0);
        QCOMPARE(raw[0].utilisation.value(), 0.5);
        QVERIFY(!raw[1].utilisation.has_value());
        QCOMPARE(raw[3].tokensPerSecond, 400.0);

        auto b = must(l->throughput(t0, t0 + 150'000, 60'000));
        QCOMPARE(b.size(), size_t{2});
        QCOMPARE(b[0].atMs, t0);
        QCOMPARE(b[0].samples, int64_t{2});
        QCOMPARE(b[0].tokensPerSecond, 150.0);
        QCOMPARE(b[0].utilisation.value(), 0.5);    // only one sample had one
        QCOMPARE(b[0].temperatureC.value(), 70.0);  // the maximum
        QCOMPARE(b[1].atMs, t0 + 60'000);
        QCOMPARE(b[1].tokensPerSecond, 350.0);
        QCOMPARE(b[1].utilisation.value(), 1.0);
        QVERIFY(!b[1].temperatureC.has_value());

        auto one = must(l->throughput(t0, t0 + 150'000, 60'000, "cuda:0"));
        QCOMPARE(one.size(), size_t{2});
        QCOMPARE(one[1].samples, int64_t{1});
        QCOMPARE(one[1].tokensPerSecond, 300.0);

        // Buckets without samples are left out: 30 s buckets, 90 s..120 s has only cuda:1.
        auto sparse = must(l->throughput(t0, t0 + 200'000, 30'000, "cuda:0"));
        QCOMPARE(sparse.size(), size_t{4});
        QCOMPARE(sparse[3].atMs, t0 + 150'000);
        QVERIFY(must(l->throughput(t0, t0, 0)).empty());
        QCOMPARE(must(l->pruneSamplesBefore(t0 + 30'000)), int64_t{2});  // -1 s and 0 s
        QCOMPARE(must(l->throughput(t0 - 10'000, t0 + 200'000)).size(), size_t{4});
        QVERIFY(!l->throughput(t0, t0 + 1, -5).ok());
    }

    void eventsFilteredByLevelTextAndTime() {
        auto l = openFresh();
        must(l->recordEvent(1000, EventLevel::Debug, "Starting up"));
        must(l->recordEvent(2000, EventLevel::Info, "Downloaded weights v3"));
        must(l->recordEvent(3000, EventLevel::Warning, "Upload slow: 12 kB/s (50% of cap_limit)"));
        must(l->recordEvent(4000, EventLevel::Error, "UPLOAD failed: timeout"));
        must(l->recordEvent(4000, EventLevel::Info, "upload resumed"));

        auto all = must(l->events({}));
        QCOMPARE(all.size(), size_t{5});
        QCOMPARE(all[0].message, std::string("upload resumed"));  // same time: later id first
        QCOMPARE(all[4].level, EventLevel::Debug);

        EventFilter f;
        f.minLevel = EventLevel::Warning;
        auto warn = must(l->events(f));
        QCOMPARE(warn.size(), size_t{2});
        QCOMPARE(warn[0].level, EventLevel::Error);
        QCOMPARE(warn[1].atMs, int64_t{3000});

        f = {};
        f.text = "UpLoad";
        QCOMPARE(must(l->events(f)).size(), size_t{3});
        f.minLevel = EventLevel::Error;
        QCOMPARE(must(l->events(f)).size(), size_t{1});

        // LIKE wildcards are plain characters.
        f = {};
        f.text = "50%";
        QCOMPARE(must(l->events(f)).size(), size_t{1});
        f.text = "%";
        QCOMPARE(must(l->events(f)).size(), size_t{1});
        f.text = "cap_l";
        QCOMPARE(must(l->events(f)).size(), size_t{1});
        f.text = "s_ow";  // would match "slow" as a LIKE pattern
        QCOMPARE(must(l->events(f)).size(), size_t{0});

        f = {};
        f.fromMs = 2000;
        f.toMs = 4000;
        auto range = must(l->events(f));
        QCOMPARE(range.size(), size_t{2});
        QCOMPARE(range[0].atMs, int64_t{3000});
        QCOMPARE(range[1].atMs, int64_t{2000});

        f = {};
        f.limit = 2;
        auto limited = must(l->events(f));
        QCOMPARE(limited.size(), size_t{2});
        QCOMPARE(limited[1].message, std::string("UPLOAD failed: timeout"));
    }

    void workUnitsListWithReceiptState() {
        auto l = openFresh();
        fillFixture(*l);
        auto rows = must(l->workUnits(10));
        QCOMPARE(rows.size(), size_t{5});
        // Newest created first: wu5, wu4, wu3, wu2, wu1.
        QCOMPARE(rows[0].unit.id, std::string("wu5"));
        QCOMPARE(rows[0].unit.state, WorkUnitState::Failed);
        QVERIFY(!rows[0].receipt.has_value());
        QCOMPARE(rows[2].unit.id, std::string("wu3"));
        QVERIFY(rows[2].receipt.has_value());
        QCOMPARE(rows[2].receipt->credit, 2.25);
        QCOMPARE(rows[2].receipt->receivedAtMs, kMar11_1200);
        QCOMPARE(rows[2].unit.trainedAtMs.value(), kMar10_2359_59);
        QCOMPARE(rows[3].unit.id, std::string("wu2"));
        QCOMPARE(rows[3].unit.state, WorkUnitState::Uploaded);
        QVERIFY(!rows[3].receipt.has_value());
        QCOMPARE(rows[4].receipt->roundApplied, int64_t{4});
        auto page = must(l->workUnits(2, 3));
        QCOMPARE(page.size(), size_t{2});
        QCOMPARE(page[0].unit.id, std::string("wu2"));
        QCOMPARE(page[1].unit.id, std::string("wu1"));
    }
};

QTEST_APPLESS_MAIN(TestLedgerQueries)
#include "test_ledger_queries.moc"
