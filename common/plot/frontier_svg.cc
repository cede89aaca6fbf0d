#include "common/plot/frontier_svg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/plot/svg_parts.h"
#include "common/plot/svg_plot.h"

namespace tae::plot {
namespace {

constexpr const char* kFront = "#0072B2";  // Okabe & Ito blue, as the curves' first series
constexpr const char* kOff = "#888888";
constexpr const char* kBar = "#D55E00";
constexpr double kLeft = 84;
constexpr double kRight = 24;
constexpr double kTop = 64;
constexpr double kBottom = 70;
constexpr size_t kMaxLabel = 28;

bool Drawn(const FrontierMark& m) { return std::isfinite(m.cost) && std::isfinite(m.mean); }

PlotAxis ValueAxis(double lo, double hi) {
  const double span = hi > lo ? hi - lo : std::max(std::fabs(hi) * 0.2, 1e-3);
  PlotAxis axis;
  axis.lo = lo - 0.08 * span;
  axis.hi = hi + 0.08 * span;
  axis.ticks = NiceTicks(axis.lo, axis.hi, 6);
  return axis;
}

std::string Label(const std::string& name) {
  return name.size() <= kMaxLabel ? name : name.substr(0, kMaxLabel - 1) + "\xE2\x80\xA6";
}

}  // namespace

std::string RenderFrontierSvg(const FrontierFigure& figure) {
  const double width = std::max(figure.width, 360);
  const double height = std::max(figure.height, 240);
  std::string out = SvgOpen(width, height);
  SvgText(out, "title", width / 2, 26, "middle",
          "font-size=\"16\" font-weight=\"bold\" fill=\"#111\"", figure.title);
  SvgText(out, "verdict", width / 2, 46, "middle", "font-size=\"13\" fill=\"#333\"",
          figure.verdict);

  double x_lo = std::numeric_limits<double>::infinity();
  double x_hi = -x_lo;
  double y_lo = figure.bar;
  double y_hi = figure.bar;
  std::vector<std::string> unknown;
  for (const FrontierMark& m : figure.marks) {
    if (!Drawn(m)) {
      unknown.push_back(m.name);
      continue;
    }
    x_lo = std::min(x_lo, m.cost);
    x_hi = std::max(x_hi, m.cost);
    for (double y : {m.mean, m.lo, m.hi}) {
      if (std::isfinite(y)) {
        y_lo = std::min(y_lo, y);
        y_hi = std::max(y_hi, y);
      }
    }
  }
  if (!std::isfinite(x_lo)) {
    SvgText(out, "no-data", width / 2, height / 2, "middle", "font-size=\"16\" fill=\"#777\"",
            "no variant with a known cost");
    out += "</svg>\n";
    return out;
  }
  const PlotAxis x = LogAxisIfWide(x_lo, x_hi);
  const PlotAxis y = ValueAxis(y_lo, y_hi);
  const double plot_w = width - kLeft - kRight;
  const double plot_h = height - kTop - kBottom;
  auto X = [&](double v) { return kLeft + plot_w * x.Fraction(v); };
  auto Y = [&](double v) { return kTop + plot_h * (1 - y.Fraction(v)); };

  SvgFrame(out, x, y, {kLeft, kTop, plot_w, plot_h}, figure.x_label, figure.y_label);

  // The bar, dashed, labelled at its right end.
  out += "<line class=\"bar\" x1=\"" + SvgNumber(kLeft) + "\" y1=\"" + SvgNumber(Y(figure.bar)) +
         "\" x2=\"" + SvgNumber(kLeft + plot_w) + "\" y2=\"" + SvgNumber(Y(figure.bar)) +
         "\" stroke=\"" + kBar + "\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n";
  SvgText(out, "bar-label", kLeft + plot_w - 4, Y(figure.bar) - 6, "end",
          std::string("font-size=\"12\" fill=\"") + kBar + "\"", figure.bar_label);

  // The front through its marks in cost order (the marks are cheapest first).
  std::vector<const FrontierMark*> front;
  for (const FrontierMark& m : figure.marks) {
    if (Drawn(m) && m.on_front) {
      front.push_back(&m);
    }
  }
  std::stable_sort(front.begin(), front.end(),
                   [](const FrontierMark* a, const FrontierMark* b) { return a->cost < b->cost; });
  if (front.size() > 1) {
    std::string d;
    for (const FrontierMark* m : front) {
      d += (d.empty() ? "M" : "L") + SvgNumber(X(m->cost)) + "," + SvgNumber(Y(m->mean));
    }
    out += std::string("<path class=\"front\" d=\"") + d + "\" fill=\"none\" stroke=\"" + kFront +
           "\" stroke-width=\"1.5\" stroke-opacity=\"0.6\"/>\n";
  }

  out += "<g class=\"marks\" font-size=\"11\">\n";
  for (const FrontierMark& m : figure.marks) {
    if (!Drawn(m)) {
      continue;
    }
    const std::string colour = m.on_front ? kFront : kOff;
    const std::string cx = SvgNumber(X(m.cost));
    const std::string cyv = SvgNumber(Y(m.mean));
    out += "<g class=\"variant" + std::string(m.on_front ? " on-front" : "") +
           (m.clears ? " clears" : "") + (m.cheapest ? " cheapest" : "") + "\"><title>" +
           XmlEscape(m.name) + "</title>";
    if (std::isfinite(m.lo) && std::isfinite(m.hi)) {
      out += "<line x1=\"" + cx + "\" y1=\"" + SvgNumber(Y(m.lo)) + "\" x2=\"" + cx + "\" y2=\"" +
             SvgNumber(Y(m.hi)) + "\" stroke=\"" + colour + "\" stroke-width=\"1.5\"/>";
    }
    out += "<circle cx=\"" + cx + "\" cy=\"" + cyv + "\" r=\"4.5\" stroke=\"" + colour +
           "\" stroke-width=\"1.5\" fill=\"" + (m.clears ? colour : std::string("#ffffff")) +
           "\"/>";
    if (m.cheapest) {
      out += "<circle cx=\"" + cx + "\" cy=\"" + cyv + "\" r=\"9\" fill=\"none\" stroke=\"" + kBar +
             "\" stroke-width=\"2\"/>";
    }
    out += "<text x=\"" + SvgNumber(X(m.cost) + 8) + "\" y=\"" + SvgNumber(Y(m.mean) - 8) +
           "\" fill=\"#333\">" + XmlEscape(Label(m.name)) + "</text></g>\n";
  }
  out += "</g>\n";
  std::string legend =
      "filled: the whole 95% CI clears the bar; hollow: it does not; line: the Pareto front";
  SvgText(out, "legend-note", kLeft, height - 10, "start", "font-size=\"11\" fill=\"#666\"",
          legend);
  if (!unknown.empty()) {
    std::string names;
    for (const std::string& name : unknown) {
      names += (names.empty() ? "" : ", ") + name;
    }
    SvgText(out, "unknown", kLeft, height - 26, "start", "font-size=\"11\" fill=\"#666\"",
            "not drawn (cost or value unknown): " + names);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace tae::plot
