// The charts stay readable: the Training run chart at 10,000 rounds (a decimated line, this
// computer's rounds as a strip of marks, a choice of rounds, regular ticks), numbers in the
// locale's style, no label cut off or outside a small chart with a large font, legends in the
// series' colours on a dark palette. CTest runs it at 1x and, as test_ui_charts_2x, with
// QT_SCALE_FACTOR=2. With TANDEM_SHOTS=<dir> it saves what it checked as PNGs, to look at.
#include "app_actions.hpp"
#include "chart_axes.hpp"
#include "main_window.hpp"
#include "pages.hpp"
#include "ui_fixture.hpp"

#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QGraphicsTextItem>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QScreen>
#include <QValueAxis>

#include <cmath>

using namespace tandem;
using namespace tandem::uitest;

namespace {

constexpr int kRounds = 10'000;

// Rounds 1..10,000: a loss falling by 1e-4 a round (so each bucket's first round is its highest
// and its last its lowest) with one spike, 9.0 at round 5,000, that decimation must keep.
std::vector<ui::RoundInfo> longRun() {
    std::vector<ui::RoundInfo> rounds;
    for (int i = 1; i <= kRounds; ++i)
        rounds.push_back({i, i == 5000 ? 9.0 : 5.0 - 1e-4 * i, 2, 1000});
    rounds.push_back({kRounds + 1, std::nullopt, 0, 0});  // open
    return rounds;
}

// The texts the chart draws (axis labels, titles, legend), with where they are in the view.
struct DrawnText {
    QString text;
    QRectF rect;  // in view coordinates
};
QList<DrawnText> drawnTexts(QChartView* view) {
    QList<DrawnText> out;
    for (QGraphicsItem* item : view->scene()->items()) {
        if (!item->isVisible())
            continue;
        QString text;
        if (auto* t = dynamic_cast<QGraphicsTextItem*>(item))
            text = t->toPlainText();
        else if (auto* s = dynamic_cast<QGraphicsSimpleTextItem*>(item))
            text = s->text();
        else
            continue;
        if (!text.isEmpty())
            out << DrawnText{text, view->mapFromScene(item->sceneBoundingRect()).boundingRect()};
    }
    return out;
}

// The round axis's tick labels: the drawn texts that are whole numbers in the locale.
QList<double> roundLabels(QChartView* view, QStringList* texts) {
    QList<double> out;
    const QLocale locale;
    for (const DrawnText& d : drawnTexts(view)) {
        bool ok = false;
        const double v = locale.toDouble(d.text, &ok);
        if (ok && d.text.indexOf(locale.decimalPoint()) < 0) {
            out << v;
            texts->append(d.text);
        }
    }
    return out;
}

void saveShot(QWidget* widget, const QString& name) {
    const QString dir = qEnvironmentVariable("TANDEM_SHOTS");
    if (!dir.isEmpty())
        widget->grab().save(dir + QLatin1Char('/') + name + QStringLiteral(".png"));
}

}  // namespace

