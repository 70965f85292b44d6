#include "async.hpp"
#include "engine_bridge.hpp"
#include "pages.hpp"
#include "state_view.hpp"

#include <QChart>
#include <QChartView>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QPushButton>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>

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

    auto* view = makeChartView(tr("Global validation loss per round"), content);
    m_chart = view->chart();
    m_chart->setTitle(tr("Validation loss of the shared model, per round"));
    m_loss = new QLineSeries();
    m_loss->setName(tr("validation loss"));
    m_loss->setPointsVisible(true);  // a run with one evaluated round still shows it
    m_mine = new QScatterSeries();
    m_mine->setName(tr("rounds with your contribution"));
    m_mine->setMarkerSize(10);
    m_chart->addSeries(m_loss);
    m_chart->addSeries(m_mine);
    m_axisX = new QValueAxis();
    m_axisX->setTitleText(tr("round"));
    m_axisX->setLabelFormat(QStringLiteral("%d"));
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
    layout->addWidget(view, 1);

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
    QString summary = tr("Run %1, round %2 open. Workers active: %3. Tokens trained in all: %4. "
                         "Model: %5.")
                          .arg(info.runId)
                          .arg(info.round)
                          .arg(info.activeWorkers)
                          .arg(formatTokens(info.totalTokens), info.model);
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
    QList<QPointF> loss, marked;
    double lo = 1e300, hi = -1e300;
    for (const auto& r : info.history) {
        if (!r.valLoss)
            continue;
        const QPointF p(static_cast<qreal>(r.round), *r.valLoss);
        loss << p;
        if (mine.count(r.round))
            marked << p;
        lo = std::min(lo, *r.valLoss);
        hi = std::max(hi, *r.valLoss);
    }
    m_loss->replace(loss);
    m_mine->replace(marked);
    if (loss.isEmpty()) {
        setEmpty(tr("The run has no evaluated round yet (round %1 is open). The loss curve "
                    "appears once the coordinator has closed and evaluated the first round.")
                     .arg(info.round));
        return;
    }
    setEmpty(QString());
    m_axisX->setRange(loss.front().x(), std::max(loss.back().x(), loss.front().x() + 1));
    m_axisX->setTickCount(std::min<int>(11, std::max<int>(2, static_cast<int>(loss.size()))));
    const double pad = std::max(0.05, (hi - lo) * 0.1);
    m_axisY->setRange(std::max(0.0, lo - pad), hi + pad);
    m_axisY->applyNiceNumbers();
    if (marked.isEmpty())
        m_status->setText(tr("None of these rounds has a result from this computer yet."));
    else
        m_status->setText(tr("Rounds with a contribution from this computer: %1 of %2.")
                              .arg(marked.size())
                              .arg(loss.size()));
}

}  // namespace tandem::ui
