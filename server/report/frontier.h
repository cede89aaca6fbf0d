#pragma once

// The cost frontier (`taectl report --frontier "eval/acc>=0.99" --cost params`): which variants
// are on the Pareto front of cost against a metric, and which is the cheapest variant that clears
// a bar with its whole 95% confidence interval. Pure: report rows in, the frontier out.
//
// The rule, and why:
// - A variant clears the bar when its whole 95% CI (mean ± ci95, report.h) lies on the passing
//   side: the lower bound >= (or >) the bar for ">=" (">"), the upper bound <= (or <) it for
//   "<=" ("<"). A mean that clears with a CI that straddles the bar is "mean only": another set of
//   seeds could well land under the bar. A variant with fewer than two seeds has no CI and never
//   clears.
// - Cost: params and flops (per token) are cheaper when lower; tokens_per_s is "cheaper" when
//   higher (a faster model costs less time per token). A variant whose cost is unknown (its runs
//   report no model/params, e.g. a command job that does not print it) is listed with its cost
//   unknown and takes part in neither the front nor the choice: its cost is never guessed.
// - The front: a variant with a known cost and mean is on it unless another such variant
//   dominates it, being at least as cheap and at least as good on the metric's goal (the
//   experiment's [report] goal, else metrics::LargerIsBetterByDefault) and strictly better on one
//   of the two. Ties: equal cost and equal mean dominate neither way, so both stay on the front;
//   at equal cost only the better means stay.
// - The cheapest that clears: a fixed sequence from the most expensive variant down, stopping at
//   the first that does not clear (Hsu & Berger 1999); the cheapest reached that clears. This
//   bounds the chance of naming a variant that does not clear at 2.5% however many are cheaper; a
//   scan for the cheapest of all that clear does not. A variant with a failed seed, or fewer than
//   two seeds, never clears and is left out of the sequence (it is never claimed, and which are
//   left out does not depend on the metric's values); with optimistic estimates (a tuned view
//   without search.confirm) no variant is named. It need not be on the front.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/report/report.h"

namespace tae::report {

enum class BarOp { kGe, kGt, kLe, kLt };

// "eval/acc>=0.99": the metric, the operator and the value.
struct Bar {
  std::string metric;
  BarOp op = BarOp::kGe;
  double value = 0;
};

// The accepted operators, for errors and help: ">=, >, <=, <".
inline constexpr const char* kBarOperators = ">=, >, <=, <";

// Parses "METRIC OP VALUE" (spaces around OP allowed). Errors name the expression, the column at
// fault and the accepted operators: "--frontier 'eval/acc=>0.99': '=>' at column 9 is not an
// operator; use one of >=, >, <=, < (e.g. eval/acc>=0.99)".
absl::StatusOr<Bar> ParseBar(const std::string& expression);
// ">=", ">", "<=", "<".
std::string OpText(BarOp op);
// "eval/acc >= 0.99".
std::string BarText(const Bar& bar);

enum class CostAxis { kParams, kFlops, kTokensPerS };

// "params", "flops" or "tokens_per_s" ("" is params); else InvalidArgument naming them.
absl::StatusOr<CostAxis> ParseCost(const std::string& name);
std::string CostName(CostAxis cost);  // "params", "flops", "tokens_per_s"
bool LowerIsCheaper(CostAxis cost);   // params, flops: true; tokens_per_s: false
// The row's value of the axis (Row::params, flops_per_token, tokens_per_s); NaN when unknown.
double CostOf(const Row& row, CostAxis cost);

// Where a variant's CI sits against the bar.
enum class Clears {
  kYes,       // the whole CI is on the passing side
  kMeanOnly,  // the mean passes, the CI straddles the bar
  kNo,        // the mean does not pass
  kNoCi,      // the mean passes, but with fewer than two seeds there is no CI
  kNoValue,   // no succeeded run has the metric
  kFailed,    // a seed of the variant failed: its survivors' CI is not a verdict
};
// "yes", "mean_only", "no", "no_ci", "no_value", "failed_seeds".
std::string ClearsName(Clears clears);

struct FrontierPoint {
  std::string variant;  // the row's variant ("no-pos[lr=0.001]" in the tuned view)
  double cost = kNaN;   // NaN: unknown
  int n = 0;            // seeds with a value
  double mean = kNaN;
  double ci95 = kNaN;
  double lo = kNaN;  // mean - ci95 (NaN without a CI)
  double hi = kNaN;
  bool on_front = false;
  Clears clears = Clears::kNoValue;
  // The fixed sequence from the most expensive down reached it (its "clears" is a tested claim);
  // a point past the first that does not clear is not tested, whatever its CI.
  bool reached = false;
};

struct Frontier {
  Bar bar;
  CostAxis cost = CostAxis::kParams;
  bool maximize = true;  // the metric's goal, for the front
  // Every row's point, cheapest first (ties: the rows' order); unknown costs last in the rows'
  // order.
  std::vector<FrontierPoint> points;
  // The index in `points` of the cheapest variant that clears the bar; nullopt: none clears it.
  std::optional<size_t> cheapest;
  // "as run", "confirmed" or "optimistic" (BuildFrontier's `estimates`): with optimistic
  // estimates no variant is named (cheapest stays nullopt).
  std::string estimates = "as run";
};

// `rows`: a report's rows (any view) with a cell of bar.metric; a row without it has no value.
// estimates: what the rows' values are ("as run", "confirmed", "optimistic"); optimistic ones
// (chosen on the same seeds) never name a cheapest.
Frontier BuildFrontier(const std::vector<Row>& rows, const Bar& bar, CostAxis cost, bool maximize,
                       const std::string& estimates = "as run");

}  // namespace tae::report
