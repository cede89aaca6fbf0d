#include "common/plot/svg_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace tae::plot {

// Coordinates with one decimal: sub-pixel exact enough, small and deterministic.
std::string SvgNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", value);
  std::string text = buffer;
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) {
    text.resize(text.size() - 2);
  }
  return text == "-0" ? "0" : text;
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0.
        out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
  }
  return out;
}

namespace {

// Okabe & Ito (2008), colour-blind safe; yellow left out (too light on white). Beyond seven
// series the colours repeat with the next dash pattern.
constexpr std::array<const char*, 7> kPalette = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                                 "#E69F00", "#56B4E9", "#000000"};
constexpr std::array<const char*, 4> kDashes = {"", "8 4", "2 3", "10 3 2 3"};

}  // namespace

const char* SeriesColour(std::size_t index) { return kPalette[index % kPalette.size()]; }
const char* SeriesDash(std::size_t index) {
  return kDashes[(index / kPalette.size()) % kDashes.size()];
}

namespace {

// Average glyph advances of the sans-serif fonts at 12 and 11 px, for layout only.
constexpr double kCharWidth = 6.5;
constexpr double kNoteCharWidth = 6.0;
constexpr double kTickLength = 5;
constexpr std::size_t kMaxLegendChars = 36;
constexpr double kLegendRow = 20;
constexpr double kLegendSample = 28;

const char* Colour(std::size_t index) { return SeriesColour(index); }
const char* Dash(std::size_t index) { return SeriesDash(index); }

std::size_t Utf8Length(const std::string& text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// At most `limit` code points, with an ellipsis when cut.
std::string Truncate(const std::string& text, std::size_t limit) {
  if (Utf8Length(text) <= limit) {
    return text;
  }
  std::size_t points = 0;
  std::size_t end = 0;
  for (; end < text.size(); ++end) {
    if ((static_cast<unsigned char>(text[end]) & 0xC0) != 0x80 && ++points == limit) {
      break;
    }
  }
  return text.substr(0, end) + "\xE2\x80\xA6";
}

double TextWidth(const std::string& text) { return Utf8Length(text) * kCharWidth; }

std::size_t PointCount(const Series& s) { return std::min(s.x.size(), s.mean.size()); }

bool BandUsable(const Series& s) {
  return s.lo.size() >= PointCount(s) && s.hi.size() >= PointCount(s);
}

// A band is drawn when some finite point has lo or hi apart from the mean (several seeds).
bool HasBand(const Series& s) {
  if (!BandUsable(s)) {
    return false;
  }
  for (std::size_t i = 0; i < PointCount(s); ++i) {
    const double tolerance = 1e-12 * std::fabs(s.mean[i]);
    if (std::isfinite(s.lo[i]) && std::isfinite(s.hi[i]) &&
        (std::fabs(s.lo[i] - s.mean[i]) > tolerance ||
         std::fabs(s.hi[i] - s.mean[i]) > tolerance)) {
      return true;
    }
  }
  return false;
}

// Range of the finite data; y covers the bands too.
struct Extent {
  double x_lo = std::numeric_limits<double>::infinity();
  double x_hi = -std::numeric_limits<double>::infinity();
  double y_lo = std::numeric_limits<double>::infinity();
  double y_hi = -std::numeric_limits<double>::infinity();
  bool empty = true;

  void AddY(double y) {
    if (std::isfinite(y)) {
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  }
};

Extent MeasureData(const std::vector<Series>& series) {
  Extent extent;
  for (const Series& s : series) {
    const bool band = HasBand(s);
    for (std::size_t i = 0; i < PointCount(s); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.mean[i])) {
        continue;
      }
      extent.empty = false;
      extent.x_lo = std::min(extent.x_lo, s.x[i]);
      extent.x_hi = std::max(extent.x_hi, s.x[i]);
      extent.AddY(s.mean[i]);
      if (band) {
        extent.AddY(s.lo[i]);
        extent.AddY(s.hi[i]);
      }
    }
  }
  return extent;
}

// Maps data values to [0, 1] along one axis and knows its ticks.
struct Scale {
  double lo = 0;
  double hi = 1;
  bool log = false;
  std::vector<double> ticks;
  std::vector<std::string> labels;

