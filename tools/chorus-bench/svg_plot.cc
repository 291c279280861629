#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "sizes.h"

namespace chorus::bench {

namespace {

constexpr double kWidth = 800, kHeight = 500;
constexpr double kLeft = 80, kRight = 200, kTop = 50, kBottom = 70;  // margins
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

std::string Number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", v);
  return buffer;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about 5 ticks up to `max`.
double TickStep(double max) {
  const double raw = max / 5;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

}  // namespace

std::string RenderSvgPlot(const std::vector<Measurement>& rows, const std::string& title) {
  std::set<CollectiveKind> ops;
  std::set<std::pair<std::string, CollectiveKind>> out_of_place;
  for (const auto& m : rows) {
    ops.insert(m.op);
    if (!m.in_place) out_of_place.insert({m.backend, m.op});
  }
  // Series in order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<double, double>>> series;
  double min_x = 0, max_x = 0, max_y = 0;
  bool first = true;
  for (const auto& m : rows) {
    const bool has_out_of_place = out_of_place.count({m.backend, m.op}) > 0;
    if (m.in_place == has_out_of_place || m.bytes == 0) continue;
    std::string name = m.backend;
    if (ops.size() > 1) name += std::string(" ") + CollectiveName(m.op);
    if (!series.count(name)) order.push_back(name);
    const double x = std::log2(static_cast<double>(m.bytes));
    series[name].push_back({x, m.busbw_gbps});
    min_x = first ? x : std::min(min_x, x);
    max_x = first ? x : std::max(max_x, x);
    max_y = std::max(max_y, m.busbw_gbps);
    first = false;
  }
  if (max_x <= min_x) max_x = min_x + 1;
  if (max_y <= 0) max_y = 1;
  const double y_step = TickStep(max_y);
  max_y = std::ceil(max_y / y_step) * y_step;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const auto px = [&](double x) { return kLeft + (x - min_x) / (max_x - min_x) * plot_w; };
  const auto py = [&](double y) { return kTop + plot_h - y / max_y * plot_h; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Number(kWidth) +
                    "\" height=\"" + Number(kHeight) + "\" font-family=\"sans-serif\" " +
                    "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + Number(kWidth / 2) + "\" y=\"25\" text-anchor=\"middle\" " +
         "font-size=\"16\">" + Escape(title) + "</text>\n";
  // Axes.
  svg += "<line x1=\"" + Number(kLeft) + "\" y1=\"" + Number(kTop + plot_h) + "\" x2=\"" +
         Number(kLeft + plot_w) + "\" y2=\"" + Number(kTop + plot_h) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + Number(kLeft) + "\" y1=\"" + Number(kTop) + "\" x2=\"" + Number(kLeft) +
         "\" y2=\"" + Number(kTop + plot_h) + "\" stroke=\"black\"/>\n";
  // x ticks: every power of two that is a whole number of steps (at most about 10 labels).
  const int first_tick = static_cast<int>(std::ceil(min_x));
  const int last_tick = static_cast<int>(std::floor(max_x));
  const int x_step = std::max(1, (last_tick - first_tick + 9) / 10);
  for (int t = first_tick; t <= last_tick; t += x_step) {
    const double x = px(t);
    svg += "<line x1=\"" + Number(x) + "\" y1=\"" + Number(kTop + plot_h) + "\" x2=\"" + Number(x) +
           "\" y2=\"" + Number(kTop + plot_h + 5) + "\" stroke=\"black\"/>\n";
    svg += "<text x=\"" + Number(x) + "\" y=\"" + Number(kTop + plot_h + 20) +
           "\" text-anchor=\"middle\">" + FormatSize(uint64_t{1} << t) + "</text>\n";
  }
  for (double y = 0; y <= max_y + y_step / 2; y += y_step) {
    // A tick, and a grid line above the x axis.
    svg += "<line x1=\"" + Number(kLeft - 5) + "\" y1=\"" + Number(py(y)) + "\" x2=\"" +
           Number(y > 0 ? kLeft + plot_w : kLeft) + "\" y2=\"" + Number(py(y)) + "\" stroke=\"" +
           (y > 0 ? "#dddddd" : "black") + "\"/>\n";
    char label[32];
    std::snprintf(label, sizeof(label), "%g", y);
    svg += "<text x=\"" + Number(kLeft - 8) + "\" y=\"" + Number(py(y) + 4) +
           "\" text-anchor=\"end\">" + label + "</text>\n";
  }
  svg += "<text x=\"" + Number(kLeft + plot_w / 2) + "\" y=\"" + Number(kHeight - 20) +
         "\" text-anchor=\"middle\">size (bytes, log scale)</text>\n";
  svg += "<text transform=\"translate(20," + Number(kTop + plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">busbw (GB/s)</text>\n";
  // One polyline per series, and its legend entry.
  for (size_t s = 0; s < order.size(); ++s) {
    const std::string color = kColors[s % (sizeof(kColors) / sizeof(kColors[0]))];
    auto points = series[order[s]];
    std::sort(points.begin(), points.end());
    std::string coords;
    for (const auto& [x, y] : points) coords += Number(px(x)) + "," + Number(py(y)) + " ";
    svg += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\" points=\"" +
           coords + "\"/>\n";
    const double ly = kTop + 10 + 20 * static_cast<double>(s);
    const double lx = kLeft + plot_w + 15;
    svg += "<line x1=\"" + Number(lx) + "\" y1=\"" + Number(ly) + "\" x2=\"" + Number(lx + 25) +
           "\" y2=\"" + Number(ly) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + Number(lx + 32) + "\" y=\"" + Number(ly + 4) + "\">" + Escape(order[s]) +
           "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace chorus::bench
