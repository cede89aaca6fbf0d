#pragma once

// The cost frontier as an SVG document (taectl plot --frontier, the dashboard's frontier view).
//
// One mark per variant at (cost, mean) with its 95% CI as a vertical bar; filled when the whole
// CI clears the bar, hollow otherwise. The Pareto front is a line through its marks in cost order,
// the bar a dashed horizontal line labelled with its expression, and the cheapest variant that
// clears it is ringed and named in the subtitle. The cost axis is logarithmic when every cost is
// positive and they span a factor of 10 or more. Variants whose cost is unknown are named in a
// note below the plot, not drawn. Deterministic: the same input gives the same bytes.

#include <string>
#include <vector>

namespace tae::plot {

struct FrontierMark {
  std::string name;  // escaped on output
  double cost = 0;   // non-finite: unknown, listed in the note
  double mean = 0;   // non-finite: no value, listed in the note
  double lo = 0;     // the CI's bounds; non-finite: no CI (one seed), drawn without a bar
  double hi = 0;
  bool on_front = false;
  bool clears = false;    // the whole CI is on the passing side of the bar
  bool cheapest = false;  // the cheapest variant that clears
};

struct FrontierFigure {
  std::string title;
  std::string x_label;    // "params (lower is cheaper)"
  std::string y_label;    // "eval/acc (mean ± 95% CI)"
  std::string bar_label;  // "eval/acc >= 0.99"
  double bar = 0;
  std::string verdict;  // the subtitle: "cheapest that clears: small" / "none clears it"
  std::vector<FrontierMark> marks;
  int width = 900;
  int height = 540;
};

// A complete standalone SVG document; without a mark of known cost and mean, one that says
// "no variant with a known cost".
std::string RenderFrontierSvg(const FrontierFigure& figure);

}  // namespace tae::plot
