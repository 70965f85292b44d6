#include "engine_bridge.hpp"
#include "engine_words.hpp"
#include "pages.hpp"
#include "state_view.hpp"

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDateTime>
#include <QDateTimeAxis>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QVBoxLayout>
#include <QValueAxis>

namespace tandem::ui {

namespace {
struct RangeSpec {
    int64_t spanMs;
    int64_t bucketMs;
    bool withDay;  // the axis names the weekday (ui/engine_words.hpp axisTimeFormat)
};
RangeSpec spec(PerformancePage::Range r) {
    switch (r) {
        case PerformancePage::Range::Hour:
            return {3600'000, 60'000, false};
        case PerformancePage::Range::Day:
            return {86400'000, 15 * 60'000, false};
        case PerformancePage::Range::Week:
            return {7 * 86400'000LL, 2 * 3600'000, true};
    }
    return {3600'000, 60'000, false};
}
// Chart axes show local time of the process; the ledger's times are UTC milliseconds.
qreal axisMs(int64_t ms) {
    return static_cast<qreal>(ms);
}
}  // namespace

PerformancePage::PerformancePage(const UiContext& context, QWidget* parent)
    : Page(context, parent) {
    auto* content = new QWidget(this);
    auto* layout = new QVBoxLayout(content);
    auto* head = new QHBoxLayout();
    auto* rangeLabel = new QLabel(tr("&Show:"), content);
    m_range = new QComboBox(content);
    m_range->setObjectName(QStringLiteral("range"));
    m_range->addItems({tr("Last hour"), tr("Last day"), tr("Last week")});
    m_range->setAccessibleName(tr("Time range"));
    rangeLabel->setBuddy(m_range);
    connect(m_range, &QComboBox::currentIndexChanged, this, [this] { refresh(); });
    m_summary = new QLabel(content);
    m_summary->setObjectName(QStringLiteral("summary"));
    head->addWidget(rangeLabel);
    head->addWidget(m_range);
    head->addSpacing(16);
    head->addWidget(m_summary, 1);
    layout->addLayout(head);

    auto* view = makeChartView(tr("Training speed over time"), content);
    m_chart = view->chart();
    m_chart->setTitle(tr("Training speed (tokens/s)"));
    m_tokens = new QLineSeries();
    m_tokens->setName(tr("tokens/s"));
    m_chart->addSeries(m_tokens);
    m_axisX = new QDateTimeAxis();
    m_axisY = new QValueAxis();
    m_axisY->setLabelFormat(QStringLiteral("%.0f"));
    m_chart->addAxis(m_axisX, Qt::AlignBottom);
    m_chart->addAxis(m_axisY, Qt::AlignLeft);
    m_tokens->attachAxis(m_axisX);
    m_tokens->attachAxis(m_axisY);
    m_chart->legend()->hide();
    layout->addWidget(view, 1);

    m_deviceView = makeChartView(tr("Device utilisation and temperature"), content);
    m_deviceChart = m_deviceView->chart();
    m_deviceChart->setTitle(tr("Device"));
    m_util = new QLineSeries();
    m_util->setName(tr("utilisation (%)"));
    m_temp = new QLineSeries();
    m_temp->setName(tr("temperature (°C)"));
    m_deviceChart->addSeries(m_util);
    m_deviceChart->addSeries(m_temp);
    m_deviceX = new QDateTimeAxis();
    m_deviceY = new QValueAxis();
    m_deviceY->setRange(0, 100);
    m_deviceY->setLabelFormat(QStringLiteral("%.0f"));
    m_deviceChart->addAxis(m_deviceX, Qt::AlignBottom);
    m_deviceChart->addAxis(m_deviceY, Qt::AlignLeft);
    for (auto* s : {m_util, m_temp}) {
        s->attachAxis(m_deviceX);
        s->attachAxis(m_deviceY);
    }
    layout->addWidget(m_deviceView, 1);
    m_deviceNote = new QLabel(content);
    m_deviceNote->setObjectName(QStringLiteral("deviceNote"));
    m_deviceNote->setWordWrap(true);
    layout->addWidget(m_deviceNote);
    setContent(content);
}

void PerformancePage::setRange(Range range) {
    m_range->setCurrentIndex(static_cast<int>(range));
}

void PerformancePage::refresh() {
    core::Ledger* ledger = m_ctx.bridge->ledger();
    const auto r = spec(static_cast<Range>(m_range->currentIndex()));
    const int64_t to = nowMs() + 1;
    // Buckets on whole multiples of their length (minutes, quarter hours), so points do not
    // shift from one refresh to the next.
    const int64_t from = (to - r.spanMs) / r.bucketMs * r.bucketMs;
    auto points = ledger ? ledger->throughput(from, to, r.bucketMs)
                         : tandem::Expected<std::vector<core::ThroughputPoint>>(
                               std::vector<core::ThroughputPoint>{});
    if (!points) {
        setEmpty(tr("The ledger cannot be read: %1")
                     .arg(QString::fromStdString(points.error().message)));
        return;
    }
    if (points->empty()) {
        bool any = false;
        if (ledger) {
            auto week = ledger->throughput(to - 7 * 86400'000LL, to, 86400'000);
            any = week && !week->empty();
        }
        if (!any) {
            setEmpty(
                tr("No speed measurements yet. While Tandem trains, it records the tokens "
                   "per second (and the GPU's utilisation and temperature, where the driver "
                   "reports them) once a minute."));
            return;
        }
    }
    setEmpty(QString());

    QList<QPointF> tokens, util, temp;
    double peak = 0, sum = 0;
    int64_t n = 0;
    for (const auto& p : *points) {
        tokens << QPointF(axisMs(p.atMs), p.tokensPerSecond);
        peak = std::max(peak, p.tokensPerSecond);
        sum += p.tokensPerSecond * static_cast<double>(p.samples);
        n += p.samples;
        if (p.utilisation)
            util << QPointF(axisMs(p.atMs), *p.utilisation * 100);
        if (p.temperatureC)
            temp << QPointF(axisMs(p.atMs), *p.temperatureC);
    }
    m_tokens->replace(tokens);
    const auto fromDt = QDateTime::fromMSecsSinceEpoch(from);
    const auto toDt = QDateTime::fromMSecsSinceEpoch(to);
    m_axisX->setRange(fromDt, toDt);
    m_axisX->setFormat(axisTimeFormat(r.withDay));
    m_axisY->setRange(0, peak > 0 ? peak * 1.15 : 1);
    m_axisY->applyNiceNumbers();
    const QLocale loc;
    if (points->empty())
        m_summary->setText(tr("No training in this period; a longer range shows earlier work."));
    else
        m_summary->setText(tr("average %1 tokens/s, peak %2 tokens/s, samples: %3")
                               .arg(loc.toString(n ? sum / static_cast<double>(n) : 0, 'f', 0),
                                    loc.toString(peak, 'f', 0))
                               .arg(n));

    m_util->replace(util);
    m_temp->replace(temp);
    m_deviceX->setRange(fromDt, toDt);
    m_deviceX->setFormat(axisTimeFormat(r.withDay));
    double top = 100;
    for (const auto& p : temp)
        top = std::max(top, p.y() + 5);
    m_deviceY->setRange(0, top);
    const bool known = !util.isEmpty() || !temp.isEmpty();
    m_deviceView->setVisible(known);
    m_deviceNote->setText(known ? QString()
                                : tr("This device reports no utilisation or temperature (the "
                                     "CPU, or a GPU without NVML)."));
    m_deviceNote->setVisible(!known);
}

}  // namespace tandem::ui