  double Fraction(double v) const {
    if (log) {
      return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    }
    return (v - lo) / (hi - lo);
  }
};

void LabelTicks(Scale& scale) {
  double step = std::numeric_limits<double>::infinity();
  for (std::size_t i = 1; i < scale.ticks.size(); ++i) {
    step = std::min(step, scale.ticks[i] - scale.ticks[i - 1]);
  }
  if (!std::isfinite(step)) {
    step = scale.ticks.empty() ? 1 : std::fabs(scale.ticks[0]) / 10;
  }
  for (double tick : scale.ticks) {
    std::string label = FormatTick(tick, step);
    if (label[0] == '-') {
      label.replace(0, 1, "\xE2\x88\x92");  // typographic minus sign
    }
    scale.labels.push_back(label);
  }
}

// The x axis spans the data exactly: the last step sits on the right edge.
Scale MakeXScale(const Extent& extent, int target) {
  Scale scale;
  scale.lo = extent.x_lo;
  scale.hi = extent.x_hi;
  if (scale.lo == scale.hi) {
    const double half = std::max(std::fabs(scale.lo) * 0.1, 1.0);
    scale.lo -= half;
    scale.hi += half;
  }
  scale.ticks = NiceTicks(scale.lo, scale.hi, target);
  LabelTicks(scale);
  return scale;
}

// The y axis gets a margin so curves do not run along the frame.
Scale MakeYScale(const Extent& extent, bool log, int target) {
  Scale scale;
  scale.log = log;
  if (log) {
    double low = std::log10(extent.y_lo);
    double high = std::log10(extent.y_hi);
    const double pad = std::max(0.04 * (high - low), 0.02);
    scale.lo = std::pow(10.0, low - pad);
    scale.hi = std::pow(10.0, high + pad);
    scale.ticks = LogTicks(scale.lo, scale.hi);
  } else {
    double span = extent.y_hi - extent.y_lo;
    if (span == 0) {
      span = std::max(std::fabs(extent.y_hi) * 0.2, 1.0);
    }
    scale.lo = extent.y_lo - 0.05 * span;
    scale.hi = extent.y_hi + 0.05 * span;
    scale.ticks = NiceTicks(scale.lo, scale.hi, target);
  }
  LabelTicks(scale);
  return scale;
}

// Pixel boxes of the figure. The plot area is where data is drawn; the legend sits to its right.
struct Layout {
  double width = 0;
  double height = 0;
  double left = 0;
  double top = 0;
  double plot_width = 0;
  double plot_height = 0;
  double legend_x = 0;
  double legend_width = 0;
  bool subtitle = false;

  double Right() const { return left + plot_width; }
  double Bottom() const { return top + plot_height; }
};

double LegendWidth(const std::vector<Series>& series) {
  double widest = Utf8Length("shading: min\xE2\x80\x93max over seeds") * kNoteCharWidth;
  for (const Series& s : series) {
    widest = std::max(widest, TextWidth(Truncate(s.name, kMaxLegendChars)));
  }
  return kLegendSample + 8 + widest;
}

Layout MakeLayout(const PlotOptions& options, const std::vector<Series>& series, const Scale& y,
                  bool subtitle) {
  Layout layout;
  layout.width = std::max(options.width, 320);
  layout.height = std::max(options.height, 200);
  layout.subtitle = subtitle;
  double widest_tick = 0;
  for (const std::string& label : y.labels) {
    widest_tick = std::max(widest_tick, TextWidth(label));
  }
  layout.left = 14 + widest_tick + kTickLength + 6 + (options.y_label.empty() ? 0 : 22);
  layout.top = (options.title.empty() ? 20 : 46) + (subtitle ? 18 : 0);
  const double bottom = 24 + (options.x_label.empty() ? 0 : 24);
  layout.legend_width = std::min(LegendWidth(series), layout.width * 0.4);
  layout.legend_x = layout.width - 12 - layout.legend_width;
  layout.plot_width = layout.legend_x - 24 - layout.left;
  layout.plot_height = layout.height - layout.top - bottom;
  return layout;
}

class Figure {
 public:
  Figure(Layout layout, Scale x, Scale y)
      : layout_(std::move(layout)), x_(std::move(x)), y_(std::move(y)) {}

