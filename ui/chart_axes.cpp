#include "chart_axes.hpp"

#include <QBarCategoryAxis>
#include <QChart>
#include <QFontMetricsF>
#include <QLocale>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

namespace tandem::ui {

QList<QPointF> decimateMinMax(const QList<QPointF>& points, int buckets) {
    if (buckets < 1 || points.size() <= 2 * buckets)
        return points;
    const double x0 = points.front().x();
    const double width = (points.back().x() - x0) / buckets;
    QList<QPointF> out;
    out.reserve(2 * buckets);
    qsizetype i = 0;
    for (int b = 0; b < buckets && i < points.size(); ++b) {
        const double end = b == buckets - 1 ? points.back().x() : x0 + width * (b + 1);
        qsizetype lo = i, hi = i;
        for (; i < points.size() && (points[i].x() < end || b == buckets - 1); ++i) {
            if (points[i].y() < points[lo].y())
                lo = i;
            if (points[i].y() > points[hi].y())
                hi = i;
        }
        if (i == lo)  // an empty bucket (a gap in the rounds)
            continue;
        out << points[std::min(lo, hi)];
        if (lo != hi)
            out << points[std::max(lo, hi)];
    }
    return out;
}

double niceTickStep(double span, int maxIntervals, double minStep) {
    if (!(span > 0) || maxIntervals < 1)
        return std::max(minStep, 1.0);
    const double raw = std::max(span / maxIntervals, minStep);
    const double power = std::pow(10.0, std::floor(std::log10(raw)));
    for (const double m : {1.0, 2.0, 5.0, 10.0})
        if (m * power >= raw * (1 - 1e-9))
            return m * power;
    return 10 * power;
}

void setRegularTicks(QValueAxis* axis, const QLocale& locale, double widthPx, double min,
                     double max, double minStep) {
    const QString widest = locale.toString(static_cast<qlonglong>(std::llround(max)));
    // A label and a gap of two digits between neighbours.
    const double labelPx =
        QFontMetricsF(axis->labelsFont()).horizontalAdvance(widest + QStringLiteral("00"));
    const int intervals = std::max(1, static_cast<int>(widthPx / std::max(1.0, labelPx)));
    const double step = niceTickStep(max - min, intervals, minStep);
    axis->setTickType(QValueAxis::TicksDynamic);
    // On the first multiple of the step in range (Qt draws no labels for an anchor outside it).
    axis->setTickAnchor(std::ceil(min / step) * step);
    axis->setTickInterval(step);
}

void keepCategoryLabelsWhole(QChart* chart, QBarCategoryAxis* axis) {
    auto fit = [chart, axis] {
        const QStringList labels = axis->categories();
        if (labels.isEmpty())
            return;
        const QFontMetricsF metrics(axis->labelsFont());
        double widest = 0;
        for (const QString& label : labels)
            widest = std::max(widest, metrics.horizontalAdvance(label));
        const double slot = chart->plotArea().width() / labels.size();
        // Qt cuts a label well before it touches its neighbour: a margin of three characters.
        const int angle = widest + 3 * metrics.averageCharWidth() <= slot ? 0 : -90;
        if (axis->labelsAngle() != angle)
            axis->setLabelsAngle(angle);
    };
    QObject::connect(chart, &QChart::plotAreaChanged, axis, fit);
    QObject::connect(axis, &QBarCategoryAxis::categoriesChanged, axis, fit);
}

void localizeChart(QChart* chart) {
    chart->setLocalizeNumbers(true);
    chart->setLocale(QLocale());
}

}  // namespace tandem::ui
