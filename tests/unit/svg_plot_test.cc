#include "common/plot/svg_plot.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <limits>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/plot/frontier_svg.h"
#include "common/plot/scale_svg.h"
#include "common/plot/svg_parts.h"

namespace tae::plot {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Series Line(std::string name, std::vector<double> x, std::vector<double> mean) {
  Series s;
  s.name = std::move(name);
  s.x = std::move(x);
  s.mean = std::move(mean);
  s.lo = s.mean;
  s.hi = s.mean;
  return s;
}

Series Banded(std::string name, std::vector<double> x, std::vector<double> mean) {
  Series s = Line(std::move(name), std::move(x), std::move(mean));
  for (std::size_t i = 0; i < s.mean.size(); ++i) {
    s.lo[i] -= 0.1;
    s.hi[i] += 0.1;
  }
  return s;
}

std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

// Empty when every tag we emit is closed in order and no stray '<' or '&' appears in text;
// otherwise a description of the first problem.
std::string XmlProblem(const std::string& svg) {
  std::vector<std::string> open;
  std::size_t i = 0;
  if (svg.rfind("<?xml", 0) == 0) {
    i = svg.find("?>") + 2;
  }
  const std::regex entity("^&(amp|lt|gt|quot|apos);");
  while (i < svg.size()) {
    if (svg[i] == '&') {
      if (!std::regex_search(svg.substr(i, 8), entity)) {
        return "bare & at " + std::to_string(i);
      }
      ++i;
      continue;
    }
    if (svg[i] != '<') {
      ++i;
      continue;
    }
    const std::size_t end = svg.find('>', i);
    if (end == std::string::npos) {
      return "unterminated tag at " + std::to_string(i);
    }
    const std::string tag = svg.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) {
      return "'<' inside tag at " + std::to_string(i);
    }
    if (Count(tag, "\"") % 2 != 0) {
      return "unbalanced quotes in <" + tag + ">";
    }
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        return "unexpected </" + tag.substr(1) + ">";
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    i = end + 1;
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

// The d attributes of elements with the given class, in document order.
std::vector<std::string> PathData(const std::string& svg, const std::string& cls) {
  std::vector<std::string> out;
  const std::regex path("<path class=\"" + cls + "\"[^>]* d=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

double Attribute(const std::string& svg, const std::string& element, const std::string& name) {
  std::smatch match;
  const std::regex pattern(element + "[^>]* " + name + "=\"([-0-9.]+)\"");
  REQUIRE(std::regex_search(svg, match, pattern));
  return std::stod(match[1]);
}

struct Point {
  double x;
  double y;
};

// Subpaths of an "M x,y L x,y ..." path.
std::vector<std::vector<Point>> Subpaths(const std::string& d) {
  std::vector<std::vector<Point>> out;
  const std::regex command("([ML])([-0-9.]+),([-0-9.]+)");
  for (auto it = std::sregex_iterator(d.begin(), d.end(), command); it != std::sregex_iterator();
       ++it) {
    if ((*it)[1] == "M") {
      out.emplace_back();
    }
    out.back().push_back({std::stod((*it)[2]), std::stod((*it)[3])});
  }
  return out;
}

std::vector<std::string> TickLabels(const std::string& svg) {
  std::vector<std::string> out;
  const std::size_t begin = svg.find("<g class=\"tick-labels\"");
  const std::string group = svg.substr(begin, svg.find("</g>", begin) - begin);
  const std::regex text(">([^<]*)</text>");
  for (auto it = std::sregex_iterator(group.begin(), group.end(), text);
       it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

const std::vector<double> kSteps = {0, 500, 1000, 1500, 2000};

TEST_CASE("NiceTicks picks 1-2-5 steps near the target count", "[plot]") {
  CHECK(NiceTicks(0.1, 2.3, 5) == std::vector<double>{0.5, 1, 1.5, 2});
  CHECK(NiceTicks(0, 2000, 7) == std::vector<double>{0, 500, 1000, 1500, 2000});
  CHECK(NiceTicks(0, 1, 5) == std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1});
  CHECK(NiceTicks(-3, 7, 5) == std::vector<double>{-2, 0, 2, 4, 6});
  CHECK(NiceTicks(0.0012, 0.0031, 4) == std::vector<double>{0.0015, 0.002, 0.0025, 0.003});
  CHECK(NiceTicks(3, 3, 5) == std::vector<double>{3});
  CHECK(NiceTicks(2, 1, 5).empty());
  CHECK(NiceTicks(0, kNaN, 5).empty());
}

TEST_CASE("LogTicks puts ticks at powers of ten", "[plot]") {
  CHECK(LogTicks(0.05, 20) == std::vector<double>{0.1, 1, 10});
  CHECK(LogTicks(1e-3, 1e3) == std::vector<double>{1e-3, 1e-2, 0.1, 1, 10, 100, 1000});
  // Fewer than three decades: 1-2-5 within them.
  CHECK(LogTicks(0.09, 3) == std::vector<double>{0.1, 0.2, 0.5, 1, 2});
  // Many decades: every third one, at most eight ticks.
  CHECK(LogTicks(1e-10, 1e6) == std::vector<double>{1e-9, 1e-6, 1e-3, 1, 1e3, 1e6});
  CHECK(LogTicks(0, 10).empty());
}

TEST_CASE("FormatTick labels compactly", "[plot]") {
  CHECK(FormatTick(0, 500) == "0");
  CHECK(FormatTick(500, 500) == "500");
  CHECK(FormatTick(1000, 500) == "1k");
  CHECK(FormatTick(1500, 500) == "1.5k");
  CHECK(FormatTick(2500000, 500000) == "2.5M");
  CHECK(FormatTick(0.25, 0.25) == "0.25");
  CHECK(FormatTick(0.5, 0.25) == "0.5");
  CHECK(FormatTick(1e-3, 1e-3) == "1e-3");
  CHECK(FormatTick(2.5e-4, 5e-5) == "2.5e-4");
  CHECK(FormatTick(-1.5, 0.5) == "-1.5");
  CHECK(FormatTick(0.6000000000000001, 0.2) == "0.6");
  CHECK(FormatTick(1e-17, 0.2) == "0");
}

TEST_CASE("RenderSvg emits a well-formed standalone document", "[plot]") {
  PlotOptions options;
  options.title = "eval/loss <tiny> & \"friends\"";
  options.y_label = "eval/loss";
  const std::string svg = RenderSvg({Banded("d=2 <b>&\"x\"", kSteps, {2.8, 1.5, 0.9, 0.5, 0.3}),
                                     Line("base", kSteps, {2, 2, 2, 2, 2})},
                                    options);
  CHECK(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0) == 0);
  CHECK(svg.find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(XmlProblem(svg) == "");
  CHECK(svg.find("d=2 &lt;b&gt;&amp;&quot;x&quot;") != std::string::npos);
  CHECK(svg.find("eval/loss &lt;tiny&gt; &amp; &quot;friends&quot;") != std::string::npos);
  CHECK(svg.find("<b>") == std::string::npos);
}

TEST_CASE("XmlProblem notices broken markup", "[plot]") {
  CHECK(XmlProblem("<svg><g></svg>") != "");
  CHECK(XmlProblem("<svg><text>a < b</text></svg>") != "");
  CHECK(XmlProblem("<svg><text>a & b</text></svg>") != "");
  CHECK(XmlProblem("<svg><g><line/></g></svg>") == "");
}

TEST_CASE("RenderSvg draws one line per series and one band per multi-seed series", "[plot]") {
  const std::string svg = RenderSvg(
      {Banded("alpha", kSteps, {2.8, 1.5, 0.9, 0.5, 0.3}), Line("beta", kSteps, {2, 2, 2, 2, 2}),
       Banded("gamma", kSteps, {2.5, 1.9, 1.2, 1, 0.9})},
      PlotOptions{});
  CHECK(PathData(svg, "line").size() == 3);
  CHECK(PathData(svg, "band").size() == 2);
  const std::size_t legend = svg.find("<g class=\"legend\"");
  REQUIRE(legend != std::string::npos);
  for (const char* name : {"alpha", "beta", "gamma"}) {
    CHECK(svg.find(std::string(">") + name + "</text>", legend) != std::string::npos);
  }
  CHECK(Count(svg, "class=\"legend-entry\"") == 3);
  // Distinct colours from the palette.
  CHECK(svg.find("stroke=\"#0072B2\"") != std::string::npos);
  CHECK(svg.find("stroke=\"#D55E00\"") != std::string::npos);
  CHECK(svg.find("stroke=\"#009E73\"") != std::string::npos);
}

TEST_CASE("RenderSvg adds dash patterns once the palette is used up", "[plot]") {
  std::vector<Series> many;
  for (int i = 0; i < 9; ++i) {
    many.push_back(Line("v" + std::to_string(i), kSteps, {1, 2, 3, 4, 5.0 + i}));
  }
  const std::string svg = RenderSvg(many, PlotOptions{});
  CHECK(PathData(svg, "line").size() == 9);
  CHECK(Count(svg, "<path class=\"line\" stroke=\"#0072B2\"") == 2);
  CHECK(Count(svg, "<path class=\"line\" stroke=\"#0072B2\" stroke-dasharray=") == 1);
}

TEST_CASE("RenderSvg maps the data range onto the plot area", "[plot]") {
  const std::string svg = RenderSvg({Line("a", kSteps, {1, 2, 3, 4, 5})}, PlotOptions{});
  const double left = Attribute(svg, "<rect class=\"plot-area\"", "x");
  const double top = Attribute(svg, "<rect class=\"plot-area\"", "y");
  const double width = Attribute(svg, "<rect class=\"plot-area\"", "width");
  const double height = Attribute(svg, "<rect class=\"plot-area\"", "height");
  const auto subpaths = Subpaths(PathData(svg, "line").at(0));
  REQUIRE(subpaths.size() == 1);
  REQUIRE(subpaths[0].size() == 5);
  CHECK(subpaths[0].front().x == Approx(left).margin(0.05));
  CHECK(subpaths[0].back().x == Approx(left + width).margin(0.05));
  CHECK(subpaths[0][2].x == Approx(left + width / 2).margin(0.05));
  // y grows downwards and stays inside the plot area.
  CHECK(subpaths[0].back().y < subpaths[0].front().y);
  CHECK(subpaths[0].back().y >= top);
  CHECK(subpaths[0].front().y <= top + height);
}

TEST_CASE("RenderSvg labels the axes with nice ticks", "[plot]") {
  const std::string svg = RenderSvg({Line("a", {0, 1000, 2000}, {0.0, 1.0, 2.0})}, PlotOptions{});
  const std::vector<std::string> labels = TickLabels(svg);
  CHECK(labels ==
        std::vector<std::string>{"0", "500", "1k", "1.5k", "2k", "0", "0.5", "1", "1.5", "2"});
  CHECK(svg.find(">step</text>") != std::string::npos);
}

TEST_CASE("RenderSvg with log_y ticks at powers of ten", "[plot]") {
  PlotOptions options;
  options.log_y = true;
  const std::string svg = RenderSvg({Line("ppl", {0, 1000, 2000}, {1000.0, 30.0, 0.5})}, options);
  CHECK(TickLabels(svg) ==
        std::vector<std::string>{"0", "500", "1k", "1.5k", "2k", "1", "10", "100", "1k"});
  CHECK(svg.find("class=\"subtitle\"") == std::string::npos);
  // Equal ratios are equal distances.
  const auto points = Subpaths(PathData(svg, "line").at(0)).at(0);
  const double upper = points[1].y - points[0].y;
  const double lower = points[2].y - points[1].y;
  CHECK(upper / lower == Approx(std::log10(1000 / 30.0) / std::log10(30 / 0.5)).epsilon(0.01));
}

TEST_CASE("RenderSvg falls back to linear when log_y meets values <= 0", "[plot]") {
  PlotOptions options;
  options.log_y = true;
  const std::string svg = RenderSvg({Line("a", {0, 1, 2}, {-1.0, 0.0, 1.0})}, options);
  CHECK(svg.find("class=\"subtitle\"") != std::string::npos);
  CHECK(svg.find("linear y axis") != std::string::npos);
  // Negative tick labels use the minus sign, not a hyphen.
  CHECK(svg.find(">\xE2\x88\x92"
                 "1</text>") != std::string::npos);
  CHECK(XmlProblem(svg) == "");
}

TEST_CASE("RenderSvg breaks a line at NaN and inf", "[plot]") {
  Series s = Banded("a", {0, 1, 2, 3, 4, 5}, {5, 4, kNaN, 3, 2, 1});
  s.mean[4] = std::numeric_limits<double>::infinity();
  const std::string svg = RenderSvg({s}, PlotOptions{});
  const auto subpaths = Subpaths(PathData(svg, "line").at(0));
  REQUIRE(subpaths.size() == 3);
  CHECK(subpaths[0].size() == 2);
  CHECK(subpaths[1].size() == 1);
  CHECK(subpaths[2].size() == 1);
  // A lone point is drawn as a dot (zero-length segment with round caps).
  CHECK(Count(PathData(svg, "line").at(0), "h0") == 2);
  CHECK(Count(PathData(svg, "band").at(0), "M") == 3);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);
}

TEST_CASE("RenderSvg says no data for nothing to plot", "[plot]") {
  PlotOptions options;
  options.title = "empty";
  for (const std::vector<Series>& input :
       {std::vector<Series>{}, std::vector<Series>{Series{"a", {}, {}, {}, {}}},
        std::vector<Series>{Line("nan", {1, 2}, {kNaN, kNaN})}}) {
    const std::string svg = RenderSvg(input, options);
    CHECK(svg.find("no data") != std::string::npos);
    CHECK(svg.find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
    CHECK(XmlProblem(svg) == "");
    CHECK(PathData(svg, "line").empty());
  }
}

TEST_CASE("RenderSvg is deterministic and compact", "[plot]") {
  std::vector<double> x;
  std::vector<double> y;
  for (int i = 0; i <= 200; ++i) {
    x.push_back(i * 10);
    y.push_back(2.8 * std::exp(-i / 50.0) + 0.1);
  }
  const std::vector<Series> input = {Banded("a", x, y), Line("b", x, y)};
  PlotOptions options;
  options.title = "t";
  const std::string first = RenderSvg(input, options);
  CHECK(RenderSvg(input, options) == first);
  // Coordinates carry at most one decimal.
  CHECK_FALSE(std::regex_search(first, std::regex("[0-9]\\.[0-9]{2}[,LMHVZ\" ]")));
}

FrontierFigure SmallFrontier() {
  FrontierFigure figure;
  figure.title = "sizes (e3): eval/acc against params";
  figure.x_label = "params (lower is cheaper)";
  figure.y_label = "eval/acc (mean ± 95% CI)";
  figure.bar_label = "eval/acc >= 0.99";
  figure.bar = 0.99;
  figure.verdict = "cheapest that clears eval/acc >= 0.99: w4<&>";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  figure.marks = {{"w1", 1000, 0.9, 0.897, 0.903, true, false, false},
                  {"w2", 2000, 0.992, 0.982, 1.002, true, false, false},
                  {"w4<&>", 4000, 0.995, 0.9925, 0.9975, true, true, true},
                  {"w8", 8000, 0.998, 0.9968, 0.9992, true, true, false},
                  {"one-seed", 8000, 0.95, nan, nan, false, false, false},
                  {"nocost", nan, 0.999, 0.9988, 0.9992, false, true, false}};
  return figure;
}

TEST_CASE("RenderFrontierSvg draws every variant the bar and the front in a well-formed document",
          "[plot][frontier]") {
  const std::string svg = RenderFrontierSvg(SmallFrontier());
  CHECK(XmlProblem(svg).empty());
  CHECK(svg.rfind("<?xml", 0) == 0);
  for (const char* name : {"w1", "w2", "w4&lt;&amp;&gt;", "w8", "one-seed"}) {
    CHECK(svg.find(std::string("<title>") + name + "</title>") != std::string::npos);
  }
  CHECK(svg.find("class=\"bar\"") != std::string::npos);
  CHECK(svg.find("eval/acc &gt;= 0.99") != std::string::npos);
  CHECK(svg.find("class=\"front\"") != std::string::npos);
  CHECK(svg.find("class=\"variant on-front clears cheapest\"") != std::string::npos);
  CHECK(svg.find("not drawn (cost or value unknown): nocost") != std::string::npos);
  CHECK(svg == RenderFrontierSvg(SmallFrontier()));  // deterministic
}

TEST_CASE("RenderFrontierSvg without a known cost says so", "[plot][frontier]") {
  FrontierFigure figure = SmallFrontier();
  for (FrontierMark& m : figure.marks) {
    m.cost = std::numeric_limits<double>::quiet_NaN();
  }
  const std::string svg = RenderFrontierSvg(figure);
  CHECK(XmlProblem(svg).empty());
  CHECK(svg.find("no variant with a known cost") != std::string::npos);
}

// A ladder whose means lie on the law: the baseline (m = 1) and an ablation worth 2x its size.
ScaleFigure LawLadder() {
  ScaleFigure figure;
  figure.title = "ladder (e5): eval/loss against N";
  figure.subtitle = "alpha = 0.3";
  figure.x_label = "N (parameters)";
  figure.y_label = "eval/loss";
  figure.E = 1.5;
  figure.A = 40;
  figure.alpha = 0.3;
  for (double m : {1.0, 2.0}) {
    ScaleLine& line = figure.lines.emplace_back();
    line.name = m == 1 ? "baseline" : "wide<&>";
    line.detail = m == 1 ? "baseline (m = 1)" : "m = 2 [1.8, 2.2], trend none";
    line.multiplier = m;
    for (double n : {1e4, 4e4, 1.6e5, 6.4e5}) {
      const double v = ScaleLaw(figure, m, n);
      line.marks.push_back({n, v, v - 0.02, v + 0.02});
    }
  }
  return figure;
}

std::vector<std::pair<double, double>> PathPoints(const std::string& d) {
  std::vector<std::pair<double, double>> points;
  const std::regex point("[ML](-?[0-9.]+),(-?[0-9.]+)");
  for (auto it = std::sregex_iterator(d.begin(), d.end(), point); it != std::sregex_iterator();
       ++it) {
    points.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  }
  return points;
}

TEST_CASE("RenderScaleSvg draws each variant's rungs on its fitted law", "[plot][scale]") {
  const std::string svg = RenderScaleSvg(LawLadder());
  CHECK(XmlProblem(svg).empty());
  CHECK(svg == RenderScaleSvg(LawLadder()));  // deterministic
  CHECK(svg.find("<title>wide&lt;&amp;&gt;</title>") != std::string::npos);
  CHECK(svg.find("m = 2 [1.8, 2.2], trend none") != std::string::npos);
  CHECK(Count(svg, "class=\"band\"") == 2);
  CHECK(Count(svg, "class=\"ci\"") == 8);
  CHECK(Count(svg, "class=\"mean\"") == 8);
  // Every mark lies on its own variant's curve: the circle, less its dodge, within 1.5 px of
  // the polyline (the law is smooth on log-log axes, 96 samples over the ladder).
  const std::regex fit("class=\"fit\" d=\"([^\"]+)\"");
  const std::regex circle("cx=\"(-?[0-9.]+)\" cy=\"(-?[0-9.]+)\"");
  std::vector<std::string> groups;
  for (std::size_t at = svg.find("<g class=\"variant\">"); at != std::string::npos;
       at = svg.find("<g class=\"variant\">", at + 1)) {
    groups.push_back(svg.substr(at, svg.find("</g>", at) - at));
  }
  REQUIRE(groups.size() == 2);
  for (std::size_t k = 0; k < groups.size(); ++k) {
    std::smatch m;
    REQUIRE(std::regex_search(groups[k], m, fit));
    const auto curve = PathPoints(m[1]);
    REQUIRE(curve.size() > 50);
    for (std::size_t i = 1; i < curve.size(); ++i) {
      CHECK(curve[i].first > curve[i - 1].first);
      CHECK(curve[i].second >= curve[i - 1].second);  // the loss falls: lower on the page
    }
    const double dodge = k == 0 ? -2 : 2;
    int marks = 0;
    for (auto it = std::sregex_iterator(groups[k].begin(), groups[k].end(), circle);
         it != std::sregex_iterator(); ++it, ++marks) {
      const double cx = std::stod((*it)[1]) - dodge;
      const double cy = std::stod((*it)[2]);
      double best = 1e9;
      for (std::size_t i = 1; i < curve.size(); ++i) {
        if (curve[i - 1].first <= cx && cx <= curve[i].first) {
          const double t = (cx - curve[i - 1].first) / (curve[i].first - curve[i - 1].first);
          best = std::fabs(curve[i - 1].second + t * (curve[i].second - curve[i - 1].second) - cy);
        }
      }
      CHECK(best < 1.5);
    }
    CHECK(marks == 4);
  }
}

TEST_CASE("RenderScaleSvg marks the size it extrapolates to and notes the warnings",
          "[plot][scale]") {
  ScaleFigure figure = LawLadder();
  figure.at = 1e7;
  figure.notes = {"warning: fewer than 4 rungs"};
  const std::string svg = RenderScaleSvg(figure);
  CHECK(XmlProblem(svg).empty());
  CHECK(svg.find("class=\"at\"") != std::string::npos);
  CHECK(svg.find("N = 10M") != std::string::npos);
  CHECK(svg.find("warning: fewer than 4 rungs") != std::string::npos);
  // The x axis reaches 1e7: a tick label of 10M is drawn.
  CHECK(svg.find(">10M</text>") != std::string::npos);
}

TEST_CASE("long notes and legend details are wrapped to the figure, no word lost",
          "[plot][scale]") {
  const std::vector<std::string> lines =
      WrapWords("E is fitted at 0, its floor: α and the multipliers are those of L", 20);
  for (const std::string& line : lines) {
    CHECK(line.size() <= 21);  // "α" is two bytes, one column
  }
  CHECK(absl::StrJoin(lines, " ") ==
        "E is fitted at 0, its floor: α and the multipliers are those of L");
  CHECK(WrapWords("", 10) == std::vector<std::string>{""});
  CHECK(WrapWords("averyveryverylongword x", 5) ==
        std::vector<std::string>{"averyveryverylongword", "x"});
  ScaleFigure figure = LawLadder();
  figure.notes = {"warning: " + std::string(60, 'a') + " " + std::string(60, 'b') + " " +
                  std::string(60, 'c') + " " + std::string(60, 'd') + " " + std::string(60, 'e')};
  figure.lines[1].detail = "m = 0.429 [0.388, 0.479], trend reverses near N ≈ 62.3K";
  const std::string svg = RenderScaleSvg(figure);
  CHECK(XmlProblem(svg).empty());
  CHECK(Count(svg, "class=\"note\"") >= 2);
  CHECK(svg.find("reverses near N ≈ 62.3K") != std::string::npos);
  CHECK(Count(svg, "<tspan") >= 3);
}

// A trend model's curve: the multiplier drifts with N, and ScaleLaw follows it.
TEST_CASE("ScaleLaw with a slope drifts the multiplier about log_size_ref", "[plot][scale]") {
  ScaleFigure figure = LawLadder();
  figure.log_size_ref = std::log(1e5);
  CHECK(ScaleLaw(figure, 2.0, 1e5, 0.5) == Approx(ScaleLaw(figure, 2.0, 1e5)));
  // At 10x the reference, m = 2 * 10^0.5.
  CHECK(ScaleLaw(figure, 2.0, 1e6, 0.5) == Approx(ScaleLaw(figure, 2.0 * std::sqrt(10.0), 1e6)));
  CHECK(ScaleLaw(figure, 2.0, 1e4, -0.5) == Approx(ScaleLaw(figure, 2.0 * std::sqrt(10.0), 1e4)));
}

TEST_CASE("RenderScaleSvg without a fit draws the marks alone, and without marks says so",
          "[plot][scale]") {
  ScaleFigure figure = LawLadder();
  figure.alpha = kNaN;
  std::string svg = RenderScaleSvg(figure);
  CHECK(XmlProblem(svg).empty());
  CHECK(Count(svg, "class=\"fit\"") == 0);
  CHECK(Count(svg, "class=\"mean\"") == 8);
  // A value that is not positive: the y axis is linear, nothing is lost.
  figure.lines[0].marks[0].mean = -0.5;
  svg = RenderScaleSvg(figure);
  CHECK(XmlProblem(svg).empty());
  CHECK(Count(svg, "class=\"mean\"") == 8);
  for (ScaleLine& line : figure.lines) {
    for (ScaleMark& m : line.marks) {
      m.mean = kNaN;
    }
  }
  svg = RenderScaleSvg(figure);
  CHECK(XmlProblem(svg).empty());
  CHECK(svg.find("no rung has a value yet") != std::string::npos);
}

}  // namespace
}  // namespace tae::plot
