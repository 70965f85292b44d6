#include "async.hpp"
#include "chart_axes.hpp"
#include "engine_bridge.hpp"
#include "engine_words.hpp"
#include "pages.hpp"
#include "receipt_dialog.hpp"
#include "state_view.hpp"
#include "unit_files.hpp"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include <cmath>

namespace tandem::ui {

ContributionsPage::ContributionsPage(const UiContext& context, QWidget* parent)
    : Page(context, parent) {
    auto* content = new QWidget(this);
    auto* layout = new QVBoxLayout(content);

    auto* top = new QHBoxLayout();
    auto* totalsBox = new QGroupBox(tr("Totals"), content);
    auto* grid = new QGridLayout(totalsBox);
    const std::pair<const char*, QString> rows[] = {
        {"units", tr("Work units:")},       {"tokens", tr("Tokens trained:")},
        {"gpu", tr("GPU-hours:")},          {"compute", tr("Compute hours:")},
        {"credit", tr("Credit:")},          {"sent", tr("Data sent:")},
        {"received", tr("Data received:")},
    };
    int r = 0;
    for (const auto& [key, label] : rows) {
        auto* name = new QLabel(label, totalsBox);
        auto* value = new QLabel(totalsBox);
        value->setObjectName(QStringLiteral("total_") + QLatin1String(key));
        value->setTextInteractionFlags(Qt::TextSelectableByMouse);
        value->setWordWrap(true);  // never wider than a narrow window
        name->setBuddy(value);
        grid->addWidget(name, r / 2, (r % 2) * 2);
        grid->addWidget(value, r / 2, (r % 2) * 2 + 1);
        m_totals[QLatin1String(key)] = value;
        ++r;
    }
    // What credit is, where it is shown.
    const QString creditMeaning =
        tr("Credit: one for each token your accepted work units trained. The leaderboard ranks "
           "donors by it; it is not money.");
    m_totals["credit"]->setToolTip(creditMeaning);
    auto* creditNote = new QLabel(creditMeaning, totalsBox);
    creditNote->setObjectName(QStringLiteral("creditNote"));
    creditNote->setWordWrap(true);
    grid->addWidget(creditNote, (r + 1) / 2, 0, 1, 4);
    top->addWidget(totalsBox, 1);
    auto* rankBox = new QGroupBox(tr("Leaderboard"), content);
    auto* rankLayout = new QVBoxLayout(rankBox);
    // Names come from other donors' choices: shown as text, never as markup.
    auto rankLine = [rankBox, rankLayout](const char* name) {
        auto* label = new QLabel(rankBox);
        label->setObjectName(QLatin1String(name));
        label->setTextFormat(Qt::PlainText);
        label->setWordWrap(true);
        label->setTextInteractionFlags(Qt::TextSelectableByMouse);
        rankLayout->addWidget(label);
        return label;
    };
    m_rank = rankLine("rank");
    m_teamRank = rankLine("teamRank");
    m_teamRank->hide();
    rankLayout->addStretch(1);
    top->addWidget(rankBox);
    layout->addLayout(top);

    auto* chartHead = new QHBoxLayout();
    auto* chartTitle = new QLabel(tr("Per day, last %1 days:").arg(kDays), content);
    m_metric = new QComboBox(content);
    m_metric->setObjectName(QStringLiteral("metric"));
    m_metric->addItem(tr("Tokens"));
    m_metric->addItem(tr("GPU-hours"));
    m_metric->addItem(tr("Compute hours (GPU or CPU)"));
    m_metric->setAccessibleName(tr("What the chart shows"));
    chartTitle->setBuddy(m_metric);
    chartHead->addWidget(chartTitle);
    chartHead->addWidget(m_metric);
    chartHead->addStretch(1);
    layout->addLayout(chartHead);
    connect(m_metric, &QComboBox::currentIndexChanged, this, [this] { refresh(); });

    m_view = makeChartView(tr("Contributions per day"), content);
    m_chart = m_view->chart();
    m_series = new QBarSeries();
    m_set = new QBarSet(tr("Tokens"));
    m_series->append(m_set);
    m_chart->addSeries(m_series);
    m_axisX = new QBarCategoryAxis();
    m_axisY = new QValueAxis();
    m_axisY->setLabelFormat(QStringLiteral("%.3g"));
    m_chart->addAxis(m_axisX, Qt::AlignBottom);
    m_chart->addAxis(m_axisY, Qt::AlignLeft);
    m_series->attachAxis(m_axisX);
    keepCategoryLabelsWhole(m_chart, m_axisX);
    m_series->attachAxis(m_axisY);
    m_chart->legend()->hide();
    layout->addWidget(m_view, 1);

    m_table = makeRecordTable(
        QStringLiteral("workUnits"), tr("Work units"),
        {tr("Work unit"), tr("Trained"), tr("State"), tr("Tokens"), tr("Loss (first → last)"),
         tr("Device"), tr("Receipt, or why it did not count")},
        content);
    m_table->setAlternatingRowColors(true);
    layout->addWidget(m_table, 1);
    auto* receiptRow = new QHBoxLayout();
    m_showReceipt = new QPushButton(tr("&Receipt…"), content);
    m_showReceipt->setObjectName(QStringLiteral("showReceipt"));
    m_showReceipt->setToolTip(
        tr("The chosen unit's receipt: its signature, checked against the coordinator's key"));
    m_showReceipt->setEnabled(false);
    receiptRow->addStretch(1);
    receiptRow->addWidget(m_showReceipt);
    layout->addLayout(receiptRow);
    auto receiptOfCurrentRow = [this] {
        const int row = m_table->currentRow();
        return row >= 0 && size_t(row) < m_receipts.size() && m_receipts[size_t(row)];
    };
    connect(m_table, &QTableWidget::currentCellChanged, this,
            [this, receiptOfCurrentRow] { m_showReceipt->setEnabled(receiptOfCurrentRow()); });
    connect(m_showReceipt, &QPushButton::clicked, this,
            [this] { openReceipt(m_table->currentRow()); });
    connect(m_table, &QTableWidget::cellDoubleClicked, this,
            [this](int row, int) { openReceipt(row); });
    setContent(content);
}

void ContributionsPage::setMetric(Metric metric) {
    m_metric->setCurrentIndex(static_cast<int>(metric));
}

QString ContributionsPage::totalText(const QString& key) const {
    auto it = m_totals.find(key);
    return it == m_totals.end() ? QString() : it->second->text();
}

void ContributionsPage::refresh() {
    core::Ledger* ledger = m_ctx.bridge->ledger();
    const QLocale loc;
    auto totals = ledger ? ledger->totals() : tandem::Expected<core::Totals>(core::Totals{});
    auto units =
        ledger ? ledger->workUnits(200)
               : tandem::Expected<std::vector<core::WorkUnitRow>>(std::vector<core::WorkUnitRow>{});
    if (!totals || !units) {
        setEmpty(tr("The ledger cannot be read: %1")
                     .arg(QString::fromStdString(!totals ? totals.error().message
                                                         : units.error().message)));
        return;
    }
    if (units->empty()) {
        const auto s = m_ctx.bridge->snapshot();
        if (s.current && s.current->etaMs)
            setEmpty(tr("No contributions yet: the first work unit finishes in about %1.")
                         .arg(formatDuration(*s.current->etaMs)));
        else if (m_ctx.bridge->attached())
            setEmpty(
                tr("No contributions yet. Tandem trains a work unit as soon as the "
                   "coordinator hands one out; each one shows up here with its receipt."));
        else
            setEmpty(tr("No contributions yet. Choose a coordinator in Settings to start."));
        return;
    }
    setEmpty(QString());

    const auto& t = *totals;
    m_totals["units"]->setText(tr("%L1 trained, %L2 accepted, %L3 waiting for a receipt")
                                   .arg(t.workUnitsTrained)
                                   .arg(t.workUnitsAccepted)
                                   .arg(t.workUnitsPending));
    m_totals["tokens"]->setText(loc.toString(static_cast<qlonglong>(t.tokens)));
    m_totals["gpu"]->setText(loc.toString(t.gpuSeconds / 3600, 'f', 2));
    m_totals["compute"]->setText(loc.toString(t.computeSeconds / 3600, 'f', 2));
    m_totals["credit"]->setText(loc.toString(t.credit, 'f', 1));
    m_totals["sent"]->setText(formatBytes(t.bytesUp));
    m_totals["received"]->setText(formatBytes(t.bytesDown));
    askStandingIfDue(t.workUnitsAccepted);

    // Chart: the last kDays local days, today included.
    const auto today = core::toLocal(nowMs(), zone()).date;
    const auto first = today.plusDays(-(kDays - 1));
    auto days = ledger->totalsPerDay(first, today, zone());
    const auto metric = static_cast<Metric>(m_metric->currentIndex());
    QStringList categories;
    QList<qreal> values;
    double maxValue = 0;
    if (days) {
        for (const auto& d : *days) {
            categories << formatDayMonth(d.date);
            double v = 0;
            switch (metric) {
                case Metric::Tokens:
                    v = static_cast<double>(d.tokens);
                    break;
                case Metric::GpuHours:
                    v = d.gpuSeconds / 3600;
                    break;
                case Metric::ComputeHours:
                    v = d.computeSeconds / 3600;
                    break;
            }
            values << v;
            maxValue = std::max(maxValue, v);
        }
    }
    m_set->setLabel(m_metric->currentText());
    m_set->remove(0, m_set->count());
    m_set->append(values);
    m_axisX->setCategories(categories);
    m_axisY->setRange(0, maxValue > 0 ? maxValue * 1.1 : 1);
    m_axisY->applyNiceNumbers();
    m_axisY->setLabelFormat(metric == Metric::Tokens ? QStringLiteral("%.0f")
                                                     : QStringLiteral("%.2f"));
    m_axisY->setTitleText(m_metric->currentText());

    // Why a unit did not count, in plain words (its last transition's code).
    auto endReason = [&](const std::string& id) {
        auto transitions = ledger->transitions(id);
        if (!transitions || transitions->empty() || transitions->back().detail.empty())
            return QStringLiteral("–");
        return unitEndText(transitions->back().detail);
    };
    m_table->setRowCount(static_cast<int>(units->size()));
    m_receipts.clear();
    int row = 0;
    for (const auto& w : *units) {
        const auto& u = w.unit;
        auto set = [&](int col, const QString& text) {
            auto* item = new QTableWidgetItem(text);
            item->setToolTip(text);
            if (col == 3)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_table->setItem(row, col, item);
        };
        m_receipts.push_back(w.receipt);
        set(0, QString::fromStdString(u.id));
        set(1, u.trainedAtMs ? formatDateTime(*u.trainedAtMs, zone()) : QStringLiteral("–"));
        // A unit stopped early (paused, quitting) sent a partial result.
        const bool partial = u.trainedAtMs && u.steps > 0 && u.steps < u.innerSteps;
        set(2, partial ? tr("%1 (partial: %2 of %3 steps)")
                             .arg(workUnitStateText(u.state))
                             .arg(u.steps)
                             .arg(u.innerSteps)
                       : workUnitStateText(u.state));
        set(3, loc.toString(static_cast<qlonglong>(u.tokens)));
        set(4, u.lossFirst && u.lossLast
                   ? QStringLiteral("%1 → %2").arg(loc.toString(*u.lossFirst, 'f', 3),
                                                   loc.toString(*u.lossLast, 'f', 3))
                   : QStringLiteral("–"));
        set(5, QString::fromStdString(u.device));
        if (w.receipt)
            set(6, tr("round %1, weight %2, credit %3, %4")
                       .arg(w.receipt->roundApplied)
                       .arg(loc.toString(w.receipt->weight, 'f', 0),
                            loc.toString(w.receipt->credit, 'f', 1),
                            formatDateTime(w.receipt->receivedAtMs, zone())));
        else if (u.state == core::WorkUnitState::Abandoned ||
                 u.state == core::WorkUnitState::Rejected)
            set(6, endReason(u.id));
        else
            set(6, QStringLiteral("–"));
        ++row;
    }
    m_table->resizeColumnsToContents();
}

ReceiptDialog* ContributionsPage::openReceipt(int row) {
    if (row < 0 || size_t(row) >= m_receipts.size() || !m_receipts[size_t(row)])
        return nullptr;
    // registration.json lies where the engine keeps its work (core::DataDir).
    std::filesystem::path dir = m_ctx.dataDirectory;
    if (m_ctx.settings && !m_ctx.settings->dataDirectory.empty())
        dir = m_ctx.settings->dataDirectory;
    // The table's rows carry receipts without their signature and body: read it whole.
    core::Ledger* ledger = m_ctx.bridge->ledger();
    auto full = ledger ? ledger->receipt(m_receipts[size_t(row)]->workUnitId)
                       : tandem::Expected<std::optional<core::Receipt>>(std::nullopt);
    if (!full || !*full)
        return nullptr;
    auto* dialog = new ReceiptDialog(**full, core::DataDir(dir).registrationFile(), zone(), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->open();
    return dialog;
}

void ContributionsPage::showEvent(QShowEvent* event) {
    m_standingWanted = true;
    Page::showEvent(event);
}

void ContributionsPage::askStandingIfDue(int64_t accepted) {
    if (accepted != m_standingAccepted)
        m_standingWanted = true;
    if (!m_standingWanted || m_standingAsking || !m_ctx.services || !m_ctx.settings ||
        m_ctx.settings->coordinatorUrl.empty())
        return;
    if (m_standingAskedMs != 0 && nowMs() - m_standingAskedMs < 60'000)
        return;
    m_standingWanted = false;
    m_standingAsking = true;
    m_standingAskedMs = nowMs();
    m_standingAccepted = accepted;
    if (m_rank->text().isEmpty())
        m_rank->setText(tr("Asking the coordinator for your rank…"));
    Services* services = m_ctx.services;
    const core::Settings settings = *m_ctx.settings;
    runAsync<StandingInfo>(
        this, [services, settings] { return services->standing(settings); },
        [this](StandingInfo info) {
            m_standingAsking = false;
            if (!info.ok)
                m_standingWanted = true;  // the coordinator was down: again after the minute
            showStanding(info);
        });
}

void ContributionsPage::showStanding(const StandingInfo& info) {
    m_teamRank->setVisible(info.ok && info.registered && !info.team.isEmpty());
    if (!info.ok) {
        m_rank->setText(tr("Your rank is not available right now: the coordinator cannot be "
                           "reached (%1). Tandem asks again later.")
                            .arg(info.error));
        return;
    }
    if (!info.registered) {
        m_rank->setText(tr("Not ranked yet: Tandem has not registered with this coordinator."));
        return;
    }
    if (info.rank <= 0)
        m_rank->setText(tr("Not ranked yet: the leaderboard counts accepted results."));
    else if (info.anonymous)
        m_rank->setText(tr("Rank %1 of %2 donors, shown as “anonymous” (choose a public name "
                           "in Settings)")
                            .arg(info.rank)
                            .arg(info.donorCount));
    else
        m_rank->setText(tr("Rank %1 of %2 donors").arg(info.rank).arg(info.donorCount));
    if (info.team.isEmpty())
        return;
    if (info.teamRank <= 0)
        m_teamRank->setText(tr("Team %1: not ranked yet").arg(info.team));
    else
        m_teamRank->setText(
            tr("Team %1: rank %2 of %3 teams")
                .arg(info.team, QString::number(info.teamRank), QString::number(info.teamCount)));
}

}  // namespace tandem::ui