  double X(double v) const { return layout_.left + layout_.plot_width * x_.Fraction(v); }
  double Y(double v) const { return layout_.Bottom() - layout_.plot_height * y_.Fraction(v); }

  void Grid(std::string& out) const;
  void Axes(std::string& out, const PlotOptions& options) const;
  void Bands(std::string& out, const std::vector<Series>& series) const;
  void Lines(std::string& out, const std::vector<Series>& series) const;
  void Legend(std::string& out, const std::vector<Series>& series) const;

 private:
  bool Plottable(const Series& s, std::size_t i, bool band) const;
  std::string LinePath(const Series& s) const;
  std::string BandPath(const Series& s) const;

  Layout layout_;
  Scale x_;
  Scale y_;
};

void Figure::Grid(std::string& out) const {
  out +=
      "<g class=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\" shape-rendering=\"crispEdges\">\n";
  for (double tick : x_.ticks) {
    out += "<line x1=\"" + SvgNumber(X(tick)) + "\" y1=\"" + SvgNumber(layout_.top) + "\" x2=\"" +
           SvgNumber(X(tick)) + "\" y2=\"" + SvgNumber(layout_.Bottom()) + "\"/>\n";
  }
  for (double tick : y_.ticks) {
    out += "<line x1=\"" + SvgNumber(layout_.left) + "\" y1=\"" + SvgNumber(Y(tick)) + "\" x2=\"" +
           SvgNumber(layout_.Right()) + "\" y2=\"" + SvgNumber(Y(tick)) + "\"/>\n";
  }
  out += "</g>\n";
}

void Figure::Axes(std::string& out, const PlotOptions& options) const {
  const double left = layout_.left;
  const double bottom = layout_.Bottom();
  out +=
      "<g class=\"axes\" stroke=\"#444444\" stroke-width=\"1\" shape-rendering=\"crispEdges\">\n";
  out += "<path d=\"M" + SvgNumber(left) + "," + SvgNumber(layout_.top) + "V" + SvgNumber(bottom) +
         "H" + SvgNumber(layout_.Right()) + "\" fill=\"none\"/>\n";
  for (double tick : x_.ticks) {
    out += "<line x1=\"" + SvgNumber(X(tick)) + "\" y1=\"" + SvgNumber(bottom) + "\" x2=\"" +
           SvgNumber(X(tick)) + "\" y2=\"" + SvgNumber(bottom + kTickLength) + "\"/>\n";
  }
  for (double tick : y_.ticks) {
    out += "<line x1=\"" + SvgNumber(left - kTickLength) + "\" y1=\"" + SvgNumber(Y(tick)) +
           "\" x2=\"" + SvgNumber(left) + "\" y2=\"" + SvgNumber(Y(tick)) + "\"/>\n";
  }
  out += "</g>\n<g class=\"tick-labels\" font-size=\"12\" fill=\"#333333\">\n";
  for (std::size_t i = 0; i < x_.ticks.size(); ++i) {
    out += "<text x=\"" + SvgNumber(X(x_.ticks[i])) + "\" y=\"" +
           SvgNumber(bottom + kTickLength + 14) + "\" text-anchor=\"middle\">" + x_.labels[i] +
           "</text>\n";
  }
  for (std::size_t i = 0; i < y_.ticks.size(); ++i) {
    out += "<text x=\"" + SvgNumber(left - kTickLength - 4) + "\" y=\"" +
           SvgNumber(Y(y_.ticks[i]) + 4) + "\" text-anchor=\"end\">" + y_.labels[i] + "</text>\n";
  }
  out += "</g>\n";
  if (!options.x_label.empty()) {
    out += "<text class=\"x-label\" x=\"" + SvgNumber(layout_.left + layout_.plot_width / 2) +
           "\" y=\"" + SvgNumber(bottom + kTickLength + 38) +
           "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#222222\">" +
           XmlEscape(options.x_label) + "</text>\n";
  }
  if (!options.y_label.empty()) {
    const std::string cx = "28";
    const std::string cy = SvgNumber(layout_.top + layout_.plot_height / 2);
    out += "<text class=\"y-label\" x=\"" + cx + "\" y=\"" + cy + "\" transform=\"rotate(-90 " +
           cx + " " + cy + ")\" text-anchor=\"middle\" " + "font-size=\"13\" fill=\"#222222\">" +
           XmlEscape(options.y_label) + "</text>\n";
  }
}

bool Figure::Plottable(const Series& s, std::size_t i, bool band) const {
  auto ok = [&](double v) { return std::isfinite(v) && (!y_.log || v > 0); };
  return std::isfinite(s.x[i]) && ok(s.mean[i]) && (!band || (ok(s.lo[i]) && ok(s.hi[i])));
}

// One path per series; each run of finite points is its own subpath, so a NaN breaks the line.
// A run of one point becomes a zero-length segment, which round caps draw as a dot.
std::string Figure::LinePath(const Series& s) const {
  std::string d;
  std::string last;
  int run = 0;
  auto end_run = [&] {
    if (run == 1) {
      d += "h0";
    }
    run = 0;
  };
  for (std::size_t i = 0; i < PointCount(s); ++i) {
    if (!Plottable(s, i, false)) {
      end_run();
      continue;
    }
    const std::string point = SvgNumber(X(s.x[i])) + "," + SvgNumber(Y(s.mean[i]));
    if (run > 0 && point == last) {
      continue;  // same pixel as the previous point
    }
    d += (run > 0 ? "L" : "M") + point;
    last = point;
    ++run;
  }
  end_run();
  return d;
}

// Closed polygons: along hi forward, back along lo, one per run of finite points.
std::string Figure::BandPath(const Series& s) const {
  std::string d;
  std::size_t i = 0;
  const std::size_t n = PointCount(s);
  while (i < n) {
    if (!Plottable(s, i, true)) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < n && Plottable(s, end, true)) {
      ++end;
    }
    for (std::size_t j = i; j < end; ++j) {
      d += (j == i ? "M" : "L") + SvgNumber(X(s.x[j])) + "," + SvgNumber(Y(s.hi[j]));
    }
    for (std::size_t j = end; j-- > i;) {
      d += "L" + SvgNumber(X(s.x[j])) + "," + SvgNumber(Y(s.lo[j]));
    }
    d += "Z";
    i = end;
  }
  return d;
}

