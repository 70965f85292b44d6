// The validation-loss chart of the public page: server-rendered SVG, so that the page needs no
// script and no chart library.
#include "public_page.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem::coord {

namespace {

// A wide, low chart whose labels stay readable when a phone scales it to ~350 px.
constexpr double kWidth = 560, kHeight = 230;
constexpr double kLeft = 52, kRight = 12, kTop = 12, kBottom = 38;  // room for the labels
constexpr size_t kMaxPoints = 600;  // longer curves are thinned evenly

std::string num(double x, int decimals = 1) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
    return buf;
}

// About `count` round tick values from lo to hi (1, 2 or 5 times a power of ten apart).
std::vector<double> ticks(double lo, double hi, int count) {
    const double raw = (hi - lo) / std::max(1, count);
    const double power = std::pow(10.0, std::floor(std::log10(raw)));
    double step = power;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (raw <= m * power) {
            step = m * power;
            break;
        }
    std::vector<double> out;
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
        out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
    return out;
}

int decimalsFor(double step) {
    return step >= 1 ? 0 : std::min(4, static_cast<int>(std::ceil(-std::log10(step))));
}

}  // namespace

std::string lossChartSvg(std::span<const LossPoint> all) {
    if (all.empty())
        return "<p class=\"muted\" id=\"loss-chart-empty\">No validation loss yet: the first one "
               "comes when the first round closes.</p>\n";
    std::vector<LossPoint> points;
    const size_t stride = (all.size() + kMaxPoints - 1) / kMaxPoints;
    for (size_t i = 0; i < all.size(); i += stride)
        points.push_back(all[i]);
    if (points.back().round != all.back().round)
        points.push_back(all.back());

    double x0 = static_cast<double>(points.front().round),
           x1 = static_cast<double>(points.back().round);
    auto [lo, hi] = std::minmax_element(points.begin(), points.end(),
                                        [](auto& a, auto& b) { return a.loss < b.loss; });
    double y0 = lo->loss, y1 = hi->loss;
    if (x1 <= x0)
        x0 -= 1, x1 += 1;
    const double pad = y1 > y0 ? (y1 - y0) * 0.08 : std::max(0.05, std::abs(y0) * 0.05);
    y0 -= pad, y1 += pad;
    const double plotW = kWidth - kLeft - kRight, plotH = kHeight - kTop - kBottom;
    auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * plotW; };
    auto py = [&](double y) { return kTop + (y1 - y) / (y1 - y0) * plotH; };

    std::string s = "<svg id=\"loss-chart\" class=\"chart\" viewBox=\"0 0 " + num(kWidth, 0) + " " +
                    num(kHeight, 0) +
                    "\" role=\"img\" aria-labelledby=\"loss-chart-title\" "
                    "xmlns=\"http://www.w3.org/2000/svg\">\n<title id=\"loss-chart-title\">"
                    "Validation loss by round</title>\n";
    // Grid and labels: loss on the left, rounds below.
    const auto yTicks = ticks(y0, y1, 4);
    const int yDecimals = decimalsFor(yTicks.size() > 1 ? yTicks[1] - yTicks[0] : y1 - y0);
    for (double v : yTicks) {
        const std::string y = num(py(v));
        s += "<line class=\"grid\" x1=\"" + num(kLeft) + "\" x2=\"" + num(kWidth - kRight) +
             "\" y1=\"" + y + "\" y2=\"" + y + "\"/><text class=\"label\" x=\"" + num(kLeft - 6) +
             "\" y=\"" + y + "\" text-anchor=\"end\" dominant-baseline=\"middle\">" +
             num(v, yDecimals) + "</text>\n";
    }
    for (double v : ticks(x0, x1, 5)) {
        if (v != std::floor(v))
            continue;  // rounds are whole numbers
        s += "<text class=\"label\" x=\"" + num(px(v)) + "\" y=\"" + num(kHeight - kBottom + 18) +
             "\" text-anchor=\"middle\">" + num(v, 0) + "</text>\n";
    }
    s += "<text class=\"label\" x=\"" + num(kLeft + plotW / 2) + "\" y=\"" + num(kHeight - 4) +
         "\" text-anchor=\"middle\">round</text>\n";
    s += "<rect class=\"frame\" x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" +
         num(plotW) + "\" height=\"" + num(plotH) + "\"/>\n";
    std::string path;
    for (const LossPoint& p : points)
        path += (path.empty() ? "" : " ") + num(px(static_cast<double>(p.round))) + "," +
                num(py(p.loss));
    s += "<polyline class=\"curve\" points=\"" + path + "\"/>\n";
    const LossPoint& last = points.back();
    s += "<circle class=\"dot\" cx=\"" + num(px(static_cast<double>(last.round))) + "\" cy=\"" +
         num(py(last.loss)) + "\" r=\"4\"><title>round " + std::to_string(last.round) + ": loss " +
         num(last.loss, 4) + "</title></circle>\n</svg>\n";
    return s;
}

}  // namespace tandem::coord
