#include "async.hpp"
#include "chart_axes.hpp"
#include "engine_bridge.hpp"
#include "model_text.hpp"
#include "pages.hpp"
#include "state_view.hpp"

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QPushButton>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <set>

namespace tandem::ui {

RunPage::RunPage(const UiContext& context, QWidget* parent) : Page(context, parent) {
    auto* content = new QWidget(this);
    auto* layout = new QVBoxLayout(content);
    auto* head = new QHBoxLayout();
    m_summary = new QLabel(content);
    m_summary->setObjectName(QStringLiteral("summary"));
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_reload = new QPushButton(tr("&Refresh"), content);
    m_reload->setObjectName(QStringLiteral("reload"));
    m_reload->setAccessibleName(tr("Ask the coordinator again"));
    connect(m_reload, &QPushButton::clicked, this, &RunPage::reload);
    head->addWidget(m_summary, 1);
    head->addWidget(m_reload, 0, Qt::AlignTop);
    layout->addLayout(head);
    m_status = new QLabel(content);
    m_status->setObjectName(QStringLiteral("status"));
    m_status->setWordWrap(true);
    layout->addWidget(m_status);

    auto* rangeRow = new QHBoxLayout();
    auto* roundsLabel = new QLabel(tr("&Show:"), content);
    m_rounds = new QComboBox(content);
    m_rounds->setObjectName(QStringLiteral("rounds"));
    m_rounds->addItems({tr("All rounds"), tr("The last %L1 rounds").arg(1000),
                        tr("The last %L1 rounds").arg(100)});
    m_rounds->setAccessibleName(tr("Rounds shown in the chart"));
    roundsLabel->setBuddy(m_rounds);
    connect(m_rounds, &QComboBox::currentIndexChanged, this, [this] { applyRounds(); });
    rangeRow->addWidget(roundsLabel);
    rangeRow->addWidget(m_rounds);
    auto* zoomHint =
        new QLabel(tr("Drag across the chart to zoom in, right-click to zoom out."), content);
    zoomHint->setWordWrap(true);
    rangeRow->addWidget(zoomHint, 1);
    layout->addLayout(rangeRow);

    layout->addWidget(
        makeChartTitle(tr("Validation loss of the shared model, per round"), content));
    m_view = makeChartView(tr("Global validation loss per round"), content);
    m_view->setObjectName(QStringLiteral("lossChart"));
    m_view->setRubberBand(QChartView::HorizontalRubberBand);
    m_chart = m_view->chart();
    m_loss = new QLineSeries();
    m_loss->setName(tr("validation loss"));
    m_mine = new QScatterSeries();
    m_mine->setName(tr("your contributions"));
    m_mine->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    m_mine->setMarkerSize(6);
    m_chart->addSeries(m_loss);
    m_chart->addSeries(m_mine);
    m_mine->setBorderColor(m_mine->color());  // the theme's colour, as in the legend
    m_axisX = new QValueAxis();
    m_axisX->setTitleText(tr("round"));
    // "%.0f": with localized numbers, Qt 6.4 draws no labels for "%d".
    m_axisX->setLabelFormat(QStringLiteral("%.0f"));
    m_axisY = new QValueAxis();
    m_axisY->setTitleText(tr("loss"));
    m_axisY->setLabelFormat(QStringLiteral("%.2f"));
    m_chart->addAxis(m_axisX, Qt::AlignBottom);
    m_chart->addAxis(m_axisY, Qt::AlignLeft);
    for (QXYSeries* s : {static_cast<QXYSeries*>(m_loss), static_cast<QXYSeries*>(m_mine)}) {
        s->attachAxis(m_axisX);
        s->attachAxis(m_axisY);
    }
    m_chart->legend()->show();
    // Zooming by hand (rubber band, right-click) redraws the rounds in view at full detail.
    connect(m_axisX, &QValueAxis::rangeChanged, this, [this] {
        if (!m_settingRange)
            redraw();
    });
    connect(m_chart, &QChart::plotAreaChanged, this, [this] { updateTicks(); });
    layout->addWidget(m_view, 1);

    // The prompt in bold, then the model's continuation; wraps anywhere and never widens the
    // window (a continuation may be one long word).
    m_sampleBox = new QGroupBox(tr("What the model writes now"), content);
    m_sampleBox->setObjectName(QStringLiteral("sampleBox"));
    auto* sampleLayout = new QVBoxLayout(m_sampleBox);
    m_sample = new QLabel(m_sampleBox);
    m_sample->setObjectName(QStringLiteral("sample"));
    m_sample->setWordWrap(true);
    m_sample->setTextFormat(Qt::RichText);
    m_sample->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_sample->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    sampleLayout->addWidget(m_sample);
    m_sampleBox->hide();
    layout->addWidget(m_sampleBox);
    setContent(content);
    setEmpty(tr("Asking the coordinator for the training run's progress…"));
}

void RunPage::refresh() {
    if (m_asking)
        return;
    if (m_lastAskedMs == 0 || nowMs() - m_lastAskedMs >= 60'000)
        reload();
}

void RunPage::reload() {
    if (!m_ctx.services || !m_ctx.settings) {
        setEmpty(tr("The training run's progress is not available in this build."));
        return;
    }
    if (m_ctx.settings->coordinatorUrl.empty()) {
        setEmpty(
            tr("No coordinator chosen yet. Choose one in Settings to see the training run's "
               "loss curve here."));
        return;
    }
    m_asking = true;
    m_lastAskedMs = nowMs();
    m_reload->setEnabled(false);
    m_status->setText(tr("Asking the coordinator…"));
    Services* services = m_ctx.services;
    const core::Settings settings = *m_ctx.settings;
    runAsync<RunInfo>(
        this, [services, settings] { return services->runStatus(settings); },
        [this](RunInfo info) { showRun(info); });
}

void RunPage::showSample(const RunInfo& info) {
    m_sampleBox->setVisible(info.sampleVersion > 0);
    if (info.sampleVersion <= 0)
        return;
    // Break-anywhere spaces after long runs of non-space, so no word is wider than the label.
    auto escaped = [](const QString& text) {
        QString out;
        int run = 0;
        for (const QChar c : text) {
            run = c.isSpace() ? 0 : run + 1;
            out += QString(c).toHtmlEscaped();
            if (run > 0 && run % 40 == 0)
                out += QChar(0x200B);  // zero-width space: a place to wrap
        }
        return out;
    };
    m_sampleBox->setTitle(
        tr("What the model writes now (after round %1)").arg(info.sampleVersion - 1));
    m_sample->setText(QStringLiteral("<p style=\"white-space: pre-wrap\"><b>%1</b>%2</p>")
                          .arg(escaped(info.samplePrompt), escaped(info.sampleText)));
}

void RunPage::showRun(const RunInfo& info) {
    m_asking = false;
    m_reload->setEnabled(true);
    if (!info.ok) {
        m_status->setText(tr("Could not reach the coordinator: %1").arg(info.error));
        if (m_loss->count() == 0)
            setEmpty(tr("Could not reach the coordinator: %1\nTandem asks again in a minute.")
                         .arg(info.error));
        return;
    }
    const QLocale loc;
    m_status->setText(QString());
    QString summary = tr("Run %1, round %L2 open. Workers active: %L3. Tokens trained in all: "
                         "%4. Model: %5.")
                          .arg(info.runId)
                          .arg(info.round)
                          .arg(info.activeWorkers)
                          .arg(formatTokens(info.totalTokens), info.modelConfig.layers > 0
                                                                   ? modelInWords(info.modelConfig)
                                                                   : modelInWords(info.model));
    if (!info.latestExportPath.isEmpty())
        summary += QLatin1Char(' ') + tr("Latest export of the model: %1 (%2, version %3).")
                                          .arg(info.latestExportPath, info.latestExportFormat)
                                          .arg(info.latestExportVersion);
    m_summary->setText(summary);

    showSample(info);

    // The rounds this machine's results were applied to, from the receipts in the ledger.
    std::set<int64_t> mine;
    if (core::Ledger* ledger = m_ctx.bridge->ledger()) {
        if (auto rows = ledger->workUnits(100000)) {
            for (const auto& r : *rows)
                if (r.receipt)
                    mine.insert(r.receipt->roundApplied);
        }
    }
    m_history.clear();
    m_mineRounds.clear();
    for (const auto& r : info.history) {
        if (!r.valLoss)
            continue;
        m_history << QPointF(static_cast<qreal>(r.round), *r.valLoss);
        if (mine.count(r.round))
            m_mineRounds << static_cast<qreal>(r.round);
    }
    std::sort(m_history.begin(), m_history.end(),
              [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
    std::sort(m_mineRounds.begin(), m_mineRounds.end());
    if (m_history.isEmpty()) {
        m_loss->clear();
        m_mine->clear();
        setEmpty(tr("The run has no evaluated round yet (round %1 is open). The loss curve "
                    "appears once the coordinator has closed and evaluated the first round.")
                     .arg(info.round));
        return;
    }
    setEmpty(QString());
    applyRounds();
    if (m_mineRounds.isEmpty())
        m_status->setText(tr("None of these rounds has a result from this computer yet."));
    else
        m_status->setText(tr("Rounds with a contribution from this computer: %L1 of %L2.")
                              .arg(m_mineRounds.size())
                              .arg(m_history.size()));
}

void RunPage::showRounds(Rounds rounds) {
    m_rounds->setCurrentIndex(static_cast<int>(rounds));
}

void RunPage::applyRounds() {
    if (m_history.isEmpty())
        return;
    const qreal first = m_history.front().x(), last = m_history.back().x();
    qreal from = first;
    switch (static_cast<Rounds>(m_rounds->currentIndex())) {
        case Rounds::All:
            break;
        case Rounds::Last1000:
            from = std::max(first, last - 999);
            break;
        case Rounds::Last100:
            from = std::max(first, last - 99);
            break;
    }
    const qreal to = std::max(last, from + 1);
    setRegularTicks(m_axisX, m_chart->locale(), m_chart->plotArea().width(), from, to, 1);
    m_settingRange = true;
    m_axisX->setRange(from, to);
    m_settingRange = false;
    redraw();
}

void RunPage::redraw() {
    if (m_history.isEmpty())
        return;
    const qreal lo = m_axisX->min(), hi = m_axisX->max();
    auto byX = [](const QPointF& p, qreal x) { return p.x() < x; };
    // The rounds in view, and one on either side so the line runs to the edges.
    auto begin = std::lower_bound(m_history.cbegin(), m_history.cend(), lo, byX);
    auto end = std::upper_bound(m_history.cbegin(), m_history.cend(), hi,
                                [](qreal x, const QPointF& p) { return x < p.x(); });
    double yLo = 1e300, yHi = -1e300;
    for (auto it = begin; it != end; ++it) {
        yLo = std::min(yLo, it->y());
        yHi = std::max(yHi, it->y());
    }
    const qsizetype inView = end - begin;
    if (begin != m_history.cbegin())
        --begin;
    if (end != m_history.cend())
        ++end;
    const QList<QPointF> visible(begin, end);
    if (inView == 0)
        for (const QPointF& p : visible) {
            yLo = std::min(yLo, p.y());
            yHi = std::max(yHi, p.y());
        }
    m_loss->replace(decimateMinMax(visible, kLineBuckets));
    m_loss->setPointsVisible(inView <= 50);  // a run with one evaluated round still shows it
    const double pad = std::max(0.05, (yHi - yLo) * 0.1);
    m_axisY->setRange(std::max(0.0, yLo - pad), yHi + pad);
    m_axisY->applyNiceNumbers();

    // This computer's rounds as marks in a strip along the bottom, one per slot of the width.
    const qreal stripY = m_axisY->min() + (m_axisY->max() - m_axisY->min()) * 0.02;
    const qreal slot = (hi - lo) / (2 * kLineBuckets);
    QList<QPointF> marks;
    auto mark = std::lower_bound(m_mineRounds.cbegin(), m_mineRounds.cend(), lo);
    for (; mark != m_mineRounds.cend() && *mark <= hi; ++mark)
        if (marks.isEmpty() || *mark - marks.back().x() >= slot)
            marks << QPointF(*mark, stripY);
    m_mine->replace(marks);
    updateTicks();
}

void RunPage::updateTicks() {
    if (m_history.isEmpty())
        return;
    setRegularTicks(m_axisX, m_chart->locale(), m_chart->plotArea().width(), m_axisX->min(),
                    m_axisX->max(), 1);
}

}  // namespace tandem::ui