void Figure::Bands(std::string& out, const std::vector<Series>& series) const {
  out += "<g class=\"bands\" stroke=\"none\" fill-opacity=\"0.2\">\n";
  for (std::size_t k = 0; k < series.size(); ++k) {
    if (HasBand(series[k])) {
      out += "<path class=\"band\" fill=\"" + std::string(Colour(k)) + "\" d=\"" +
             BandPath(series[k]) + "\"/>\n";
    }
  }
  out += "</g>\n";
}

std::string StrokeAttributes(std::size_t k) {
  std::string attributes = "stroke=\"" + std::string(Colour(k)) + "\"";
  if (*Dash(k) != '\0') {
    attributes += " stroke-dasharray=\"" + std::string(Dash(k)) + "\"";
  }
  return attributes;
}

void Figure::Lines(std::string& out, const std::vector<Series>& series) const {
  out +=
      "<g class=\"lines\" fill=\"none\" stroke-width=\"2\" stroke-linejoin=\"round\" "
      "stroke-linecap=\"round\">\n";
  for (std::size_t k = 0; k < series.size(); ++k) {
    out += "<path class=\"line\" " + StrokeAttributes(k) + " d=\"" + LinePath(series[k]) + "\"/>\n";
  }
  out += "</g>\n";
}

void Figure::Legend(std::string& out, const std::vector<Series>& series) const {
  out += "<g class=\"legend\" font-size=\"12\" fill=\"#222222\">\n";
  double y = layout_.top + 8;
  const double x = layout_.legend_x;
  bool any_band = false;
  for (std::size_t k = 0; k < series.size(); ++k, y += kLegendRow) {
    out += "<g class=\"legend-entry\">";
    if (HasBand(series[k])) {
      any_band = true;
      out += "<rect x=\"" + SvgNumber(x) + "\" y=\"" + SvgNumber(y - 6) + "\" width=\"" +
             SvgNumber(kLegendSample) + "\" height=\"12\" fill=\"" + Colour(k) +
             "\" fill-opacity=\"0.2\"/>";
    }
    out += "<line x1=\"" + SvgNumber(x) + "\" y1=\"" + SvgNumber(y) + "\" x2=\"" +
           SvgNumber(x + kLegendSample) + "\" y2=\"" + SvgNumber(y) + "\" stroke-width=\"2\" " +
           StrokeAttributes(k) + "/>";
    out += "<text x=\"" + SvgNumber(x + kLegendSample + 8) + "\" y=\"" + SvgNumber(y + 4) +
           "\"><title>" + XmlEscape(series[k].name) + "</title>" +
           XmlEscape(Truncate(series[k].name, kMaxLegendChars)) + "</text></g>\n";
  }
  if (any_band) {
    y += 6;
    out += "<text class=\"legend-note\" x=\"" + SvgNumber(x) + "\" y=\"" + SvgNumber(y + 4) +
           "\" font-size=\"11\" fill=\"#666666\">line: mean over seeds</text>\n";
    out += "<text class=\"legend-note\" x=\"" + SvgNumber(x) + "\" y=\"" + SvgNumber(y + 18) +
           "\" font-size=\"11\" fill=\"#666666\">shading: min\xE2\x80\x93max over seeds</text>\n";
  }
  out += "</g>\n";
}

