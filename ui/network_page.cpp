#include "async.hpp"
#include "chart_axes.hpp"
#include "engine_bridge.hpp"
#include "engine_words.hpp"
#include "pages.hpp"
#include "state_view.hpp"
#include "ui_prefs.hpp"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

namespace tandem::ui {

namespace {
// What a transfer was for, as the ledger records it (core/work_fetcher, core/result_uploader).
QString purposeText(const std::string& purpose) {
    if (purpose == "manifest")
        return QCoreApplication::translate("tandem::ui::NetworkPage", "work unit description");
    if (purpose == "weights")
        return QCoreApplication::translate("tandem::ui::NetworkPage", "model weights");
    if (purpose == "data")
        return QCoreApplication::translate("tandem::ui::NetworkPage", "training text");
    if (purpose == "result")
        return QCoreApplication::translate("tandem::ui::NetworkPage", "result");
    return QString::fromStdString(purpose);
}

void showUsage(QProgressBar* bar, int64_t used, int64_t cap) {
    if (cap > 0) {
        bar->setRange(0, 1000);
        bar->setValue(static_cast<int>(std::min<int64_t>(1000, 1000 * used / cap)));
        bar->setFormat(QCoreApplication::translate("tandem::ui::NetworkPage", "%1 of %2 today")
                           .arg(formatBytes(used), formatBytes(cap)));
    } else {
        bar->setRange(0, 1);
        bar->setValue(0);
        bar->setFormat(QCoreApplication::translate("tandem::ui::NetworkPage", "%1 today (no cap)")
                           .arg(formatBytes(used)));
    }
}
}  // namespace

NetworkPage::NetworkPage(const UiContext& context, QWidget* parent) : Page(context, parent) {
    auto* content = new QWidget(this);
    auto* layout = new QVBoxLayout(content);
    auto* top = new QHBoxLayout();
    auto* linkBox = new QGroupBox(tr("Link to the coordinator"), content);
    auto* linkLayout = new QVBoxLayout(linkBox);
    m_bandwidth = new QLabel(linkBox);
    m_bandwidth->setObjectName(QStringLiteral("bandwidth"));
    m_bandwidth->setWordWrap(true);
    m_measure = new QPushButton(tr("&Measure again"), linkBox);
    m_measure->setObjectName(QStringLiteral("measure"));
    connect(m_measure, &QPushButton::clicked, this, &NetworkPage::measure);
    linkLayout->addWidget(m_bandwidth);
    linkLayout->addWidget(m_measure, 0, Qt::AlignLeft);
    top->addWidget(linkBox, 1);

    auto* todayBox = new QGroupBox(tr("Today against the daily caps"), content);
    auto* todayForm = new QFormLayout(todayBox);
    m_upToday = new QProgressBar(todayBox);
    m_upToday->setObjectName(QStringLiteral("upToday"));
    m_upToday->setAccessibleName(tr("Sent today"));
    m_downToday = new QProgressBar(todayBox);
    m_downToday->setObjectName(QStringLiteral("downToday"));
    m_downToday->setAccessibleName(tr("Received today"));
    todayForm->addRow(tr("Sent:"), m_upToday);
    todayForm->addRow(tr("Received:"), m_downToday);
    top->addWidget(todayBox, 1);
    layout->addLayout(top);

    layout->addWidget(makeChartTitle(tr("Data per day (MB), last %1 days").arg(kDays), content));
    auto* view = makeChartView(tr("Data sent and received per day"), content);
    m_chart = view->chart();
    m_series = new QBarSeries();
    m_up = new QBarSet(tr("sent"));
    m_down = new QBarSet(tr("received"));
    m_series->append(m_up);
    m_series->append(m_down);
    m_chart->addSeries(m_series);
    m_axisX = new QBarCategoryAxis();
    m_axisY = new QValueAxis();
    m_axisY->setLabelFormat(QStringLiteral("%.0f"));
    m_chart->addAxis(m_axisX, Qt::AlignBottom);
    m_chart->addAxis(m_axisY, Qt::AlignLeft);
    m_series->attachAxis(m_axisX);
    keepCategoryLabelsWhole(m_chart, m_axisX);
    m_series->attachAxis(m_axisY);
    layout->addWidget(view, 1);

    m_table = makeRecordTable(QStringLiteral("transfers"), tr("Transfer log"),
                              {tr("Started"), tr("Direction"), tr("What"), tr("Size"),
                               tr("Duration"), tr("Speed"), tr("Result")},
                              content);
    m_table->setAlternatingRowColors(true);
    layout->addWidget(m_table, 1);
    setContent(content);
}

void NetworkPage::measure() {
    if (!m_ctx.services || !m_ctx.settings || m_ctx.settings->coordinatorUrl.empty()) {
        m_bandwidth->setText(tr("Choose a coordinator in Settings first."));
        return;
    }
    m_measure->setEnabled(false);
    m_bandwidth->setText(tr("Measuring… (up to 20 s)"));
    Services* services = m_ctx.services;
    const core::Settings settings = *m_ctx.settings;
    runAsync<BandwidthReport>(
        this, [services, settings] { return services->measureBandwidth(settings); },
        [this](BandwidthReport r) {
            m_measure->setEnabled(true);
            if (!r.ok) {
                m_bandwidth->setText(tr("The measurement failed: %1").arg(r.error));
                return;
            }
            if (m_ctx.prefs) {
                m_ctx.prefs->setNumber(QStringLiteral("bandwidth/downMbit"), r.downMbitPerSecond);
                m_ctx.prefs->setNumber(QStringLiteral("bandwidth/upMbit"), r.upMbitPerSecond);
                m_ctx.prefs->setNumber(QStringLiteral("bandwidth/latencyMs"), r.latencyMs);
                m_ctx.prefs->setNumber(QStringLiteral("bandwidth/atMs"),
                                       static_cast<double>(nowMs()));
            }
            refresh();
        });
}

void NetworkPage::refresh() {
    const QLocale loc;
    if (m_measure->isEnabled()) {
        const double at = m_ctx.prefs ? m_ctx.prefs->number(QStringLiteral("bandwidth/atMs")) : 0;
        if (at > 0)
            m_bandwidth->setText(
                tr("%1 Mbit/s down, %2 Mbit/s up, %3 ms latency (measured %4)")
                    .arg(loc.toString(m_ctx.prefs->number(QStringLiteral("bandwidth/downMbit")),
                                      'f', 1),
                         loc.toString(m_ctx.prefs->number(QStringLiteral("bandwidth/upMbit")), 'f',
                                      1),
                         loc.toString(m_ctx.prefs->number(QStringLiteral("bandwidth/latencyMs")),
                                      'f', 0),
                         formatAt(static_cast<int64_t>(at), nowMs(), zone())));
        else
            m_bandwidth->setText(tr("Not measured yet."));
    }
    core::Ledger* ledger = m_ctx.bridge->ledger();
    if (!ledger) {
        setEmpty(
            tr("Nothing sent or received yet. Tandem records every transfer here: weights "
               "and data it downloads, and the results it uploads."));
        return;
    }
    auto recent = ledger->recentTransfers(300);
    if (!recent) {
        setEmpty(tr("The ledger cannot be read: %1")
                     .arg(QString::fromStdString(recent.error().message)));
        return;
    }
    if (recent->empty()) {
        setEmpty(
            tr("Nothing sent or received yet. Tandem records every transfer here: weights "
               "and data it downloads, and the results it uploads."));
        return;
    }
    setEmpty(QString());

    const int64_t now = nowMs();
    const auto& rules = m_ctx.settings ? m_ctx.settings->rules : core::RulesConfig{};
    if (auto used = ledger->bytesUsedToday(now, zone())) {
        showUsage(m_upToday, used->up, rules.dailyUploadCapBytes);
        showUsage(m_downToday, used->down, rules.dailyDownloadCapBytes);
    }

    const auto today = core::toLocal(now, zone()).date;
    auto days = ledger->transfersPerDay(today.plusDays(-(kDays - 1)), today, zone());
    QStringList categories;
    QList<qreal> up, down;
    double top = 0;
    if (days) {
        for (const auto& d : *days) {
            categories << formatDayMonth(d.date);
            up << static_cast<double>(d.bytesUp) / 1e6;
            down << static_cast<double>(d.bytesDown) / 1e6;
            top = std::max({top, up.back(), down.back()});
        }
    }
    m_up->remove(0, m_up->count());
    m_up->append(up);
    m_down->remove(0, m_down->count());
    m_down->append(down);
    m_axisX->setCategories(categories);
    m_axisY->setRange(0, top > 0 ? top * 1.1 : 1);
    m_axisY->applyNiceNumbers();

    m_table->setRowCount(static_cast<int>(recent->size()));
    int row = 0;
    for (const auto& t : *recent) {
        auto set = [&](int col, const QString& text) {
            m_table->setItem(row, col, new QTableWidgetItem(text));
        };
        set(0, formatDateTime(t.atMs, zone()));
        set(1, t.direction == core::Direction::Up ? tr("sent") : tr("received"));
        set(2, purposeText(t.purpose) +
                   (t.workUnitId.empty()
                        ? QString()
                        : tr(" (unit %1)").arg(QString::fromStdString(t.workUnitId))));
        set(3, formatBytes(t.bytes));
        set(4, t.durationMs > 0 ? formatDuration(t.durationMs) : QStringLiteral("–"));
        set(5, t.durationMs > 0
                   ? tr("%1 Mbit/s")
                         .arg(loc.toString(static_cast<double>(t.bytes) * 8 /
                                               (static_cast<double>(t.durationMs) * 1e3),
                                           'f', 1))
                   : QStringLiteral("–"));
        set(6, t.ok ? tr("ok") : tr("failed: %1").arg(QString::fromStdString(t.detail)));
        ++row;
    }
    m_table->resizeColumnsToContents();
}

}  // namespace tandem::ui