class TestUiCharts : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    core::ManualClock m_clock{kNowMs};
    core::FixedOffsetTimeZone m_zone{0};
    std::unique_ptr<core::Ledger> m_ledger;
    std::unique_ptr<ui::EngineBridge> m_bridge;
    FakeServices m_services;
    core::Settings m_settings;
    ui::UiContext m_ctx;
    QString m_scale = qEnvironmentVariable("QT_SCALE_FACTOR", QStringLiteral("1"));

    // A Training run page showing the long run, laid out at width x height.
    std::unique_ptr<ui::RunPage> longRunPage(int width, int height) {
        auto page = std::make_unique<ui::RunPage>(m_ctx, nullptr);
        page->resize(width, height);
        page->show();
        if (!QTest::qWaitForWindowExposed(page.get()))
            return nullptr;
        page->refresh();
        if (!QTest::qWaitFor([&] { return page->lossSeries()->count() > 0; }))
            return nullptr;
        QCoreApplication::processEvents();
        return page;
    }

  private slots:
    void initTestCase() {
        QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
        m_ledger = makeFixtureLedger(m_dir.path());
        // This computer's results went into the last 200 rounds (and 5, 6 from the fixture).
        for (int round = kRounds - 199; round <= kRounds; ++round) {
            core::WorkUnitRecord u;
            u.id = "r" + std::to_string(round);
            u.run = "1";
            u.state = core::WorkUnitState::Accepted;
            u.createdAtMs = kNowMs - 3600'000;
            u.updatedAtMs = u.createdAtMs;
            must(m_ledger->recordWorkUnit(u));
            core::Receipt r;
            r.workUnitId = u.id;
            r.roundApplied = round;
            r.weight = 1;
            r.credit = 1;
            r.receivedAtMs = u.createdAtMs;
            must(m_ledger->recordReceipt(r));
        }
        m_bridge = std::make_unique<ui::EngineBridge>(m_clock, m_zone);
        m_bridge->setLedger(m_ledger.get());
        m_settings.coordinatorUrl = "https://127.0.0.1:8443";
        m_ctx.bridge = m_bridge.get();
        m_ctx.services = &m_services;
        m_ctx.settings = &m_settings;
        m_services.history = longRun();
    }

    void decimationByHand() {
        // 10 points in 2 buckets of width 4.5: [0, 4.5) holds 0..4, [4.5, 9] holds 5..9.
        QList<QPointF> points;
        for (int i = 0; i < 10; ++i)
            points << QPointF(i, i == 2 ? 7 : i == 6 ? -1 : i);
        const auto out = ui::decimateMinMax(points, 2);
        // Bucket 1: min 0 at x=0, max 7 at x=2; bucket 2: min -1 at x=6, max 9 at x=9.
        QCOMPARE(out, (QList<QPointF>{{0, 0}, {2, 7}, {6, -1}, {9, 9}}));
        QCOMPARE(ui::decimateMinMax(points, 5), points);  // 10 <= 2 * 5: unchanged
        QCOMPARE(ui::niceTickStep(10'000, 10, 1), 1000.0);
        QCOMPARE(ui::niceTickStep(10'000, 4, 1), 5000.0);
        QCOMPARE(ui::niceTickStep(99, 8, 1), 20.0);  // 12.4 -> 20
        QCOMPARE(ui::niceTickStep(5, 10, 1), 1.0);   // never below a whole round
    }

    void runChartAt10000Rounds() {
        auto page = longRunPage(900, 560);
        QVERIFY(page);
        saveShot(page.get(), QStringLiteral("run-10000-") + m_scale + QStringLiteral("x"));
        // 400 buckets of about 25 falling rounds: each gives its first and its last.
        QLineSeries* loss = page->lossSeries();
        QCOMPARE(loss->count(), 2 * ui::RunPage::kLineBuckets);
        QCOMPARE(loss->at(0), QPointF(1, 5.0 - 1e-4));
        QCOMPARE(loss->at(loss->count() - 1), QPointF(kRounds, 5.0 - 1e-4 * kRounds));
        bool spike = false;
        for (const QPointF& p : loss->points())
            spike = spike || p == QPointF(5000, 9.0);
        QVERIFY2(spike, "the spike at round 5,000 was decimated away");
        QVERIFY(!loss->pointsVisible());
        QCOMPARE(page->roundAxis()->min(), 1.0);
        QCOMPARE(page->roundAxis()->max(), double(kRounds));

        // This computer's rounds 9,801..10,000 (and 5, 6) as marks along the bottom, at most one
        // per 9,999 / 800 = 12.5 rounds: 5, 9,801, 9,814, ... 9,996 (16 of the 200).
        QScatterSeries* mine = page->mineSeries();
        QCOMPARE(mine->count(), 1 + 16);
        QCOMPARE(mine->at(0).x(), 5.0);
        QCOMPARE(mine->at(1).x(), 9801.0);
        QCOMPARE(mine->at(16).x(), 9996.0);
        const double bottom = page->lossAxis()->min();
        const double span = page->lossAxis()->max() - bottom;
        for (const QPointF& p : mine->points())
            QVERIFY(p.y() >= bottom && p.y() < bottom + 0.05 * span);
        QCOMPARE(page->statusLabel()->text(),
                 QStringLiteral("Rounds with a contribution from this computer: 202 of 10,000."));

        // Regular ticks: a step of 1, 2 or 5 times a power of ten, labels on its multiples,
        // thousands separated in the locale's style.
        QValueAxis* axis = page->roundAxis();
        QCOMPARE(axis->tickType(), QValueAxis::TicksDynamic);
        const double step = axis->tickInterval();
        const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
        QVERIFY2(qFuzzyCompare(mantissa, 1.0) || qFuzzyCompare(mantissa, 2.0) ||
                     qFuzzyCompare(mantissa, 5.0),
                 qPrintable(QString::number(step)));
        QStringList texts;
        const QList<double> labels = roundLabels(page->chartView(), &texts);
        QVERIFY2(labels.size() >= 3, qPrintable(texts.join(u'|')));
        for (double v : labels)
            QVERIFY2(std::fmod(v, step) == 0, qPrintable(texts.join(u'|')));
        QVERIFY2(texts.contains(QStringLiteral("10,000")), qPrintable(texts.join(u'|')));

        // The last 100 rounds: every one of them drawn, every one of this computer's marked.
        auto* rounds = page->findChild<QComboBox*>(QStringLiteral("rounds"));
        QVERIFY(rounds);
        rounds->setCurrentIndex(int(ui::RunPage::Rounds::Last100));
        QCOMPARE(axis->min(), double(kRounds - 99));
        QCOMPARE(loss->count(), 100 + 1);  // and round 9,900, so the line reaches the edge
        QVERIFY(loss->pointsVisible() == false);
        QCOMPARE(mine->count(), 100);
        QVERIFY(axis->tickInterval() >= 1 && axis->tickInterval() <= 50);
        saveShot(page.get(), QStringLiteral("run-last100-") + m_scale + QStringLiteral("x"));

        // Zooming by hand (what the rubber band does) redraws the rounds in view in detail.
        axis->setRange(4990, 5010);
        QCOMPARE(loss->count(), 21 + 2);
        QVERIFY(loss->pointsVisible());
        QCOMPARE(page->lossAxis()->max() >= 9.0, true);
    }

    void germanNumbers() {
        QLocale::setDefault(QLocale(QLocale::German, QLocale::Germany));
        auto page = longRunPage(900, 560);
        QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
        QVERIFY(page);
        saveShot(page.get(), QStringLiteral("run-de-") + m_scale + QStringLiteral("x"));
        QStringList texts;
        QLocale::setDefault(QLocale(QLocale::German, QLocale::Germany));
        roundLabels(page->chartView(), &texts);
        QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
        QVERIFY2(texts.contains(QStringLiteral("10.000")), qPrintable(texts.join(u'|')));
        QVERIFY2(!texts.contains(QStringLiteral("10000")), qPrintable(texts.join(u'|')));
        // The loss axis with a decimal comma.
        bool comma = false;
        for (const DrawnText& d : drawnTexts(page->chartView()))
            comma = comma || d.text.contains(QRegularExpression(QStringLiteral("^\\d+,\\d\\d$")));
        QVERIFY(comma);
    }

    // A small chart (a page on a 2x screen) with a font half again as large: every label whole
    // (no "...") and inside the view.
    void labelsFitSmallChartLargeFont() {
        const QFont original = QApplication::font();
        QFont big = original;
        big.setPointSizeF(original.pointSizeF() * 1.5);
        QApplication::setFont(big);
        auto page = longRunPage(480, 420);
        QVERIFY(page);
        saveShot(page.get(), QStringLiteral("run-small-bigfont-") + m_scale + QStringLiteral("x"));
        const QRect inside = page->chartView()->viewport()->rect();
        const auto texts = drawnTexts(page->chartView());
        QVERIFY(texts.size() >= 5);
        for (const DrawnText& d : texts) {
            QVERIFY2(!d.text.contains(QStringLiteral("...")) && !d.text.contains(QChar(0x2026)),
                     qPrintable(d.text));
            QVERIFY2(inside.contains(d.rect.toAlignedRect()),
                     qPrintable(QStringLiteral("%1 at %2,%3 %4x%5 outside %6x%7")
                                    .arg(d.text)
                                    .arg(d.rect.x())
                                    .arg(d.rect.y())
                                    .arg(d.rect.width())
                                    .arg(d.rect.height())
                                    .arg(inside.width())
                                    .arg(inside.height())));
        }
        QApplication::setFont(original);
    }

    // The window fits the screen (at 2x the offscreen screen is 400 x 400), and its title
    // names Tandem once (Qt appends the display name to a title that does not end with it).
    void windowFitsTheScreen() {
        QGuiApplication::setApplicationDisplayName(QStringLiteral("Tandem"));
        ui::AppActions actions(m_bridge.get(), nullptr);
        ui::MainWindow window(m_ctx, &actions);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        const QRect available = window.screen()->availableGeometry();
        QVERIFY2(available.contains(window.frameGeometry()),
                 qPrintable(QStringLiteral("%1x%2 on %3x%4")
                                .arg(window.frameGeometry().width())
                                .arg(window.frameGeometry().height())
                                .arg(available.width())
                                .arg(available.height())));
        const QString title = window.windowTitle();
        QVERIFY2(
            title.endsWith(QStringLiteral("Tandem")) && title.count(QStringLiteral("Tandem")) == 1,
            qPrintable(title));
        QVERIFY2(title.startsWith(QStringLiteral("Not connected")), qPrintable(title));
    }

    // Every page at the size a window on a 1920 x 1080 screen at 2x leaves it (960 x 540 less
    // the navigation and the bars), in the usual font and one half again as large: every chart
    // label whole and inside its chart.
    void pageLabelsWhole_data() {
        QTest::addColumn<double>("fontScale");
        QTest::newRow("font 1x") << 1.0;
        QTest::newRow("font 1.5x") << 1.5;
    }
    void pageLabelsWhole() {
        QFETCH(double, fontScale);
        const QFont original = QApplication::font();
        QFont font = original;
        font.setPointSizeF(original.pointSizeF() * fontScale);
        QApplication::setFont(font);
        std::vector<std::unique_ptr<ui::Page>> pages;
        pages.push_back(std::make_unique<ui::OverviewPage>(m_ctx, nullptr));
        pages.push_back(std::make_unique<ui::ContributionsPage>(m_ctx, nullptr));
        pages.push_back(std::make_unique<ui::PerformancePage>(m_ctx, nullptr));
        pages.push_back(std::make_unique<ui::RunPage>(m_ctx, nullptr));
        pages.push_back(std::make_unique<ui::NetworkPage>(m_ctx, nullptr));
        for (size_t i = 0; i < pages.size(); ++i) {
            ui::Page* page = pages[i].get();
            page->resize(760, 460);
            page->show();
            QVERIFY(QTest::qWaitForWindowExposed(page));
            page->refresh();
            QTest::qWait(i == 3 ? 300 : 50);  // the run's status comes from the thread pool
            saveShot(page, QStringLiteral("page%1-font%2-").arg(i).arg(fontScale) + m_scale +
                               QStringLiteral("x"));
            for (QChartView* view : page->findChildren<QChartView*>()) {
                if (!view->isVisibleTo(page))
                    continue;
                // The chart is not wider than the page (which scrolls only downwards).
                QVERIFY2(view->mapTo(page, QPoint(view->width(), 0)).x() <= page->width(),
                         qPrintable(
                             QStringLiteral("page %1 is wider than %2").arg(i).arg(page->width())));
                const QRect inside = view->viewport()->rect();
                const auto texts = drawnTexts(view);
                QVERIFY(!texts.isEmpty());
                for (const DrawnText& d : texts) {
                    QVERIFY2(
                        !d.text.contains(QStringLiteral("...")) && !d.text.contains(QChar(0x2026)),
                        qPrintable(QStringLiteral("page %1: %2").arg(i).arg(d.text)));
                    QVERIFY2(inside.contains(d.rect.toAlignedRect()),
                             qPrintable(QStringLiteral("page %1: %2 outside").arg(i).arg(d.text)));
                }
            }
        }
        QApplication::setFont(original);
    }

    // Switched to a dark palette (the desktop's dark mode), every legend marker keeps its
    // series' colour, and the marks stay visible.
    void legendsMatchSeriesWhenDark() {
        QPalette dark;
        dark.setColor(QPalette::Window, QColor(0x20, 0x20, 0x20));
        dark.setColor(QPalette::Base, QColor(0x18, 0x18, 0x18));
        dark.setColor(QPalette::WindowText, Qt::white);
        dark.setColor(QPalette::Text, Qt::white);
        const QPalette light = QApplication::palette();
        auto page = longRunPage(900, 560);
        QVERIFY(page);
        QApplication::setPalette(dark);
        QCoreApplication::processEvents();
        saveShot(page.get(), QStringLiteral("run-dark-") + m_scale + QStringLiteral("x"));
        QChart* chart = page->chartView()->chart();
        QCOMPARE(chart->theme(), QChart::ChartThemeDark);
        const auto markers = chart->legend()->markers();
        QCOMPARE(markers.size(), 2);
        for (QLegendMarker* m : markers) {
            auto* series = qobject_cast<QXYSeries*>(m->series());
            QVERIFY(series);
            QCOMPARE(m->brush().color(), series->color());
            QVERIFY(m->isVisible());
            // Small marks show mostly their border: it must be the fill's (legend's) colour.
            if (auto* scatter = qobject_cast<QScatterSeries*>(series))
                QCOMPARE(scatter->borderColor(), scatter->color());
        }
        QApplication::setPalette(light);
    }
};

QTEST_MAIN(TestUiCharts)
#include "test_ui_charts.moc"
