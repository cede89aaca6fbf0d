#pragma once

// The scale report (taectl report --scale): a [scale] study's per-rung effects, as the table has
// them, and the ladder fit of each variant's effect across sizes (common/stats/ladder.h): the
// exponent, each ablation's effective-parameter multiplier and its trend, and with `at` the
// effect extrapolated to a size. Pure: rows, values and the stored [scale] in, the fits out.

#include <map>
#include <string>
#include <vector>

#include "common/stats/ladder.h"
#include "server/model/records.h"
#include "server/report/report.h"

namespace tae::report {

struct ScaleRung {
  int rung = 0;
  std::string overrides;  // "model.d_model=64 model.layers=2"
  double size = kNaN;     // N; NaN when unknown
  // Where N comes from: "scale.params", "model/params" (the engine's count), "params" (what a
  // command job reported), or "" when unknown.
  std::string size_source;
};

// One variant at one rung, as the table compares it with the rung's baseline.
struct ScaleRungEffect {
  int rung = 0;
  int n = 0;
  double mean = kNaN;
  double ci95 = kNaN;
  double delta = kNaN;
  double delta_lo = kNaN;
  double delta_hi = kNaN;
  std::string decision;
  std::string mark;
  std::string note;
};

struct ScaleVariant {
  std::string variant;  // the ablation's name ("rms"; "rms[lr=0.01]" at a grid point)
  stats::Estimate multiplier{1, 1, 1};
  stats::Estimate slope{kNaN, kNaN, kNaN};
  std::string trend;
  double crossing = kNaN;
  std::vector<ScaleRungEffect> rungs;
  // With `at`: the extrapolated effect, or why it was refused.
  bool at_ok = false;
  stats::Estimate at_effect{kNaN, kNaN, kNaN};
  bool at_trend = false;
  std::string at_refused;
  // scale.stop_if: its runs that skipped their rung, why, and the accelerator-hours that saved
  // (each skipped run at the mean slots x hours of the runs that ran at its rung).
  int skipped = 0;
  std::string skipped_why;
  double skipped_hours = 0;
  // The figure's curve, of the model the exponent, E and A come from (the trend model when it
  // was fitted): m(N) = exp(curve_log_multiplier + curve_slope (log N - curve_log_size_ref)).
  double curve_log_multiplier = 0;
  double curve_slope = 0;
};

struct ScaleFit {
  std::string metric;
  std::string point;  // the grid point ("lr=0.01"); "" without a [grid]
  bool ok = false;
  std::string why;  // !ok
  std::vector<ScaleRung> rungs;
  stats::Estimate exponent{kNaN, kNaN, kNaN};
  stats::Estimate irreducible{kNaN, kNaN, kNaN};
  double coefficient = kNaN;  // A, at N_ref = 1, of the model `exponent` comes from
  double curve_log_size_ref = 0;
  std::vector<ScaleVariant> variants;  // the baseline first
  bool intervals = false;
  int draws = 0;
  int failed_draws = 0;
  double trend_level = kNaN;
  std::vector<std::string> warnings;
  double at = 0;  // the size asked for; 0: none
  stats::Estimate at_baseline{kNaN, kNaN, kNaN};
  std::string controls;  // what the intervals and verdicts control, in words
};

// The fits of `metric` (one per grid point): rows are BuildReport's over every variant of the
// ladder (each "X[rung=r...]" row compared with its rung's baseline), values every run's final
// values of `metric` and of "params". at > 0: each variant's effect extrapolated to N = at.
// family: the table's (SummarizeFamily), named in `controls`.
// runs: every run of the experiment (for what scale.stop_if skipped and saved).
std::vector<ScaleFit> BuildScale(const model::ScaleSettings& settings, const std::vector<Row>& rows,
                                 const std::vector<model::RunRecord>& runs,
                                 const std::vector<model::FinalValue>& values,
                                 const std::string& metric, const FamilySummary& family,
                                 double at = 0, const stats::LadderOptions& options = {});

// The metric a command job reports its parameter count as, when the spec gives no scale.params.
inline constexpr char kParamsMetric[] = "params";

// What scale.stop_if decides once the first K rungs have ended: which ablations (at each grid
// point: "rms", "rms[lr=0.1]") skip their larger rungs, each with why, and which go on.
struct ScaleStopPlan {
  bool due = false;                         // every run of the first K rungs is final
  std::map<std::string, std::string> skip;  // ablation -> why it skips
  std::vector<std::string> go_on;           // ablation -> "" (its larger rungs run)
};

// The reason every run scale.stop_if skips ends with starts so (its state: pruned).
inline constexpr char kScaleSkipped[] = "skipped by scale.stop_if: ";

// The ladder fit of `metric` over the first settings.stop_rungs rungs (their runs and final
// values, as BuildScale reads them); an ablation skips when its multiplier's 95% interval lies
// within [1 - band, 1 + band]. Not due while any run of those rungs is not final. The baseline
// never skips.
ScaleStopPlan PlanScaleStop(const model::ScaleSettings& settings,
                            const std::vector<model::RunRecord>& runs,
                            const std::vector<model::FinalValue>& values, const std::string& metric,
                            const stats::LadderOptions& options = {});

}  // namespace tae::report
