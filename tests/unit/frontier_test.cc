// The cost frontier (server/report/frontier.h): the Pareto front of cost against a metric and the
// cheapest variant whose whole 95% CI clears a bar, on fronts computed by hand.
#include "server/report/frontier.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

namespace tae::report {
namespace {

Row MakeRow(const std::string& variant, double params, const std::string& metric, int n,
            double mean, double ci95) {
  Row row;
  row.variant = variant;
  row.params = params;
  row.flops_per_token = params;
  row.tokens_per_s = params;
  Cell cell;
  cell.metric = metric;
  cell.n = n;
  cell.mean = mean;
  cell.ci95 = ci95;
  row.cells.push_back(cell);
  return row;
}

Bar MustParse(const std::string& text) {
  absl::StatusOr<Bar> bar = ParseBar(text);
  REQUIRE(bar.ok());
  return *bar;
}

std::vector<std::string> Order(const Frontier& f) {
  std::vector<std::string> out;
  for (const FrontierPoint& p : f.points) {
    out.push_back(p.variant);
  }
  return out;
}

std::vector<std::string> Front(const Frontier& f) {
  std::vector<std::string> out;
  for (const FrontierPoint& p : f.points) {
    if (p.on_front) {
      out.push_back(p.variant);
    }
  }
  return out;
}

const FrontierPoint& Point(const Frontier& f, const std::string& variant) {
  for (const FrontierPoint& p : f.points) {
    if (p.variant == variant) {
      return p;
    }
  }
  FAIL("no point " << variant);
  return f.points.front();
}

std::string Cheapest(const Frontier& f) {
  return f.cheapest ? f.points[*f.cheapest].variant : "none";
}

// eval/acc (maximize) against params, bar eval/acc >= 0.99. By hand, cheapest first:
//   b   500  0.992 ± 0.004  [0.988, 0.996]  mean only   front (best at 500)
//   c   500  0.980 ± 0.002                  no          b is as cheap and better
//   a  1000  0.995 ± 0.003  [0.992, 0.998]  clears      front  <- the cheapest that clears
//   h  1500  0.970 ± 0.010                  no          a is cheaper and better
//   d  2000  0.999 ± 0.0005                 clears      front
//   e  2000  0.999 ± 0.0005                 clears      front (ties d exactly: neither dominates)
//   g  3000  0.9995, one seed (no CI)       no_ci       front (the best mean)
//   f     ?  1.0 ± 0                        clears      cost unknown: neither front nor choice
std::vector<Row> AccRows() {
  return {MakeRow("a", 1000, "eval/acc", 3, 0.995, 0.003),
          MakeRow("b", 500, "eval/acc", 3, 0.992, 0.004),
          MakeRow("c", 500, "eval/acc", 3, 0.980, 0.002),
          MakeRow("d", 2000, "eval/acc", 3, 0.999, 0.0005),
          MakeRow("e", 2000, "eval/acc", 3, 0.999, 0.0005),
          MakeRow("f", kNaN, "eval/acc", 3, 1.0, 0.0),
          MakeRow("g", 3000, "eval/acc", 1, 0.9995, kNaN),
          MakeRow("h", 1500, "eval/acc", 3, 0.970, 0.010)};
}

TEST_CASE("the front and the cheapest variant whose CI clears a maximize bar", "[frontier]") {
  const Frontier f = BuildFrontier(AccRows(), MustParse("eval/acc>=0.99"), CostAxis::kParams,
                                   /*maximize=*/true);
  CHECK(Order(f) == std::vector<std::string>{"b", "c", "a", "h", "d", "e", "g", "f"});
  CHECK(Front(f) == std::vector<std::string>{"b", "a", "d", "e", "g"});
  // From the most expensive down: g (one seed) is left out, e and d clear, h does not: the
  // sequence stops there, so a, cheaper and clearing, is not tested (the price of naming a
  // variant that does not clear at most 2.5% of the time whatever the number of variants).
  CHECK(Cheapest(f) == "d");
  CHECK_FALSE(Point(f, "g").reached);
  CHECK(Point(f, "e").reached);
  CHECK(Point(f, "h").reached);
  CHECK_FALSE(Point(f, "a").reached);
  CHECK(Point(f, "b").clears == Clears::kMeanOnly);  // its mean clears, its CI does not
  CHECK(Point(f, "b").lo == Approx(0.988));
  CHECK(Point(f, "c").clears == Clears::kNo);
  CHECK(Point(f, "a").clears == Clears::kYes);
  CHECK(Point(f, "g").clears == Clears::kNoCi);
  CHECK(Point(f, "f").clears == Clears::kYes);
  CHECK(std::isnan(Point(f, "f").cost));
  CHECK_FALSE(Point(f, "f").on_front);
}

TEST_CASE("a strict bar that a CI bound only touches is not cleared", "[frontier]") {
  // Binary-exact bounds: k's CI is [0.5, 1.0] for eval/acc and [0.125, 0.375] for eval/loss.
  const std::vector<Row> acc = {MakeRow("k", 10, "eval/acc", 3, 0.75, 0.25)};
  CHECK(BuildFrontier(acc, MustParse("eval/acc>=0.5"), CostAxis::kParams, true).points[0].clears ==
        Clears::kYes);
  CHECK(BuildFrontier(acc, MustParse("eval/acc>0.5"), CostAxis::kParams, true).points[0].clears ==
        Clears::kMeanOnly);
  const std::vector<Row> loss = {MakeRow("k", 10, "eval/loss", 3, 0.25, 0.125)};
  CHECK(BuildFrontier(loss, MustParse("eval/loss<=0.375"), CostAxis::kParams, false)
            .points[0]
            .clears == Clears::kYes);
  CHECK(BuildFrontier(loss, MustParse("eval/loss<0.375"), CostAxis::kParams, false)
            .points[0]
            .clears == Clears::kMeanOnly);
}

TEST_CASE("none clears a bar above every CI", "[frontier]") {
  const Frontier f =
      BuildFrontier(AccRows(), MustParse("eval/acc>0.9999"), CostAxis::kParams, true);
  CHECK_FALSE(f.cheapest.has_value());
  CHECK(Front(f) == std::vector<std::string>{"b", "a", "d", "e", "g"});  // the bar does not move it
  CHECK(Point(f, "d").clears == Clears::kNo);
  CHECK(Point(f, "f").clears == Clears::kYes);  // it clears, but its cost is unknown
}

TEST_CASE("equal costs that both clear go to the better mean", "[frontier]") {
  const std::vector<Row> rows = {MakeRow("x", 100, "eval/acc", 3, 0.995, 0.001),
                                 MakeRow("y", 100, "eval/acc", 3, 0.998, 0.001),
                                 MakeRow("z", 100, "eval/acc", 3, 0.998, 0.001)};
  const Frontier f = BuildFrontier(rows, MustParse("eval/acc>=0.99"), CostAxis::kParams, true);
  CHECK(Front(f) == std::vector<std::string>{"y", "z"});
  CHECK(Cheapest(f) == "y");  // y and z tie on cost and mean: the first in the rows' order
}

// eval/loss (minimize) against flops, bars on the upper bound. By hand:
//   p  10  0.12 ± 0.01                  front
//   q  20  0.08 ± 0.03  [0.05, 0.11]    front
//   r  30  0.05 ± 0.01  [0.04, 0.06]    front
//   s  40  0.06 ± 0.001 [0.059, 0.061]  r is cheaper and better
std::vector<Row> LossRows() {
  return {
      MakeRow("s", 40, "eval/loss", 4, 0.06, 0.001), MakeRow("r", 30, "eval/loss", 4, 0.05, 0.01),
      MakeRow("q", 20, "eval/loss", 4, 0.08, 0.03), MakeRow("p", 10, "eval/loss", 4, 0.12, 0.01)};
}

TEST_CASE("the front and the cheapest clearing variant of a minimize metric", "[frontier]") {
  const Frontier le = BuildFrontier(LossRows(), MustParse("eval/loss<=0.1"), CostAxis::kFlops,
                                    /*maximize=*/false);
  CHECK(Order(le) == std::vector<std::string>{"p", "q", "r", "s"});
  CHECK(Front(le) == std::vector<std::string>{"p", "q", "r"});
  CHECK(Point(le, "q").clears == Clears::kMeanOnly);  // 0.08 clears, 0.11 does not
  CHECK(Cheapest(le) == "r");
  // A bar between r's upper bound (0.06) and s's: s's mean passes, its CI does not.
  const Frontier lt =
      BuildFrontier(LossRows(), MustParse("eval/loss<0.0605"), CostAxis::kFlops, false);
  CHECK(Point(lt, "r").clears == Clears::kYes);
  CHECK(Point(lt, "s").clears == Clears::kMeanOnly);
  CHECK(Cheapest(BuildFrontier(LossRows(), MustParse("eval/loss<0.05"), CostAxis::kFlops, false)) ==
        "none");
}

TEST_CASE("tokens per second is cheaper when higher", "[frontier]") {
  const std::vector<Row> rows = {MakeRow("slow", 1000, "eval/acc", 3, 0.995, 0.001),
                                 MakeRow("fast", 2000, "eval/acc", 3, 0.993, 0.001),
                                 MakeRow("fastest", 4000, "eval/acc", 3, 0.98, 0.001)};
  const Frontier f = BuildFrontier(rows, MustParse("eval/acc>=0.99"), CostAxis::kTokensPerS, true);
  CHECK(Order(f) == std::vector<std::string>{"fastest", "fast", "slow"});
  CHECK(Front(f) == std::vector<std::string>{"fastest", "fast", "slow"});
  CHECK(Cheapest(f) == "fast");
  CHECK_FALSE(LowerIsCheaper(CostAxis::kTokensPerS));
}

TEST_CASE("a row without the metric has no value and stays off the front", "[frontier]") {
  std::vector<Row> rows = {MakeRow("a", 10, "eval/acc", 3, 0.995, 0.001),
                           MakeRow("b", 5, "eval/loss", 3, 0.1, 0.01)};
  const Frontier f = BuildFrontier(rows, MustParse("eval/acc>=0.99"), CostAxis::kParams, true);
  CHECK(Point(f, "b").clears == Clears::kNoValue);
  CHECK(Front(f) == std::vector<std::string>{"a"});
  CHECK(Cheapest(f) == "a");
}

TEST_CASE("bar expressions parse with every operator and spaces", "[frontier]") {
  const Bar ge = MustParse(" eval/acc >= 0.99 ");
  CHECK(ge.metric == "eval/acc");
  CHECK(ge.op == BarOp::kGe);
  CHECK(ge.value == 0.99);
  CHECK(MustParse("eval/acc>0.5").op == BarOp::kGt);
  CHECK(MustParse("eval/loss<=1e-2").op == BarOp::kLe);
  CHECK(MustParse("eval/loss<1e-2").value == 0.01);
  CHECK(MustParse("delta<-3").value == -3);
  CHECK(BarText(MustParse("eval/acc>=0.99")) == "eval/acc >= 0.99");
}

TEST_CASE("a bad bar expression says where and why", "[frontier]") {
  absl::StatusOr<Bar> swapped = ParseBar("eval/acc=>0.99");
  REQUIRE_FALSE(swapped.ok());
  const std::string message(swapped.status().message());
  CHECK_THAT(message, Catch::Contains("'eval/acc=>0.99'"));
  CHECK_THAT(message, Catch::Contains("'=>' at column 9 is not an operator"));
  CHECK_THAT(message, Catch::Contains(">=, >, <=, <"));
  CHECK_THAT(std::string(ParseBar("eval/acc==0.9").status().message()),
             Catch::Contains("'==' at column 9"));
  CHECK_THAT(std::string(ParseBar("eval/acc").status().message()), Catch::Contains("no operator"));
  CHECK_THAT(std::string(ParseBar(">=0.9").status().message()), Catch::Contains("no metric"));
  CHECK_THAT(std::string(ParseBar("eval/acc>=high").status().message()),
             Catch::Contains("'high' after '>=' at column 11 is not a finite number"));
  CHECK_FALSE(ParseBar("eval/acc>=nan").ok());
  CHECK_FALSE(ParseBar("eval/acc>=").ok());
  CHECK_FALSE(ParseBar("eval acc>=0.9").ok());
}

TEST_CASE("cost axes parse by name", "[frontier]") {
  CHECK(*ParseCost("") == CostAxis::kParams);
  CHECK(*ParseCost("flops") == CostAxis::kFlops);
  CHECK(*ParseCost("tokens_per_s") == CostAxis::kTokensPerS);
  CHECK_THAT(std::string(ParseCost("dollars").status().message()),
             Catch::Contains("params, flops, tokens_per_s"));
}

}  // namespace
}  // namespace tae::report
