#pragma once

// Metric curves as an SVG document (taectl plot).
//
// One line per variant (the mean over seeds) with a shaded min-max band when there is more than
// one seed, nice axis ticks, light grid, a title, axis labels and a legend to the right of the
// plot area. Output is deterministic: the same input gives the same bytes.

#include <cstddef>
#include <string>
#include <vector>

namespace tae::plot {

// One variant. x is ascending; mean, lo and hi have the same length as x. lo/hi are the min/max
// over seeds; when they equal mean everywhere (one seed) no band is drawn. Non-finite points
// are skipped and break the line.
struct Series {
  std::string name;  // legend text; escaped on output
  std::vector<double> x;
  std::vector<double> mean;
  std::vector<double> lo;
  std::vector<double> hi;
};

struct PlotOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label;
  // Logarithmic y axis (loss, perplexity). Only honoured when every plotted value is > 0;
  // otherwise the axis is linear and a subtitle says so.
  bool log_y = false;
  int width = 900;
  int height = 540;
};

// A complete standalone SVG document. No series, or no finite point in any series, gives a
// valid document that says "no data".
std::string RenderSvg(const std::vector<Series>& series, const PlotOptions& options);

// A coordinate with one decimal ("12.5", "3"): sub-pixel exact, small and deterministic.
std::string SvgNumber(double value);
// Series k's colour (Okabe & Ito, colour-blind safe) and dash pattern ("" solid): after seven
// series the colours repeat with the next dash. The same series index gets the same look in
// every figure.
const char* SeriesColour(std::size_t index);
const char* SeriesDash(std::size_t index);
// `text` with & < > " ' escaped and control characters made spaces, for XML text and attributes.
std::string XmlEscape(const std::string& text);

// Tick values on a linear axis covering [lo, hi]: multiples of a 1-2-5 step, inside [lo, hi],
// with the count closest to `target` (ties go to the larger step). Empty when lo > hi or
// either bound is not finite.
std::vector<double> NiceTicks(double lo, double hi, int target);

// Tick values on a log axis covering [lo, hi] (both > 0): powers of ten inside the range
// (every k-th decade when there are too many); with fewer than three, also 2x and 5x of each
// decade; within a single decade, linear nice ticks.
std::vector<double> LogTicks(double lo, double hi);

// Compact tick label: "0", "500", "1k", "1.5k", "2M", "0.25", "1e-3". `step` is the spacing of
// neighbouring ticks and decides the number of decimals.
std::string FormatTick(double value, double step);

}  // namespace tae::plot
