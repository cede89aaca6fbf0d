#include "common/plot/svg_parts.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/plot/svg_plot.h"

namespace tae::plot {

double PlotAxis::Fraction(double v) const {
  return log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
             : (v - lo) / (hi - lo);
}

double PlotAxis::TickStep(double t) const {
  if (log) {
    return t / 10;
  }
  return ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
}

PlotAxis LinearAxis(double lo, double hi, double pad) {
  PlotAxis axis;
  const double margin = lo == hi ? std::max(std::fabs(lo) * 0.1, 1.0) : pad * (hi - lo);
  axis.lo = lo - margin;
  axis.hi = hi + margin;
  axis.ticks = NiceTicks(axis.lo, axis.hi, 6);
  return axis;
}

PlotAxis LogAxisIfWide(double lo, double hi, double min_ratio) {
  if (!(lo > 0 && hi / lo >= min_ratio)) {
    return LinearAxis(lo, hi);
  }
  PlotAxis axis;
  axis.log = true;
  axis.lo = lo / 1.4;
  axis.hi = hi * 1.4;
  axis.ticks = LogTicks(axis.lo, axis.hi);
  return axis;
}

PlotAxis LogAxis(double lo, double hi, double pad) {
  PlotAxis axis;
  axis.log = true;
  const double decades = hi > lo ? std::log10(hi / lo) : 0.1;
  const double factor = std::pow(10.0, pad * decades);
  axis.lo = lo / factor;
  axis.hi = hi * factor;
  axis.ticks = LogTicks(axis.lo, axis.hi);
  return axis;
}

std::vector<std::string> WrapWords(const std::string& text, size_t columns) {
  const auto width = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) {
      n += (c & 0xC0) != 0x80 ? 1 : 0;
    }
    return n;
  };
  std::vector<std::string> lines;
  std::string line;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && width(line) + 1 + width(word) > columns) {
      lines.push_back(line);
      line.clear();
    }
    line += line.empty() ? word : " " + word;
    start = end + 1;
  }
  if (!line.empty() || lines.empty()) {
    lines.push_back(line);
  }
  return lines;
}

std::string SvgOpen(double width, double height) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + SvgNumber(width) + "\" height=\"" +
         SvgNumber(height) + "\" viewBox=\"0 0 " + SvgNumber(width) + " " + SvgNumber(height) +
         "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  return out;
}

void SvgText(std::string& out, const std::string& cls, double x, double y,
             const std::string& anchor, const std::string& attributes, const std::string& text) {
  out += "<text class=\"" + cls + "\" x=\"" + SvgNumber(x) + "\" y=\"" + SvgNumber(y) +
         "\" text-anchor=\"" + anchor + "\" " + attributes + ">" + XmlEscape(text) + "</text>\n";
}

void SvgFrame(std::string& out, const PlotAxis& x, const PlotAxis& y, const PlotBox& box,
              const std::string& x_label, const std::string& y_label) {
  auto X = [&](double v) { return box.left + box.width * x.Fraction(v); };
  auto Y = [&](double v) { return box.top + box.height * (1 - y.Fraction(v)); };
  const double right = box.left + box.width;
  const double bottom = box.top + box.height;
  out += "<g class=\"grid\" stroke=\"#e3e3e3\" shape-rendering=\"crispEdges\">\n";
  for (double t : x.ticks) {
    out += "<line x1=\"" + SvgNumber(X(t)) + "\" y1=\"" + SvgNumber(box.top) + "\" x2=\"" +
           SvgNumber(X(t)) + "\" y2=\"" + SvgNumber(bottom) + "\"/>\n";
  }
  for (double t : y.ticks) {
    out += "<line x1=\"" + SvgNumber(box.left) + "\" y1=\"" + SvgNumber(Y(t)) + "\" x2=\"" +
           SvgNumber(right) + "\" y2=\"" + SvgNumber(Y(t)) + "\"/>\n";
  }
  out += "</g>\n<path class=\"axes\" d=\"M" + SvgNumber(box.left) + "," + SvgNumber(box.top) + "V" +
         SvgNumber(bottom) + "H" + SvgNumber(right) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  out += "<g class=\"tick-labels\" font-size=\"12\" fill=\"#333\">\n";
  for (double t : x.ticks) {
    SvgText(out, "x-tick", X(t), bottom + 18, "middle", "", FormatTick(t, x.TickStep(t)));
  }
  for (double t : y.ticks) {
    SvgText(out, "y-tick", box.left - 8, Y(t) + 4, "end", "", FormatTick(t, y.TickStep(t)));
  }
  out += "</g>\n";
  SvgText(out, "x-label", box.left + box.width / 2, bottom + 42, "middle",
          "font-size=\"13\" fill=\"#222\"", x_label);
  const std::string cy = SvgNumber(box.top + box.height / 2);
  out += "<text class=\"y-label\" x=\"22\" y=\"" + cy + "\" transform=\"rotate(-90 22 " + cy +
         ")\" text-anchor=\"middle\" font-size=\"13\" fill=\"#222\">" + XmlEscape(y_label) +
         "</text>\n";
}

}  // namespace tae::plot
