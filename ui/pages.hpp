// The pages of the main window. Each reads the engine's snapshot and the ledger through the
// bridge when refresh() is called (the window refreshes the visible page on engine signals and a
// timer) and explains itself when there is nothing to show yet.
#pragma once

#include "ledger.hpp"
#include "services.hpp"
#include "state_view.hpp"
#include "ui_context.hpp"

#include <QWidget>

#include <map>
#include <optional>
#include <vector>

class QAction;
class QBarSeries;
class QBarSet;
class QBarCategoryAxis;
class QChart;
class QChartView;
class QCheckBox;
class QComboBox;
class QDateTimeAxis;
class QGroupBox;
class QLabel;
class QLineEdit;
class QLineSeries;
class QMenu;
class QProgressBar;
class QPushButton;
class QScatterSeries;
class QStackedWidget;
class QTableWidget;
class QValueAxis;

namespace tandem::ui {

class ElidingLabel;
class ReceiptDialog;

class Page : public QWidget {
    Q_OBJECT
  public:
    Page(const UiContext& context, QWidget* parent);
    virtual void refresh() = 0;
    bool showsEmptyState() const;
    QString emptyText() const;

  protected:
    // Content with an empty-state label in front of it; setEmpty(text) shows the label.
    void setContent(QWidget* content);
    void setEmpty(const QString& text);  // empty text: show the content
    int64_t nowMs() const;
    const core::TimeZone& zone() const;

    UiContext m_ctx;
    QStackedWidget* m_stack = nullptr;
    QLabel* m_empty = nullptr;
};

// A chart's title above it, wrapped on a narrow window (QChart cuts a long title to "...").
QLabel* makeChartTitle(const QString& text, QWidget* parent);

// Makes a chart view that follows the palette (light or dark) and has an accessible name.
QChartView* makeChartView(const QString& accessibleName, QWidget* parent);

// Makes a read-only table of records: one selectable row each, the last column stretched.
QTableWidget* makeRecordTable(const QString& objectName, const QString& accessibleName,
                              const QStringList& headers, QWidget* parent);

class OverviewPage final : public Page {
    Q_OBJECT
  public:
    OverviewPage(const UiContext& context, QWidget* parent);
    void refresh() override;
    void setNotice(const QString& text);  // e.g. "no system tray"
    QString costsText() const;

  signals:
    // The "needs attention" button: open the settings at that page (a SettingsTab).
    void settingsRequested(int tab);

  private:
    void refreshCosts(double tokensPerSecond);

    QLabel* m_icon;
    ElidingLabel* m_headline;
    ElidingLabel* m_detail;
    QLabel* m_problem;   // a problem's own words
    QPushButton* m_fix;  // opens the settings page that fixes it
    SettingsTab m_fixIn = SettingsTab::None;
    QLabel* m_notice;
    QLabel* m_idleNote;
    QLabel* m_tempNote;  // "only when idle" on, idle time unknown
    QLabel* m_device;
    QLabel* m_unit;
    QProgressBar* m_progress;
    QLabel* m_eta;
    QLabel* m_speed;
    QLabel* m_loss;
    QLabel* m_lastUpload;
    QLabel* m_next;
    QLabel* m_totals;
    QLabel* m_costs;    // what a day of this costs (ui/cost_text.hpp)
    RunInfo m_costRun;  // the run's status for it, asked at most every 10 minutes
    int64_t m_costRunAtMs = 0;
    bool m_costRunAsked = false;
    QPushButton* m_pause;
    QMenu* m_pauseMenu;      // "Pause now", "Finish this unit first (about N s)"
    QAction* m_pauseNow;     // objectName pauseNowAction
    QAction* m_finishFirst;  // objectName finishFirstAction
    QCheckBox* m_finish;
};

class ContributionsPage final : public Page {
    Q_OBJECT
  public:
    enum class Metric { Tokens = 0, GpuHours = 1, ComputeHours = 2 };
    static constexpr int kDays = 14;

    ContributionsPage(const UiContext& context, QWidget* parent);
    void refresh() override;
    void setMetric(Metric metric);
    QBarSeries* series() const { return m_series; }
    QBarCategoryAxis* categories() const { return m_axisX; }
    QTableWidget* table() const { return m_table; }
    QString totalText(const QString& key) const;  // "units", "tokens", "gpu", "credit", "sent", ...
    // This donor's and team's place on the leaderboard, asked of the coordinator when the page
    // is shown and after a result is accepted, at most once a minute.
    void showStanding(const StandingInfo& info);
    QLabel* rankLabel() const { return m_rank; }
    QLabel* teamRankLabel() const { return m_teamRank; }
    // The receipt of the table's row in detail (also on a double-click and with "Receipt…");
    // null when that unit has none. The dialog is the page's child and deletes itself on close.
    ReceiptDialog* openReceipt(int row);

  protected:
    void showEvent(QShowEvent* event) override;

