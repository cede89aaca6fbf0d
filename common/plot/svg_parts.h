#pragma once

// Pieces the point figures share (the cost frontier, the scale ladder): an axis that maps values
// to [0, 1] on a linear or log scale with its ticks, the document's opening, and a text element.
// Deterministic, like every figure here.

#include <string>
#include <vector>

namespace tae::plot {

struct PlotAxis {
  double lo = 0;
  double hi = 1;
  bool log = false;
  std::vector<double> ticks;

  // Where v falls between lo (0) and hi (1).
  double Fraction(double v) const;
  // The spacing FormatTick wants for tick t.
  double TickStep(double t) const;
};

// [lo, hi] padded by 6% (or by 10% of |lo|, at least 1, when lo == hi), nice linear ticks.
PlotAxis LinearAxis(double lo, double hi, double pad = 0.06);
// Log when lo > 0 and hi / lo >= min_ratio (padded by a factor 1.4), else LinearAxis.
PlotAxis LogAxisIfWide(double lo, double hi, double min_ratio = 10);
// A log axis over [lo, hi] (both > 0) padded by `pad` of its span in decades.
PlotAxis LogAxis(double lo, double hi, double pad = 0.06);

// `text` broken at spaces into lines of at most `columns` characters (UTF-8 sequences count as
// one); a word longer than that is a line of its own.
std::vector<std::string> WrapWords(const std::string& text, size_t columns);

// <?xml ...?><svg ...> with a white background; the caller closes it with "</svg>\n".
std::string SvgOpen(double width, double height);

// Where the plot area is, in the document's pixels.
struct PlotBox {
  double left = 0;
  double top = 0;
  double width = 0;
  double height = 0;
};
// The plot's frame: grid lines at every tick of `x` and `y`, the axes on the left and bottom,
// the tick labels and the two axis labels (the y one turned).
void SvgFrame(std::string& out, const PlotAxis& x, const PlotAxis& y, const PlotBox& box,
              const std::string& x_label, const std::string& y_label);
// <text class="cls" x y text-anchor="anchor" attributes>text</text>, text escaped.
void SvgText(std::string& out, const std::string& cls, double x, double y,
             const std::string& anchor, const std::string& attributes, const std::string& text);

}  // namespace tae::plot
