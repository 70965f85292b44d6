#include "chart_axes.hpp"
#include "engine_bridge.hpp"
#include "pages.hpp"

#include <QChart>
#include <QChartView>
#include <QGuiApplication>
#include <QHeaderView>
#include <QLabel>
#include <QPalette>
#include <QScatterSeries>
#include <QScrollArea>
#include <QStackedWidget>
#include <QTableWidget>
#include <QVBoxLayout>

namespace tandem::ui {

Page::Page(const UiContext& context, QWidget* parent) : QWidget(parent), m_ctx(context) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_stack = new QStackedWidget(this);
    m_empty = new QLabel(this);
    m_empty->setObjectName(QStringLiteral("emptyState"));
    m_empty->setAlignment(Qt::AlignCenter);
    m_empty->setWordWrap(true);
    m_empty->setMargin(24);
    QFont f = m_empty->font();
    f.setPointSizeF(f.pointSizeF() * 1.15);
    m_empty->setFont(f);
    m_empty->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_stack->addWidget(m_empty);
    layout->addWidget(m_stack);
}

void Page::setContent(QWidget* content) {
    // Scrolls where the window is smaller than the page needs (a 2x screen, a large font)
    // rather than squeezing charts until their labels are cut off or overlap.
    auto* scroll = new QScrollArea(m_stack);
    scroll->setObjectName(QStringLiteral("pageScroll"));
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setWidgetResizable(true);
    scroll->setWidget(content);
    m_stack->addWidget(scroll);
    m_stack->setCurrentWidget(scroll);
}

void Page::setEmpty(const QString& text) {
    m_empty->setText(text);
    m_empty->setAccessibleName(text);
    m_stack->setCurrentIndex(text.isEmpty() ? 1 : 0);
}

bool Page::showsEmptyState() const {
    return m_stack->currentIndex() == 0;
}
QString Page::emptyText() const {
    return showsEmptyState() ? m_empty->text() : QString();
}

int64_t Page::nowMs() const {
    return m_ctx.bridge->clock().nowMs();
}
const core::TimeZone& Page::zone() const {
    return m_ctx.bridge->zone();
}

namespace {
// Follows the palette: a dark window gets the dark chart theme, the background stays the
// window's own.
class PaletteChartView final : public QChartView {
  public:
    explicit PaletteChartView(QWidget* parent) : QChartView(parent) { apply(); }

  protected:
    void changeEvent(QEvent* event) override {
        if (event->type() == QEvent::PaletteChange)
            apply();
        QChartView::changeEvent(event);
    }

  private:
    void apply() {
        if (!chart())
            return;
        const QPalette p = palette();
        const bool dark = p.color(QPalette::Window).lightness() < 128;
        chart()->setTheme(dark ? QChart::ChartThemeDark : QChart::ChartThemeLight);
        chart()->setBackgroundBrush(p.brush(QPalette::Base));
        chart()->setTitleBrush(p.brush(QPalette::Text));
        chart()->legend()->setLabelColor(p.color(QPalette::Text));
        // A theme gives scatter marks a light border; on small marks that border is all one
        // sees, and the legend shows the fill: marks in one colour, as in the legend.
        for (QAbstractSeries* s : chart()->series())
            if (auto* scatter = qobject_cast<QScatterSeries*>(s))
                scatter->setBorderColor(scatter->color());
    }

  public:
    void setChartFollowing(QChart* c) {
        setChart(c);
        apply();
    }
};
}  // namespace

QTableWidget* makeRecordTable(const QString& objectName, const QString& accessibleName,
                              const QStringList& headers, QWidget* parent) {
    auto* table = new QTableWidget(0, static_cast<int>(headers.size()), parent);
    table->setObjectName(objectName);
    table->setAccessibleName(accessibleName);
    table->setHorizontalHeaderLabels(headers);
    table->horizontalHeader()->setStretchLastSection(true);
    table->verticalHeader()->hide();
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->setSelectionBehavior(QAbstractItemView::SelectRows);
    return table;
}

QLabel* makeChartTitle(const QString& text, QWidget* parent) {
    auto* label = new QLabel(text, parent);
    label->setObjectName(QStringLiteral("chartTitle"));
    label->setWordWrap(true);
    label->setAlignment(Qt::AlignHCenter);
    QFont f = label->font();
    f.setBold(true);
    label->setFont(f);
    return label;
}

QChartView* makeChartView(const QString& accessibleName, QWidget* parent) {
    auto* view = new PaletteChartView(parent);
    auto* chart = new QChart();
    chart->setAnimationOptions(QChart::NoAnimation);
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setMargins(QMargins(4, 4, 4, 4));
    localizeChart(chart);
    view->setChartFollowing(chart);
    view->setRenderHint(QPainter::Antialiasing);
    view->setAccessibleName(accessibleName);
    // Room for a plot besides the title, axis labels and legend, in the font's own size.
    view->setMinimumHeight(view->fontMetrics().height() * 15);
    return view;
}

}  // namespace tandem::ui
