#pragma once

// A ladder of model sizes as an SVG document (taectl plot --scale, the dashboard's scale view).
//
// The metric against N on log-log axes: per variant, its mean at each rung with the 95% CI as a
// vertical bar, a shaded band through the CIs from rung to rung, and the fitted law
// L = E + A·(m·N)^-α with the variant's multiplier m as a line across the ladder (extended to
// `at` when given, which is marked by a dotted vertical line). The variants are dodged a few
// pixels apart so that their bars do not cover each other. The legend, right of the plot, gives
// each variant's multiplier and trend; warnings go below. The y axis is linear when a value is
// not positive. Deterministic: the same input gives the same bytes.

#include <string>
#include <vector>

namespace tae::plot {

struct ScaleMark {
  double size = 0;  // N; non-finite or <= 0: not drawn
  double mean = 0;  // non-finite: not drawn
  double lo = 0;    // the CI; non-finite: no bar (one seed)
  double hi = 0;
};

struct ScaleLine {
  std::string name;              // legend text; escaped on output
  std::string detail;            // the legend's second line: "m = 1.12 [1.05, 1.19], trend none"
  double multiplier = 0;         // the curve's m (at N = exp(log_size_ref)); non-finite: no curve
  double slope = 0;              // d log m / d log N of the curve (a trend model's), else 0
  std::vector<ScaleMark> marks;  // one per rung it has a value at
};

struct ScaleFigure {
  std::string title;
  std::string subtitle;  // "α = 0.31 [0.27, 0.35], E = 1.42 [1.31, 1.50]"
  std::string x_label;   // "N (parameters)"
  std::string y_label;   // "eval/loss (mean ± 95% CI)"
  // The law; non-finite alpha: no fit, no curves.
  double E = 0;
  double A = 0;
  double alpha = 0;
  double log_size_ref = 0;       // where a line's multiplier is taken when its slope is not 0
  double at = 0;                 // > 0: extend the curves there and mark it
  std::vector<ScaleLine> lines;  // the baseline first
  std::vector<std::string> notes;
  int width = 960;
  int height = 560;
};

// The law's value for multiplier m at size n: E + A·(m(n)·n)^-alpha, with
// m(n) = m·exp(slope·(log n - log_size_ref)).
double ScaleLaw(const ScaleFigure& figure, double multiplier, double n, double slope = 0);

// A complete standalone SVG document; without any drawable mark, one that says "no rung has a
// value yet".
std::string RenderScaleSvg(const ScaleFigure& figure);

}  // namespace tae::plot
