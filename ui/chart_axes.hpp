// What keeps a chart readable at any size, scale and length of history: min/max decimation of a
// long line, tick steps of 1, 2 or 5 times a power of ten, and numbers in the locale's style.
#pragma once

#include <QList>
#include <QPointF>

class QBarCategoryAxis;
class QChart;
class QLocale;
class QValueAxis;

namespace tandem::ui {

// At most 2 * buckets points: per bucket of equal x width, its lowest and highest point in
// x order (a spike survives, a flat stretch becomes one pair). Points sorted by x; fewer than
// 2 * buckets points come back unchanged.
QList<QPointF> decimateMinMax(const QList<QPointF>& points, int buckets);

// The smallest step of 1, 2 or 5 times a power of ten (at least minStep) that splits span into
// at most maxIntervals intervals.
double niceTickStep(double span, int maxIntervals, double minStep);

// Regular ticks on a value axis for the range [min, max] (set them before the range: Qt makes an
// item per tick, and a step left from a short range on a long one makes thousands): on the
// multiples of a nice step, as many as the labels (in the axis font and the locale, the widest
// being max) fit side by side across widthPx.
void setRegularTicks(QValueAxis* axis, const QLocale& locale, double widthPx, double min,
                     double max, double minStep);

// Category labels (days) turned upright whenever the plot is too narrow for them side by side,
// instead of Qt cutting them to "11...". Follows the chart's plot area from now on.
void keepCategoryLabelsWhole(QChart* chart, QBarCategoryAxis* axis);

// The chart's numbers and dates in the application's locale (German: 10.000 and 0,25).
void localizeChart(QChart* chart);

}  // namespace tandem::ui