void OpenDocument(std::string& out, double width, double height) {
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + SvgNumber(width) + "\" height=\"" +
         SvgNumber(height) + "\" viewBox=\"0 0 " + SvgNumber(width) + " " + SvgNumber(height) +
         "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
}

void Titles(std::string& out, const PlotOptions& options, double center_x,
            const std::string& subtitle) {
  double y = 28;
  if (!options.title.empty()) {
    out += "<text class=\"title\" x=\"" + SvgNumber(center_x) + "\" y=\"" + SvgNumber(y) +
           "\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\" fill=\"#111111\">" +
           XmlEscape(options.title) + "</text>\n";
    y += 18;
  }
  if (!subtitle.empty()) {
    out += "<text class=\"subtitle\" x=\"" + SvgNumber(center_x) + "\" y=\"" + SvgNumber(y) +
           "\" text-anchor=\"middle\" font-size=\"12\" font-style=\"italic\" fill=\"#555555\">" +
           XmlEscape(subtitle) + "</text>\n";
  }
}

std::string NoData(const PlotOptions& options) {
  const double width = std::max(options.width, 320);
  const double height = std::max(options.height, 200);
  std::string out;
  OpenDocument(out, width, height);
  Titles(out, options, width / 2, "");
  out += "<text class=\"no-data\" x=\"" + SvgNumber(width / 2) + "\" y=\"" + SvgNumber(height / 2) +
         "\" text-anchor=\"middle\" font-size=\"16\" fill=\"#777777\">no data</text>\n</svg>\n";
  return out;
}

}  // namespace

std::string RenderSvg(const std::vector<Series>& series, const PlotOptions& options) {
  const Extent extent = MeasureData(series);
  if (extent.empty) {
    return NoData(options);
  }
  const bool log_y = options.log_y && extent.y_lo > 0;
  const std::string subtitle =
      options.log_y && !log_y
          ? "log scale requested, but some values are \xE2\x89\xA4 0: linear y axis"
          : "";
  const int height = std::max(options.height, 200);
  const Scale y = MakeYScale(extent, log_y, std::clamp(height / 80, 3, 8));
  const Layout layout = MakeLayout(options, series, y, !subtitle.empty());
  const Scale x = MakeXScale(extent, std::clamp(static_cast<int>(layout.plot_width / 100), 3, 8));
  const Figure figure(layout, x, y);

  std::string out;
  OpenDocument(out, layout.width, layout.height);
  Titles(out, options, layout.left + layout.plot_width / 2, subtitle);
  out += "<rect class=\"plot-area\" x=\"" + SvgNumber(layout.left) + "\" y=\"" +
         SvgNumber(layout.top) + "\" width=\"" + SvgNumber(layout.plot_width) + "\" height=\"" +
         SvgNumber(layout.plot_height) + "\" fill=\"none\"/>\n";
  figure.Grid(out);
  figure.Bands(out, series);
  figure.Lines(out, series);
  figure.Axes(out, options);
  figure.Legend(out, series);
  out += "</svg>\n";
  return out;
}

}  // namespace tae::plot
