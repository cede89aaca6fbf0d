#include "common/plot/scale_svg.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "common/plot/svg_parts.h"
#include "common/plot/svg_plot.h"

namespace tae::plot {
namespace {

constexpr double kLeft = 84;
constexpr double kTop = 66;
constexpr double kBottom = 64;
constexpr double kNoteRow = 15;
constexpr double kLegendWidth = 250;
constexpr double kLegendRow = 34;
constexpr double kDodge = 4;      // pixels between neighbouring variants' marks
constexpr int kCurvePoints = 96;  // samples of each fitted curve

bool Drawn(const ScaleMark& m) {
  return std::isfinite(m.size) && m.size > 0 && std::isfinite(m.mean);
}
bool HasBar(const ScaleMark& m) { return std::isfinite(m.lo) && std::isfinite(m.hi); }
bool HasLaw(const ScaleFigure& f) {
  return std::isfinite(f.alpha) && std::isfinite(f.A) && std::isfinite(f.E);
}

std::string Point(double x, double y) { return SvgNumber(x) + "," + SvgNumber(y); }

}  // namespace

double ScaleLaw(const ScaleFigure& figure, double multiplier, double n, double slope) {
  const double m = multiplier * std::exp(slope * (std::log(n) - figure.log_size_ref));
  return figure.E + figure.A * std::pow(m * n, -figure.alpha);
}

std::string RenderScaleSvg(const ScaleFigure& figure) {
  const double width = std::max(figure.width, 480);
  const double height = std::max(figure.height, 300);
  std::string out = SvgOpen(width, height);
  SvgText(out, "title", (width - kLegendWidth) / 2, 26, "middle",
          "font-size=\"16\" font-weight=\"bold\" fill=\"#111\"", figure.title);
  SvgText(out, "subtitle", (width - kLegendWidth) / 2, 46, "middle",
          "font-size=\"13\" fill=\"#333\"", figure.subtitle);

  double x_lo = std::numeric_limits<double>::infinity();
  double x_hi = -x_lo;
  double y_lo = x_lo;
  double y_hi = -x_lo;
  auto add_y = [&](double y) {
    if (std::isfinite(y)) {
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  };
  for (const ScaleLine& line : figure.lines) {
    for (const ScaleMark& m : line.marks) {
      if (!Drawn(m)) {
        continue;
      }
      x_lo = std::min(x_lo, m.size);
      x_hi = std::max(x_hi, m.size);
      add_y(m.mean);
      if (HasBar(m)) {
        add_y(m.lo);
        add_y(m.hi);
      }
    }
  }
  if (!std::isfinite(x_lo)) {
    SvgText(out, "no-data", width / 2, height / 2, "middle", "font-size=\"16\" fill=\"#777\"",
            "no rung has a value yet");
    out += "</svg>\n";
    return out;
  }
  const bool law = HasLaw(figure);
  const bool at = figure.at > 0 && std::isfinite(figure.at);
  if (at) {
    x_lo = std::min(x_lo, figure.at);
    x_hi = std::max(x_hi, figure.at);
  }
  // The curves at the ladder's ends (and at `at`) count toward the y range; between those the
  // law is monotone, so the curves stay inside it.
  if (law) {
    for (const ScaleLine& line : figure.lines) {
      if (std::isfinite(line.multiplier) && line.multiplier > 0) {
        add_y(ScaleLaw(figure, line.multiplier, x_lo, line.slope));
        add_y(ScaleLaw(figure, line.multiplier, x_hi, line.slope));
      }
    }
  }
  const PlotAxis x = LogAxis(x_lo, x_hi, 0.06);
  const PlotAxis y = y_lo > 0 ? LogAxis(y_lo, y_hi, 0.06) : LinearAxis(y_lo, y_hi, 0.08);
  // Notes and legend details wrapped to the figure (about 6 px a character at 11 px).
  const size_t note_columns = static_cast<size_t>(std::max(40.0, (width - kLeft - 16) / 6.2));
  std::vector<std::string> note_lines;
  for (const std::string& note : figure.notes) {
    for (std::string& line : WrapWords(note, note_columns)) {
      note_lines.push_back(std::move(line));
    }
  }
  const double notes_h = kNoteRow * static_cast<double>(note_lines.size());
  const double plot_w = width - kLeft - kLegendWidth - 24;
  const double plot_h = std::max(120.0, height - kTop - kBottom - notes_h);
  auto X = [&](double v) { return kLeft + plot_w * x.Fraction(v); };
  auto Y = [&](double v) { return kTop + plot_h * (1 - y.Fraction(v)); };

  out += "<defs><clipPath id=\"plot-area\"><rect x=\"" + SvgNumber(kLeft) + "\" y=\"" +
         SvgNumber(kTop) + "\" width=\"" + SvgNumber(plot_w) + "\" height=\"" + SvgNumber(plot_h) +
         "\"/></clipPath></defs>\n";
  SvgFrame(out, x, y, {kLeft, kTop, plot_w, plot_h}, figure.x_label, figure.y_label);

  if (at) {
    out += "<line class=\"at\" x1=\"" + SvgNumber(X(figure.at)) + "\" y1=\"" + SvgNumber(kTop) +
           "\" x2=\"" + SvgNumber(X(figure.at)) + "\" y2=\"" + SvgNumber(kTop + plot_h) +
           "\" stroke=\"#666\" stroke-dasharray=\"2 3\"/>\n";
    SvgText(out, "at-label", X(figure.at) - 4, kTop + 12, "end", "font-size=\"11\" fill=\"#555\"",
            "N = " + FormatTick(figure.at, figure.at / 10));
  }

  const std::size_t count = figure.lines.size();
  out += "<g class=\"variants\" clip-path=\"url(#plot-area)\">\n";
  for (std::size_t k = 0; k < count; ++k) {
    const ScaleLine& line = figure.lines[k];
    const std::string colour = SeriesColour(k);
    const double dodge = kDodge * (static_cast<double>(k) - (static_cast<double>(count) - 1) / 2);
    std::vector<const ScaleMark*> marks;
    for (const ScaleMark& m : line.marks) {
      if (Drawn(m)) {
        marks.push_back(&m);
      }
    }
    std::stable_sort(marks.begin(), marks.end(),
                     [](const ScaleMark* a, const ScaleMark* b) { return a->size < b->size; });
    out += "<g class=\"variant\"><title>" + XmlEscape(line.name) + "</title>\n";
    // The band through the CIs, rung to rung, where every mark has one.
    const bool band = marks.size() > 1 &&
                      std::all_of(marks.begin(), marks.end(), [](auto* m) { return HasBar(*m); });
    if (band) {
      std::string d;
      for (const ScaleMark* m : marks) {
        d += (d.empty() ? "M" : "L") + Point(X(m->size), Y(m->hi));
      }
      for (auto it = marks.rbegin(); it != marks.rend(); ++it) {
        d += "L" + Point(X((*it)->size), Y((*it)->lo));
      }
      out += "<path class=\"band\" d=\"" + d + "Z\" fill=\"" + colour +
             "\" fill-opacity=\"0.12\" stroke=\"none\"/>\n";
    }
    if (law && std::isfinite(line.multiplier) && line.multiplier > 0) {
      std::string d;
      const double from = std::log10(x.lo);
      const double to = std::log10(x.hi);
      for (int i = 0; i < kCurvePoints; ++i) {
        const double n = std::pow(10.0, from + (to - from) * i / (kCurvePoints - 1));
        const double v = ScaleLaw(figure, line.multiplier, n, line.slope);
        if (!std::isfinite(v) || (y.log && v <= 0)) {
          continue;
        }
        d += (d.empty() ? "M" : "L") + Point(X(n), Y(v));
      }
      std::string dash = SeriesDash(k);
      out += "<path class=\"fit\" d=\"" + d + "\" fill=\"none\" stroke=\"" + colour +
             "\" stroke-width=\"1.6\"" +
             (dash.empty() ? std::string() : " stroke-dasharray=\"" + dash + "\"") + "/>\n";
    }
    for (const ScaleMark* m : marks) {
      const std::string cx = SvgNumber(X(m->size) + dodge);
      if (HasBar(*m)) {
        out += "<line class=\"ci\" x1=\"" + cx + "\" y1=\"" + SvgNumber(Y(m->lo)) + "\" x2=\"" +
               cx + "\" y2=\"" + SvgNumber(Y(m->hi)) + "\" stroke=\"" + colour +
               "\" stroke-width=\"1.5\"/>\n";
      }
      out += "<circle class=\"mean\" cx=\"" + cx + "\" cy=\"" + SvgNumber(Y(m->mean)) +
             "\" r=\"3.5\" fill=\"" + colour + "\"/>\n";
    }
    out += "</g>\n";
  }
  out += "</g>\n";

  // The legend: name, then the multiplier and trend.
  const double legend_x = width - kLegendWidth - 8;
  out += "<g class=\"legend\" font-size=\"12\" fill=\"#222\">\n";
  double top = kTop;
  for (std::size_t k = 0; k < count; ++k) {
    out += "<g class=\"legend-entry\"><rect x=\"" + SvgNumber(legend_x) + "\" y=\"" +
           SvgNumber(top) + "\" width=\"22\" height=\"10\" fill=\"" + SeriesColour(k) + "\"/>";
    out += "<text x=\"" + SvgNumber(legend_x + 30) + "\" y=\"" + SvgNumber(top + 10) + "\">" +
           XmlEscape(figure.lines[k].name) + "</text>";
    out += "<text class=\"legend-detail\" font-size=\"11\" fill=\"#555\">";
    const std::vector<std::string> detail = WrapWords(figure.lines[k].detail, 36);
    for (size_t i = 0; i < detail.size(); ++i) {
      out += "<tspan x=\"" + SvgNumber(legend_x + 30) + "\" y=\"" +
             SvgNumber(top + 24 + 13 * static_cast<double>(i)) + "\">" + XmlEscape(detail[i]) +
             "</tspan>";
    }
    out += "</text></g>\n";
    top += kLegendRow + 13 * static_cast<double>(detail.size() - 1);
  }
  out += "</g>\n";
  double note_y = kTop + plot_h + 62;
  for (const std::string& note : note_lines) {
    SvgText(out, "note", kLeft, note_y, "start", "font-size=\"11\" fill=\"#8a4b00\"", note);
    note_y += kNoteRow;
  }
  out += "</svg>\n";
  return out;
}

}  // namespace tae::plot
