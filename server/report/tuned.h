#pragma once

// The tuned table's choice (issue 27, `taectl report --tuned`): each variant at its own best
// [grid] point, so that an ablation is not judged at the baseline's learning rate. Pure.
//
// A grid point's score is the mean, over its succeeded runs (one per seed) that have the search
// metric, of each run's final value (summed in the order the values are given). Each variant
// ("baseline" or an ablation, the variant name without its "[...]" point) gets the point with the
// best score in the goal's direction; equal scores go to the point listed first in `variants`
// (the spec's order). Points without a succeeded run with the metric (every seed pruned, failed
// or still running) are not candidates: an asha study's pruned points never win; nor is a point
// with a failed seed (`failed`: its variant names), which would be judged on its lucky seeds.
//
// How the report uses it: BuildReport(chosen variants, runs, values, metrics,
// baseline = the baseline's chosen variant ("baseline[lr=0.003]")) gives each row its mean ± CI
// and its Δ against the baseline at the baseline's own best point (spec::BaselineFor keeps a
// baseline that names its point); the row shows the chosen values of the grid keys.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "server/model/records.h"
#include "server/report/report.h"

namespace tae::report {

struct TunedChoice {
  std::string ablation;  // "baseline", "no-pos"
  // The chosen grid point's variant name ("no-pos[lr=0.001]") and its point ("lr=0.001"); both
  // "" when no point of the variant has a score.
  std::string variant;
  std::string point;
  double score = 0;    // mean final value of the search metric at the chosen point
  int n = 0;           // the runs it is the mean of
  int candidates = 0;  // points of the variant with a score
  int points = 0;      // points of the variant in `variants`
};

// `variants`: the experiment's variant names in spec order (grid point names, as ExpandRuns
// names them); `values`: final values (model::FinalValue) of any metrics and runs, of which the
// succeeded runs' `metric` counts. One choice per ablation, in the order of its first point in
// `variants`; the one named `baseline` first.
std::vector<TunedChoice> ChooseTuned(const std::vector<std::string>& variants,
                                     const std::vector<model::FinalValue>& values,
                                     const std::string& metric, bool maximize,
                                     const std::string& baseline = "baseline",
                                     const std::set<std::string>& failed = {});

// The tuned table: BuildReport over each ablation's chosen point (ChooseTuned on `search_metric`
// in the direction `maximize`), each compared with the chosen point of the ablation named by
// `baseline` ("baseline"; a name with a point, "baseline[lr=0.1]", means its ablation). Rows carry
// their ablation, point, points and candidates; an ablation without a candidate point gets a row
// named by the ablation alone, without values, whose run counts are over all its points. `values`
// must hold `search_metric`'s final values.
//
// The choice is made on the search runs alone (never on a confirmation run, RunRecord::confirm).
// With options.confirm > 0 (search.confirm) each row's run counts, values, n and delta (against
// the baseline's chosen point, likewise) come from the confirmation runs at its chosen point
// alone, and the row counts them (confirm_runs) and those not final (confirm_pending); until the
// search is over there are none, and the rows have no values. Without it the values are those
// of the seeds the point was chosen on: biased toward luck (server/seeds/confirm.h).
std::vector<Row> BuildTunedReport(
    const std::vector<std::string>& variants, const std::vector<model::RunRecord>& runs,
    const std::vector<model::FinalValue>& values, const std::vector<std::string>& metrics,
    const std::string& search_metric, bool maximize, const std::string& baseline,
    const std::map<std::string, std::string>& goal = {}, const ReportOptions& options = {});

// What the tuned table's values are, for its legend and --json (`confirm`: search.confirm; `rows`:
// BuildTunedReport's): "optimistic: chosen on the same seeds" (no confirmation), "confirmed: 3
// fresh seeds" (every chosen point has its confirmation runs, all final), or "pending: 4 of 6
// confirmation runs (3 fresh seeds per chosen point) not finished" (not added yet, or running).
std::string TunedEstimates(int confirm, const std::vector<Row>& rows);

}  // namespace tae::report