  private:
    void askStandingIfDue(int64_t accepted);
    QLabel* m_rank;
    QLabel* m_teamRank;
    bool m_standingWanted = true;  // shown, or a result accepted, since the last answer
    bool m_standingAsking = false;
    int64_t m_standingAskedMs = 0;
    int64_t m_standingAccepted = -1;  // accepted units when last asked
    QComboBox* m_metric;
    QChartView* m_view;
    QChart* m_chart;
    QBarSeries* m_series;
    QBarSet* m_set;
    QBarCategoryAxis* m_axisX;
    QValueAxis* m_axisY;
    QTableWidget* m_table;
    QPushButton* m_showReceipt;
    std::vector<std::optional<core::Receipt>> m_receipts;  // per table row, without the body
    std::map<QString, QLabel*> m_totals;
};

class PerformancePage final : public Page {
    Q_OBJECT
  public:
    enum class Range { Hour = 0, Day = 1, Week = 2 };
    PerformancePage(const UiContext& context, QWidget* parent);
    void refresh() override;
    void setRange(Range range);
    QLineSeries* tokensSeries() const { return m_tokens; }
    QLineSeries* utilisationSeries() const { return m_util; }
    QLineSeries* temperatureSeries() const { return m_temp; }

  private:
    QComboBox* m_range;
    QLabel* m_summary;
    QChart* m_chart;
    QLineSeries* m_tokens;
    QDateTimeAxis* m_axisX;
    QValueAxis* m_axisY;
    QChartView* m_deviceView;
    QChart* m_deviceChart;
    QLineSeries* m_util;
    QLineSeries* m_temp;
    QDateTimeAxis* m_deviceX;
    QValueAxis* m_deviceY;
    QLabel* m_deviceNote;
};

class RunPage final : public Page {
    Q_OBJECT
  public:
    // Which rounds the chart shows; dragging across the chart zooms in further.
    enum class Rounds { All = 0, Last1000 = 1, Last100 = 2 };
    // The loss line keeps at most 2 * kLineBuckets points (min/max per bucket) however long
    // the run; the marks of this computer's rounds at most one per 1/(2 * kLineBuckets) width.
    static constexpr int kLineBuckets = 400;

    RunPage(const UiContext& context, QWidget* parent);
    void refresh() override;  // asks the coordinator (at most once a minute unless forced)
    void reload();            // asks now
    void showRun(const RunInfo& info);  // what the coordinator answered
    void showRounds(Rounds rounds);
    QLineSeries* lossSeries() const { return m_loss; }
    // This computer's rounds: marks in a strip along the bottom of the chart.
    QScatterSeries* mineSeries() const { return m_mine; }
    QValueAxis* roundAxis() const { return m_axisX; }
    QValueAxis* lossAxis() const { return m_axisY; }
    QChartView* chartView() const { return m_view; }
    QLabel* statusLabel() const { return m_status; }
    QLabel* sampleLabel() const { return m_sample; }

  private:
    void showSample(const RunInfo& info);
    void applyRounds();  // the chosen rounds, then redraw()
    void redraw();       // the line and marks of the rounds on the axis, decimated
    void updateTicks();

    QLabel* m_summary;
    QLabel* m_status;
    QGroupBox* m_sampleBox;
    QLabel* m_sample;
    QPushButton* m_reload;
    QComboBox* m_rounds;
    QChartView* m_view;
    QChart* m_chart;
    QLineSeries* m_loss;
    QScatterSeries* m_mine;
    QValueAxis* m_axisX;
    QValueAxis* m_axisY;
    QList<QPointF> m_history;     // every evaluated round: (round, loss), by round
    QList<qreal> m_mineRounds;    // rounds with this computer's result, ascending
    bool m_settingRange = false;  // applyRounds() moves the axis; zooming by hand redraws
    int64_t m_lastAskedMs = 0;
    bool m_asking = false;
};

class NetworkPage final : public Page {
    Q_OBJECT
  public:
    static constexpr int kDays = 14;
    NetworkPage(const UiContext& context, QWidget* parent);
    void refresh() override;
    void measure();
    QBarSeries* series() const { return m_series; }
    QTableWidget* table() const { return m_table; }
    QProgressBar* upToday() const { return m_upToday; }
    QProgressBar* downToday() const { return m_downToday; }
    QLabel* bandwidthLabel() const { return m_bandwidth; }

  private:
    QLabel* m_bandwidth;
    QPushButton* m_measure;
    QProgressBar* m_upToday;
    QProgressBar* m_downToday;
    QChart* m_chart;
    QBarSeries* m_series;
    QBarSet* m_up;
    QBarSet* m_down;
    QBarCategoryAxis* m_axisX;
    QValueAxis* m_axisY;
    QTableWidget* m_table;
};

class LogPage final : public Page {
    Q_OBJECT
  public:
    LogPage(const UiContext& context, QWidget* parent);
    void refresh() override;
    void setMinimumLevel(int level);  // core::EventLevel
    void setSearch(const QString& text);
    void copyToClipboard();  // the selected rows, or every row shown
    QTableWidget* table() const { return m_table; }

  private:
    QComboBox* m_level;
    QLineEdit* m_search;
    QTableWidget* m_table;
};

}  // namespace tandem::ui
