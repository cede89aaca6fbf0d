// The flame chart of a trace (taectl profile --svg), with common/plot's SVG helpers and ticks.

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/plot/svg_plot.h"
#include "common/profile/trace.h"

namespace tae::profile {
namespace {

constexpr double kRow = 16;
constexpr double kLeft = 16;
constexpr double kRight = 16;
constexpr double kTop = 56;
constexpr double kAxis = 28;
constexpr double kLaneGap = 22;
constexpr double kCharWidth = 6.2;
constexpr int kMaxDepth = 24;

const char* Fill(const std::string& category) {
  static const std::map<std::string, const char*> kFills = {
      {"matmul", "#e45756"},    {"attention", "#f58518"}, {"elementwise", "#54a24b"},
      {"optimizer", "#4c78a8"}, {"step", "#bab0ac"},      {"other", "#b279a2"}};
  auto it = kFills.find(category);
  return it == kFills.end() ? "#b279a2" : it->second;
}

}  // namespace

std::string RenderFlameSvg(const Trace& trace, const FlameOptions& options) {
  using plot::SvgNumber;
  using plot::XmlEscape;
  const double width = std::max(300, options.width);
  double t0 = 0;
  double t1 = 0;
  bool any = false;
  std::map<int64_t, int> depth_of_lane;  // lanes drawn -> their deepest row
  for (const Range& r : trace.ranges) {
    if (!any || r.start_us < t0) {
      t0 = r.start_us;
    }
    t1 = std::max(t1, r.start_us + r.dur_us);
    any = true;
    if (static_cast<int>(depth_of_lane.size()) < options.max_lanes ||
        depth_of_lane.count(r.lane) > 0) {
      depth_of_lane[r.lane] = std::max(depth_of_lane[r.lane], std::min(r.depth, kMaxDepth));
    }
  }
  const double span = std::max(1.0, t1 - t0);
  const double plot_width = width - kLeft - kRight;
  const auto x_of = [&](double us) { return kLeft + (us - t0) / span * plot_width; };
  std::map<int64_t, double> lane_top;
  double y = kTop + kAxis;
  for (const auto& [lane, depth] : depth_of_lane) {
    lane_top[lane] = y + 14;
    y += 14 + (depth + 1) * kRow + kLaneGap;
  }
  const double height = std::max(140.0, y);
  std::string body;
  int64_t hidden = 0;
  for (const Range& r : trace.ranges) {
    auto lane = lane_top.find(r.lane);
    if (lane == lane_top.end() || r.depth > kMaxDepth) {
      hidden += 1;
      continue;
    }
    const double w = r.dur_us / span * plot_width;
    if (w < 1.0 / 3.0) {
      hidden += 1;
      continue;
    }
    const double x = x_of(r.start_us);
    const double top = lane->second + r.depth * kRow;
    absl::StrAppend(&body, "<g><title>", XmlEscape(r.name),
                    absl::StrFormat(" %.3f ms (self %.3f ms)", r.dur_us / 1e3, r.self_us / 1e3),
                    "</title><rect x=\"", SvgNumber(x), "\" y=\"", SvgNumber(top), "\" width=\"",
                    SvgNumber(std::max(w, 0.4)), "\" height=\"", SvgNumber(kRow - 1), "\" fill=\"",
                    Fill(r.category), "\"/>");
    const size_t fits = static_cast<size_t>((w - 4) / kCharWidth);
    if (fits >= 3) {
      std::string label = r.name.size() > fits ? r.name.substr(0, fits - 1) + "…" : r.name;
      absl::StrAppend(&body, "<text x=\"", SvgNumber(x + 2), "\" y=\"", SvgNumber(top + kRow - 4),
                      "\">", XmlEscape(label), "</text>");
    }
    body += "</g>\n";
  }
  std::string out = absl::StrCat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", SvgNumber(width), "\" height=\"",
      SvgNumber(height), "\" viewBox=\"0 0 ", SvgNumber(width), " ", SvgNumber(height),
      "\" font-family=\"sans-serif\" font-size=\"11\">\n",
      "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n", "<text x=\"", SvgNumber(kLeft),
      "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", XmlEscape(options.title), "</text>\n");
  absl::StrAppend(&out, "<text x=\"", SvgNumber(kLeft), "\" y=\"40\" fill=\"#555\">",
                  absl::StrFormat("%d ranges over %.2f ms", trace.ranges.size(), span / 1e3),
                  hidden > 0 ? absl::StrCat(", ", hidden, " too narrow or deep to draw") : "",
                  "; colours: ");
  std::string legend;
  for (const char* category :
       {"matmul", "attention", "elementwise", "optimizer", "other", "step"}) {
    absl::StrAppend(&legend, "<tspan fill=\"", Fill(category), "\">■ ", category, "</tspan> ");
  }
  absl::StrAppend(&out, legend, "</text>\n");
  if (!any) {
    absl::StrAppend(&out, "<text x=\"", SvgNumber(width / 2), "\" y=\"", SvgNumber(height / 2),
                    "\" text-anchor=\"middle\">no ranges in this trace</text>\n</svg>\n");
    return out;
  }
  // The time axis, in ms from the first range.
  const std::vector<double> ticks = plot::NiceTicks(0, span / 1e3, 8);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : span / 1e3;
  const double axis_y = kTop + 14;
  absl::StrAppend(&out, "<g stroke=\"#999\">");
  for (double tick : ticks) {
    const double x = x_of(t0 + tick * 1e3);
    absl::StrAppend(&out, "<line x1=\"", SvgNumber(x), "\" y1=\"", SvgNumber(axis_y), "\" x2=\"",
                    SvgNumber(x), "\" y2=\"", SvgNumber(height - 4), "\" stroke-opacity=\"0.3\"/>");
  }
  absl::StrAppend(&out, "</g>\n<g fill=\"#333\" text-anchor=\"middle\">");
  for (double tick : ticks) {
    absl::StrAppend(&out, "<text x=\"", SvgNumber(x_of(t0 + tick * 1e3)), "\" y=\"",
                    SvgNumber(axis_y - 2), "\">", XmlEscape(plot::FormatTick(tick, step)),
                    tick == ticks.back() ? " ms" : "", "</text>");
  }
  absl::StrAppend(&out, "</g>\n");
  for (const auto& [lane, top] : lane_top) {
    absl::StrAppend(&out, "<text x=\"", SvgNumber(kLeft), "\" y=\"", SvgNumber(top - 3),
                    "\" fill=\"#555\">thread ", XmlEscape(trace.lanes[static_cast<size_t>(lane)]),
                    "</text>\n");
  }
  absl::StrAppend(&out, "<g fill=\"#111\">\n", body, "</g>\n</svg>\n");
  return out;
}

}  // namespace tae::profile
