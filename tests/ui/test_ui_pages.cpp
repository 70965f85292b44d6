// Each page of the main window against a ledger fixture (ui_fixture.hpp): the numbers, table
// rows and chart points it shows are the fixture's, worked out by hand; an empty ledger shows
// the explaining empty states.
#include "main_window.hpp"

#include "app_actions.hpp"
#include "cost_text.hpp"
#include "pages.hpp"
#include "state_view.hpp"
#include "ui_fixture.hpp"
#include "ui_prefs.hpp"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QClipboard>
#include <QGroupBox>
#include <QLabel>
#include <QLineSeries>
#include <QProgressBar>
#include <QScatterSeries>
#include <QTableWidget>

using namespace tandem;
using namespace tandem::uitest;

class TestUiPages : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    core::ManualClock m_clock{kNowMs};
    core::FixedOffsetTimeZone m_zone{0};
    std::unique_ptr<core::Ledger> m_ledger;
    std::unique_ptr<ui::EngineBridge> m_bridge;
    std::unique_ptr<ui::UiPrefs> m_prefs;
    FakeServices m_services;
    core::Settings m_settings;
    ui::UiContext m_ctx;

  private slots:
    void initTestCase() {
        QLocale::setDefault(QLocale::c());
        m_ledger = makeFixtureLedger(m_dir.path());
        m_bridge = std::make_unique<ui::EngineBridge>(m_clock, m_zone);
        m_bridge->setLedger(m_ledger.get());
        m_prefs = std::make_unique<ui::UiPrefs>(m_dir.path() + QStringLiteral("/ui.ini"));
        m_settings.coordinatorUrl = "https://127.0.0.1:8443";
        m_settings.rules.dailyUploadCapBytes = 10'000'000;
        m_ctx.bridge = m_bridge.get();
        m_ctx.services = &m_services;
        m_ctx.settings = &m_settings;
        m_ctx.prefs = m_prefs.get();
    }

    void contributions() {
        ui::ContributionsPage page(m_ctx, nullptr);
        page.refresh();
        QVERIFY(!page.showsEmptyState());
        QCOMPARE(page.totalText("units"),
                 QStringLiteral("2 trained, 2 accepted, 0 waiting for a receipt"));
        QCOMPARE(page.totalText("tokens"), QStringLiteral("3000"));
        QCOMPARE(page.totalText("gpu"), QStringLiteral("1.00"));      // unit 101: 3600 s on cuda
        QCOMPARE(page.totalText("compute"), QStringLiteral("1.50"));  // 3600 + 1800 s
        QCOMPARE(page.totalText("credit"), QStringLiteral("30.0"));
        QCOMPARE(page.totalText("sent"), QStringLiteral("2.0 MB"));
        QCOMPARE(page.totalText("received"), QStringLiteral("5.0 MB"));  // failed ones count

        // 14 days ending today (2026-11-22): units on 11-20 and 11-21.
        QCOMPARE(page.series()->count(), 1);
        QBarSet* set = page.series()->barSets().front();
        QCOMPARE(set->count(), ui::ContributionsPage::kDays);
        // Days in the locale's short date format without the year (here the C locale's).
        QCOMPARE(page.categories()->categories().front(), QStringLiteral("9 Nov"));
        QCOMPARE(page.categories()->categories().back(), QStringLiteral("22 Nov"));
        QCOMPARE(set->at(11), 1000.0);
        QCOMPARE(set->at(12), 2000.0);
        QCOMPARE(set->at(13), 0.0);
        QCOMPARE(set->at(0), 0.0);
        page.setMetric(ui::ContributionsPage::Metric::GpuHours);
        set = page.series()->barSets().front();
        QCOMPARE(set->at(11), 1.0);
        QCOMPARE(set->at(12), 0.0);  // the CPU unit has no GPU-hours
        QCOMPARE(set->label(), QStringLiteral("GPU-hours"));
        page.setMetric(ui::ContributionsPage::Metric::ComputeHours);
        QCOMPARE(page.series()->barSets().front()->at(12), 0.5);

        // Newest first: 103 (training), 102, 101 with their receipts.
        QTableWidget* t = page.table();
        QCOMPARE(t->rowCount(), 3);
        QCOMPARE(t->item(0, 0)->text(), QStringLiteral("103"));
        QCOMPARE(t->item(0, 2)->text(), QStringLiteral("Training"));
        QCOMPARE(t->item(0, 6)->text(), QStringLiteral("–"));
        QCOMPARE(t->item(1, 0)->text(), QStringLiteral("102"));
        QCOMPARE(t->item(1, 2)->text(), QStringLiteral("Accepted"));
        QVERIFY2(t->item(1, 6)->text().startsWith(QStringLiteral("round 6, weight 1, credit 20.0")),
                 qPrintable(t->item(1, 6)->text()));
        QCOMPARE(t->item(2, 1)->text(), QStringLiteral("2026-11-20 12:00"));
        QCOMPARE(t->item(2, 4)->text(), QStringLiteral("5.500 → 4.250"));
    }

    // A unit that did not count says why in plain words; a partial one says how far it got.
    void contributionsSayWhyAUnitDidNotCount() {
        QTemporaryDir dir;
        auto ledger = core::Ledger::open((dir.path() + QStringLiteral("/ledger.db")).toStdString());
        QVERIFY(ledger.ok());
        core::Ledger& l = **ledger;
        auto unit = [&](const char* id, int64_t steps, int64_t createdMs) {
            core::WorkUnitRecord u;
            u.id = id;
            u.run = "1";
            u.device = "cpu";
            u.innerSteps = 100;
            u.steps = steps;
            u.tokens = steps * 256;
            u.createdAtMs = createdMs;
            u.updatedAtMs = createdMs;
            must(l.recordWorkUnit(u));
        };
        unit("201", 12, kNowMs - 3000'000);
        must(l.recordTransition("201", core::WorkUnitState::Training, kNowMs - 2900'000));
        must(l.recordTransition("201", core::WorkUnitState::Abandoned, kNowMs - 2000'000,
                                "held_too_long"));
        unit("202", 40, kNowMs - 1000'000);
        must(l.recordTransition("202", core::WorkUnitState::Trained, kNowMs - 900'000));
        must(l.recordTransition("202", core::WorkUnitState::Rejected, kNowMs - 800'000,
                                "the norm is 40 times the reference"));
        ui::EngineBridge bridge(m_clock, m_zone);
        bridge.setLedger(ledger->get());
        ui::UiContext ctx = m_ctx;
        ctx.bridge = &bridge;
        ui::ContributionsPage page(ctx, nullptr);
        page.refresh();
        QTableWidget* t = page.table();
        QCOMPARE(t->rowCount(), 2);
        QCOMPARE(t->item(0, 0)->text(), QStringLiteral("202"));
        QCOMPARE(t->item(0, 2)->text(),
                 QStringLiteral("Refused by the coordinator (partial: 40 of 100 steps)"));
        QCOMPARE(t->item(0, 6)->text(), QStringLiteral("the norm is 40 times the reference"));
        QCOMPARE(t->item(1, 2)->text(), QStringLiteral("Abandoned"));
        QVERIFY2(t->item(1, 6)->text().startsWith(
                     QStringLiteral("This computer was paused, asleep or offline for longer")),
                 qPrintable(t->item(1, 6)->text()));
        QCOMPARE(t->item(1, 6)->toolTip(), t->item(1, 6)->text());
        QCOMPARE(ui::unitEndText("run_moved_on"),
                 QStringLiteral("The training moved on while this work unit waited, so its "
                                "result would no longer count."));
    }

    void performance() {
        ui::PerformancePage page(m_ctx, nullptr);
        page.setRange(ui::PerformancePage::Range::Hour);
        page.refresh();
        QVERIFY(!page.showsEmptyState());
        // One-minute buckets: each of the 10 samples is its own point.
        QCOMPARE(page.tokensSeries()->count(), 10);
        for (int i = 0; i < 10; ++i) {
            QCOMPARE(page.tokensSeries()->at(i).y(), 100.0 + 10 * i);
            QCOMPARE(static_cast<int64_t>(page.tokensSeries()->at(i).x()),
                     kNowMs - (10 - i) * 60'000);
        }
        QCOMPARE(page.utilisationSeries()->count(), 10);
        QCOMPARE(page.utilisationSeries()->at(0).y(), 50.0);  // percent
        QCOMPARE(page.temperatureSeries()->at(9).y(), 60.0);
        auto* summary = page.findChild<QLabel*>(QStringLiteral("summary"));
        QVERIFY(summary);
        QCOMPARE(summary->text(),
                 QStringLiteral("average 145 tokens/s, peak 190 tokens/s, samples: 10"));
        // A day in 15-minute buckets: the samples span 10 minutes across at most 2 buckets.
        page.setRange(ui::PerformancePage::Range::Day);
        QVERIFY(page.tokensSeries()->count() >= 1 && page.tokensSeries()->count() <= 2);
    }

    // The rank box: the fake's board, an anonymous donor, one without results, an unreachable
    // coordinator; asked when shown and then at most once a minute.
    void contributionsRank() {
        const int callsBefore = m_services.standingCalls.load();
        const ui::StandingInfo original = m_services.standingAnswer;
        ui::ContributionsPage page(m_ctx, nullptr);
        page.refresh();
        QTRY_COMPARE(page.rankLabel()->text(), QStringLiteral("Rank 3 of 41 donors"));
        QCOMPARE(m_services.standingCalls.load(), callsBefore + 1);
        QVERIFY(page.teamRankLabel()->isVisibleTo(&page));
        QCOMPARE(page.teamRankLabel()->text(), QStringLiteral("Team Foo: rank 2 of 7 teams"));
        QCOMPARE(page.findChild<QLabel*>(QStringLiteral("rank")), page.rankLabel());

        // An anonymous donor in no team: ranked, and told how to choose a name.
        ui::StandingInfo anonymous = m_services.standingAnswer;
        anonymous.anonymous = true;
        anonymous.team.clear();
        anonymous.teamRank = 0;
        anonymous.rank = 12;
        m_services.standingAnswer = anonymous;
        // Shown again within the minute: not asked again.
        page.show();
        page.refresh();
        QTest::qWait(50);
        QCOMPARE(m_services.standingCalls.load(), callsBefore + 1);
        m_clock.advanceMs(61'000);
        page.refresh();
        QTRY_VERIFY2(page.rankLabel()->text().startsWith(
                         QStringLiteral("Rank 12 of 41 donors, shown as “anonymous”")),
                     qPrintable(page.rankLabel()->text()));
        QVERIFY(!page.teamRankLabel()->isVisibleTo(&page));
        QCOMPARE(m_services.standingCalls.load(), callsBefore + 2);
        // Asked since, and nothing shown or accepted: not asked again a minute later.
        m_clock.advanceMs(61'000);
        page.refresh();
        QTest::qWait(50);
        QCOMPARE(m_services.standingCalls.load(), callsBefore + 2);

        // Direct answers: no accepted result yet, not registered, a team without results, and
        // a coordinator that cannot be reached.
        ui::StandingInfo none = m_services.standingAnswer;
        none.rank = 0;
        none.team = QStringLiteral("<b>Bar</b>");
        none.teamRank = 0;
        page.showStanding(none);
        QCOMPARE(page.rankLabel()->text(),
                 QStringLiteral("Not ranked yet: the leaderboard counts accepted results."));
        QCOMPARE(page.teamRankLabel()->text(), QStringLiteral("Team <b>Bar</b>: not ranked yet"));
        QCOMPARE(page.teamRankLabel()->textFormat(), Qt::PlainText);
        ui::StandingInfo unregistered;
        unregistered.ok = true;
        page.showStanding(unregistered);
        QVERIFY(
            page.rankLabel()->text().startsWith(QStringLiteral("Not ranked yet: Tandem has "
                                                               "not registered")));
        ui::StandingInfo down;
        down.error = QStringLiteral("connection refused by 127.0.0.1:8443");
        m_services.standingAnswer = down;
        page.hide();
        page.show();  // shown again a minute after the last question: asked
        m_clock.advanceMs(61'000);
        page.refresh();
        QTRY_COMPARE(page.rankLabel()->text(),
                     QStringLiteral("Your rank is not available right now: the coordinator cannot "
                                    "be reached (connection refused by 127.0.0.1:8443). Tandem "
                                    "asks again later."));
        QVERIFY(!page.teamRankLabel()->isVisibleTo(&page));
        QCOMPARE(m_services.standingCalls.load(), callsBefore + 3);
        // A failed question is asked again after the minute, without being shown again.
        m_services.standingAnswer = original;
        page.refresh();
        QTest::qWait(50);
        QCOMPARE(m_services.standingCalls.load(), callsBefore + 3);
        m_clock.advanceMs(61'000);
        page.refresh();
        QTRY_COMPARE(page.rankLabel()->text(), QStringLiteral("Rank 3 of 41 donors"));
        QCOMPARE(m_services.standingCalls.load(), callsBefore + 4);
    }

    // A result accepted since the last question: asked again, but not before the minute is over.
    void contributionsRankAfterAcceptedResult() {
        QTemporaryDir own;
        auto ledger = makeFixtureLedger(own.path());
        ui::EngineBridge bridge(m_clock, m_zone);
        bridge.setLedger(ledger.get());
        ui::UiContext ctx = m_ctx;
        ctx.bridge = &bridge;
        ui::ContributionsPage page(ctx, nullptr);
        const int calls = m_services.standingCalls.load();
        page.refresh();
        QTRY_COMPARE(m_services.standingCalls.load(), calls + 1);
        QTRY_VERIFY(page.rankLabel()->text().startsWith(QStringLiteral("Rank ")));

        must(ledger->recordTransition("103", core::WorkUnitState::Trained, m_clock.nowMs()));
        core::Receipt r;
        r.workUnitId = "103";
        r.roundApplied = 7;
        r.weight = 1;
        r.credit = 5;
        r.receivedAtMs = m_clock.nowMs();
        r.signature = {1, 2, 3};
        r.body = {'{', '}'};
        must(ledger->recordReceipt(r));
        page.refresh();
        QCOMPARE(page.totalText("units"),
                 QStringLiteral("3 trained, 3 accepted, 0 waiting for a receipt"));
        QTest::qWait(50);
        QCOMPARE(m_services.standingCalls.load(), calls + 1);  // within the minute
        m_clock.advanceMs(61'000);
        page.refresh();
        QTRY_COMPARE(m_services.standingCalls.load(), calls + 2);
        // Nothing accepted since: not asked again.
        m_clock.advanceMs(61'000);
        page.refresh();
        QTest::qWait(50);
        QCOMPARE(m_services.standingCalls.load(), calls + 2);
    }

    void trainingRun() {
        ui::RunPage page(m_ctx, nullptr);
        page.refresh();
        // The answer arrives from the thread pool.
        QTRY_COMPARE(page.lossSeries()->count(), 8);
        QVERIFY(!page.showsEmptyState());
        QCOMPARE(page.lossSeries()->at(0), QPointF(1, 4.75));
        QCOMPARE(page.lossSeries()->at(7), QPointF(8, 3.0));
        // The receipts applied units to rounds 5 and 6: those rounds are marked.
        QCOMPARE(page.mineSeries()->count(), 2);
        QCOMPARE(page.mineSeries()->at(0).x(), 5.0);
        QCOMPARE(page.mineSeries()->at(1).x(), 6.0);
        QCOMPARE(page.statusLabel()->text(),
                 QStringLiteral("Rounds with a contribution from this computer: 2 of 8."));
        // What the model writes now: the prompt in bold, the text escaped, a long word
        // given places to wrap (it must not widen the window).
        auto* box = page.findChild<QGroupBox*>(QStringLiteral("sampleBox"));
        QVERIFY(box && !box->isHidden());
        QCOMPARE(box->title(), QStringLiteral("What the model writes now (after round 8)"));
        const QString html = page.sampleLabel()->text();
        QVERIFY2(html.contains(QStringLiteral("<b>The </b>cat &lt;sat&gt; &amp; x")),
                 qPrintable(html));
        QCOMPARE(html.count(QChar(0x200B)), 2);  // 100 x's: after the 40th and the 80th
        QCOMPARE(page.sampleLabel()->sizePolicy().horizontalPolicy(), QSizePolicy::Ignored);
        const QString summary = page.findChild<QLabel*>(QStringLiteral("summary"))->text();
        // The model in words, not in its configuration's letters.
        QVERIFY2(summary.contains(QStringLiteral("Model: 2-layer model, 0.4 million parameters.")),
                 qPrintable(summary));
        QVERIFY2(!summary.contains(QStringLiteral("NH=")), qPrintable(summary));
        QVERIFY2(summary.endsWith(QStringLiteral(
                     "Latest export of the model: /srv/exports/run1-v7 (safetensors, version 7).")),
                 qPrintable(summary));
        // At most once a minute unless asked.
        const int calls = m_services.statusCalls;
        page.refresh();
        QCOMPARE(m_services.statusCalls.load(), calls);
        // A run without samples (yet) shows no box.
        m_services.withSample = false;
        page.reload();
        QTRY_COMPARE(m_services.statusCalls.load(), calls + 1);
        QTRY_VERIFY(box->isHidden());
        m_services.withSample = true;
    }

    void network() {
        ui::NetworkPage page(m_ctx, nullptr);
        m_prefs->setNumber(QStringLiteral("bandwidth/atMs"), static_cast<double>(kNowMs - 60'000));
        m_prefs->setNumber(QStringLiteral("bandwidth/downMbit"), 80);
        m_prefs->setNumber(QStringLiteral("bandwidth/upMbit"), 20);
        m_prefs->setNumber(QStringLiteral("bandwidth/latencyMs"), 12);
        page.refresh();
        QVERIFY(!page.showsEmptyState());
        QVERIFY2(page.bandwidthLabel()->text().startsWith(
                     QStringLiteral("80.0 Mbit/s down, 20.0 Mbit/s up, 12 ms")),
                 qPrintable(page.bandwidthLabel()->text()));
        const auto sets = page.series()->barSets();
        QCOMPARE(sets.size(), 2);
        QCOMPARE(sets[0]->count(), ui::NetworkPage::kDays);
        QCOMPARE(sets[0]->at(12), 2.0);  // MB sent yesterday
        QCOMPARE(sets[1]->at(12), 4.0);  // MB received yesterday
        QCOMPARE(sets[1]->at(13), 1.0);  // today's failed download counts
        // Today against the caps: nothing sent of 10 MB; 1 MB received, no cap.
        QCOMPARE(page.upToday()->format(), QStringLiteral("0 B of 10 MB today"));
        QCOMPARE(page.downToday()->format(), QStringLiteral("1.0 MB today (no cap)"));
        QTableWidget* t = page.table();
        QCOMPARE(t->rowCount(), 3);
        QCOMPARE(t->item(0, 1)->text(), QStringLiteral("received"));
        QCOMPARE(t->item(0, 6)->text(), QStringLiteral("failed: connection reset"));
        QCOMPARE(t->item(1, 2)->text(), QStringLiteral("result (unit 102)"));
        QCOMPARE(t->item(1, 5)->text(), QStringLiteral("8.0 Mbit/s"));  // 2 MB in 2 s
    }

    void log() {
        ui::LogPage page(m_ctx, nullptr);
        page.setMinimumLevel(0);
        page.refresh();
        QCOMPARE(page.table()->rowCount(), 3);
        QCOMPARE(page.table()->item(0, 2)->text(), QStringLiteral("GPU error: out of memory"));
        QCOMPARE(page.table()->item(0, 1)->text(), QStringLiteral("error"));
        page.setMinimumLevel(2);
        QCOMPARE(page.table()->rowCount(), 2);
        page.setSearch(QStringLiteral("gpu"));
        QCOMPARE(page.table()->rowCount(), 1);
        page.copyToClipboard();
        QVERIFY2(QApplication::clipboard()->text().contains(
                     QStringLiteral("error\tGPU error: out of memory")),
                 qPrintable(QApplication::clipboard()->text()));
        page.setSearch(QStringLiteral("no such text"));
        QCOMPARE(page.table()->rowCount(), 0);
        QVERIFY(!page.showsEmptyState());  // a filter that matches nothing is not "no events"
    }

    void emptyStates() {
        QTemporaryDir dir;
        auto empty = core::Ledger::open((dir.path() + QStringLiteral("/ledger.db")).toStdString());
        QVERIFY(empty.ok());
        ui::EngineBridge bridge(m_clock, m_zone);
        bridge.setLedger(empty->get());
        ui::UiContext ctx = m_ctx;
        ctx.bridge = &bridge;
        ui::ContributionsPage contributions(ctx, nullptr);
        contributions.refresh();
        QVERIFY(contributions.showsEmptyState());
        QVERIFY(contributions.emptyText().startsWith(QStringLiteral("No contributions yet")));
        ui::PerformancePage performance(ctx, nullptr);
        performance.refresh();
        QVERIFY(performance.emptyText().startsWith(QStringLiteral("No speed measurements yet")));
        ui::NetworkPage network(ctx, nullptr);
        network.refresh();
        QVERIFY(network.emptyText().startsWith(QStringLiteral("Nothing sent or received yet")));
        ui::LogPage log(ctx, nullptr);
        log.refresh();
        QVERIFY(log.emptyText().startsWith(QStringLiteral("No events yet")));
        core::Settings none;
        ctx.settings = &none;
        ui::RunPage run(ctx, nullptr);
        run.refresh();
        QVERIFY(run.emptyText().startsWith(QStringLiteral("No coordinator chosen yet")));
    }

    void stateShownAlike() {
        core::EngineSnapshot s;
        s.state = core::EngineState::Training;
        s.finishThenPause = true;
        s.current = core::CurrentWorkUnit{};
        s.current->id = "17";
        s.current->step = 40;
        s.current->innerSteps = 120;
        auto v = ui::describeState(s, true, kNowMs, m_zone);
        QCOMPARE(v.kind, ui::StateKind::Working);
        QCOMPARE(v.headline, QStringLiteral("Working: training"));
        QCOMPARE(v.detail, QStringLiteral("Work unit 17: step 40 of 120; pauses after this unit"));
        QCOMPARE(v.tooltip, QStringLiteral("Tandem: Working: training"));
        s.state = core::EngineState::Snoozed;
        s.snoozedUntilMs = kNowMs + 3 * 3600'000;
        v = ui::describeState(s, true, kNowMs, m_zone);
        QCOMPARE(v.kind, ui::StateKind::Paused);
        QCOMPARE(v.headline, QStringLiteral("Snoozed until 15:00"));
        s.state = core::EngineState::Waiting;
        // The words come from the codes; core's English (for the log) is never shown.
        s.reason = "core's English";
        s.nextAction = "core's English";
        s.hold = core::Hold{};
        s.hold->rule = core::Rule::OnBattery;
        s.next = core::NextAction(core::NextStep::CheckRulesOnChange);
        v = ui::describeState(s, true, kNowMs, m_zone);
        QCOMPARE(v.kind, ui::StateKind::Waiting);
        QCOMPARE(v.headline, QStringLiteral("Waiting: on battery"));
        QVERIFY2(v.detail.endsWith(QStringLiteral("next: check again when that changes")),
                 qPrintable(v.detail));
        s.state = core::EngineState::Backoff;
        s.reason = "request work: connection refused";
        s.problem = core::Problem::Unreachable;
        s.nextActionAtMs = kNowMs + 60'000;
        v = ui::describeState(s, true, kNowMs, m_zone);
        QCOMPARE(v.kind, ui::StateKind::Waiting);  // a wait, not an error
        QCOMPARE(v.headline, QStringLiteral("Can't reach the training server; retrying at 12:01"));
        QVERIFY(!v.detail.contains(QStringLiteral("next:")));  // said once, in the headline
        s.state = core::EngineState::Uploading;
        s.upload = core::UploadInFlight{"16", 500, 1000, 1e6};
        v = ui::describeState(s, true, kNowMs, m_zone);
        QCOMPARE(v.kind, ui::StateKind::Working);
        QCOMPARE(v.headline, QStringLiteral("Working: uploading results"));
        QVERIFY(v.detail.startsWith(QStringLiteral("uploading result 16 (50%)")));
        // Four distinct tray icons, all in the resources.
        QSet<QString> paths;
        for (auto k : {ui::StateKind::Working, ui::StateKind::Paused, ui::StateKind::Waiting,
                       ui::StateKind::Error}) {
            paths.insert(ui::stateIconPath(k));
            QVERIFY2(!ui::stateIcon(k).pixmap(22, 22).isNull(), qPrintable(ui::stateIconPath(k)));
        }
        QCOMPARE(paths.size(), 4);
    }

    // The Overview's "A day costs" line: the wizard's speed and hours (kept in ui.ini), the last
    // measured link, the run's sizing from the coordinator, the settings' caps and price; the
    // figures are the wizard test's, worked by hand there.
    void overviewCostsPerDay() {
        const core::Settings saved = m_settings;
        const int savedSeconds = m_services.workUnitSeconds;
        m_settings.rules.dailyUploadCapBytes = 0;
        m_settings.energyPricePerKwh = 0.30;
        m_services.workUnitSeconds = 600;
        ui::SpeedReport speed;
        speed.ok = true;
        speed.device = QStringLiteral("cpu");
        speed.tokensPerSecond = 1000;
        speed.setupSeconds = 0.5;
        speed.cpuThreads = 8;
        speed.watts = 96;
        ui::rememberCostFacts(*m_prefs, speed, 8);
        m_prefs->setNumber(QStringLiteral("bandwidth/downMbit"), 80);
        m_prefs->setNumber(QStringLiteral("bandwidth/upMbit"), 20);
        m_prefs->setNumber(QStringLiteral("bandwidth/latencyMs"), 12);
        ui::OverviewPage page(m_ctx, nullptr);
        page.refresh();
        QTRY_COMPARE(
            page.costsText(),
            QStringLiteral("about 223 work units: 922 MB down, 447 MB up, 0.76 kWh (0.23)"));
        // Without a measured speed it says what is missing instead of guessing.
        m_prefs->setNumber(QStringLiteral("speed/tokensPerSecond"), 0);
        page.refresh();
        QVERIFY2(page.costsText().startsWith(QStringLiteral("not known until this device's speed")),
                 qPrintable(page.costsText()));
        m_settings = saved;
        m_services.workUnitSeconds = savedSeconds;
    }

    void windowPagesAndShortcuts() {
        ui::AppActions actions(m_bridge.get(), nullptr);
        ui::MainWindow window(m_ctx, &actions);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        // Without an engine the state says so, the same in the status bar and the overview.
        QVERIFY(window.statusText().startsWith(QStringLiteral("Not connected")));
        auto* headline = window.overviewPage()->findChild<QLabel*>(QStringLiteral("headline"));
        QCOMPARE(headline->text(), QStringLiteral("Not connected"));
        QTest::keyClick(&window, Qt::Key_2, Qt::ControlModifier);
        QCOMPARE(window.currentPage(), int(ui::MainWindow::Contributions));
        QCOMPARE(window.contributionsPage()->table()->rowCount(), 3);
        QTest::keyClick(&window, Qt::Key_6, Qt::ControlModifier);
        QCOMPARE(window.currentPage(), int(ui::MainWindow::Log));
        QVERIFY(window.logPage()->table()->rowCount() >= 1);
        for (int i = 0; i < ui::MainWindow::PageCount; ++i)
            QVERIFY(!window.page(i)->accessibleName().isEmpty());
    }
};

QTEST_MAIN(TestUiPages)
#include "test_ui_pages.moc"
