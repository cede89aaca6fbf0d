#pragma once

// The ablation table: per variant and metric, the mean over seeds of each run's final value with
// its 95% confidence interval (Student's t), the mean of each run's best value, and the delta
// against the variant's baseline (absolute, relative, and Welch's t-test p-value with a
// significance mark); plus parameters, FLOPs per token and throughput. Pure, so the numbers are
// unit-tested.

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/stats/family.h"
#include "common/stats/sequential.h"
#include "server/model/records.h"

namespace tae::report {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Cell {
  std::string metric;
  int n = 0;  // succeeded runs with a finite value
  // Succeeded runs whose metric diverged (NaN or +-inf; model::FinalValue::diverged_step), and
  // the earliest step one did. While any did, mean, CI, best and delta stay NaN: the variant is
  // "diverged k of n", never the mean of the seeds that happened not to.
  int diverged = 0;
  int64_t diverged_step = 0;
  double mean = kNaN;  // of the final values
  double std = kNaN;   // sample standard deviation (n - 1); NaN when n < 2
  double ci95 = kNaN;  // half-width of the 95% CI of the mean; NaN when n < 2
  double best = kNaN;  // mean over runs of the run's best value (min, or max when higher is better)
  bool has_delta = false;
  double delta = kNaN;      // mean - baseline mean
  double rel_delta = kNaN;  // delta / |baseline mean|
  // Relative deltas are shown only against a baseline clearly away from zero (its CI excludes 0
  // and |delta| <= 10 |baseline|); rel_delta is kept for sorting.
  bool rel_shown = false;
  // Fixed seeds: both arms have >= 2 seeds with seed variance, so there is a t test (Welch's with
  // stats::TableDof); adaptive seeds: never (a naive p after optional stopping is not valid).
  bool has_test = false;
  double p_value = kNaN;     // the test's two-sided p, unadjusted
  double p_adjusted = kNaN;  // by the family's correction (stats::AdjustedP); NaN when untested
  std::string mark;          // of p_adjusted: "***" < 0.001, "**" < 0.01, "*" < 0.05
  // The interval of delta, consistent with the decision: at the family's level for this
  // comparison (stats::IntervalLevels), or adaptive seeds' repeated CI at the look it stopped at;
  // NaN where there is no test. delta_level is its two-sided level (0.05 / K ...).
  double delta_lo = kNaN;
  double delta_hi = kNaN;
  double delta_level = kNaN;
  // Undecided with a test: the smallest |delta| this comparison would have detected with 80%
  // power at its seeds and observed spread (stats::DetectableEffect).
  double detectable = kNaN;
  // Why there is no test or no verdict: "no seed variance (baseline)", "fewer than 2 seeds per
  // arm", "optimistic: chosen on these seeds"; "" otherwise.
  std::string note;
  // What the comparison with the baseline decides (compared cells only, else ""): "different",
  // "equivalent" (within +-margin) or "undecided", by the sequential design of adaptive seeds, or
  // with fixed seeds by the family's correction (Holm on the t tests' p; TOST at alpha / K with a
  // margin). "" also for a compared cell of a tuned view without search.confirm (selected on its
  // own seeds: no verdict).
  std::string decision;
  int decision_n = 0;            // seeds per arm it was decided on (the smaller arm)
  bool decision_final = false;   // another seed would not change it (decided, or at max)
  bool decision_futile = false;  // undecided, final before max by adaptive seeds' futility rule
  // Adaptive seeds: the comparison's next look needs a seed that ended without a value, so it is
  // held at its last look ("r12 failed"; stats::FollowLooks); "" when not held.
  std::string decision_held;
  double margin = 0;  // the metric's equivalence margin; 0: none
  // The chance, shortcut or floor level the mean sits at (within its 95% CI, or within
  // kLevelTolerance of it), else kind "".
  std::string level_kind;
  double level = kNaN;
  std::string level_what;
  std::string level_hides;
};

// How close to a level a mean must be to sit at it when its CI is narrower: the levels are
// expectations and a finite eval set scatters around them (1,024 assoc_recall answers: SE 0.015).
inline constexpr double kLevelTolerance = 0.02;

// What the experiment's file says about judging its table.
struct ReportOptions {
  // train.seeds = { min, max, alpha, margin }: decisions by the sequential design; absent: one
  // test at alpha over whatever seeds there are.
  bool adaptive = false;
  stats::SequentialDesign design;
  double alpha = 0.05;
  std::map<std::string, double> margin;  // per metric; absent: no equivalence decision
  std::map<std::string, double> floor;   // [report] floor: below it (above for losses) is noise
  // search.confirm: fresh seeds per variant at its chosen point (tuned.h); 0: none.
  int confirm = 0;
  // Which runs BuildReport counts: the search's (false: every run but search.confirm's
  // confirmation runs) or the confirmation runs alone (true: the tuned table's confirmed rows).
  bool confirmation_runs = false;
  // How each metric's family of comparisons is controlled (report.correction).
  stats::Correction correction = stats::Correction::kHolm;
  // report.pairing = "seed": a fixed-seed comparison is the paired t-test of the per-seed
  // differences over the seeds both arms have (stats::PairedT), its interval and detectable
  // effect from that test; adaptive seeds are never paired (their boundaries are Welch's).
  bool paired = false;
  // The rows' points were chosen on the same seeds (the tuned view without search.confirm): their
  // comparisons get estimates and intervals, never a verdict or stars.
  bool selected = false;
};

struct Row {
  std::string variant;
  std::string baseline;  // the variant it is compared with ("baseline[layers=2]" at grid points)
  int runs = 0;          // succeeded runs
  int runs_total = 0;    // all runs of the variant
  int runs_pruned = 0;   // runs an asha [search] stopped (state pruned)
  int runs_failed = 0;   // runs that ended failed (their seeds are not replaced)
  // Every succeeded seed (two or more) gave the same final, least and greatest value of every
  // metric of the table: the program does not vary with its seed.
  bool seeds_identical = false;
  std::vector<Cell> cells;
  double params = kNaN;           // mean model/params of its succeeded runs
  double flops_per_token = kNaN;  // mean model/flops_per_token
  double tokens_per_s = kNaN;     // mean of each run's last perf/tokens_per_s
  // The tuned table only (tuned.h, BuildTunedReport): the ablation ("no-pos"), its chosen grid
  // point ("lr=0.001"; "" when no point had a score), and of its points how many had a score.
  std::string ablation;
  std::string point;
  int points = 0;
  int candidates = 0;
  // The tuned table with search.confirm: the confirmation runs at the chosen point (whose seeds
  // alone give the row's runs, values and delta) and how many of them are not final.
  int confirm_runs = 0;
  int confirm_pending = 0;
};

// The floors and decision rule of an experiment's stored [report] and train.seeds.
ReportOptions OptionsOf(const model::ExperimentReport& report);

// The metrics whose larger values are better: as `goal` says ("max"; an experiment's [report]
// goal), else the one default (metrics::LargerIsBetterByDefault).
bool HigherIsBetter(const std::string& metric, const std::map<std::string, std::string>& goal = {});

// The metrics BuildReport reads besides the table's own, for the size and speed columns.
std::vector<std::string> ExtraMetrics();

// Counts `run` in `row`'s runs_total, and in runs (succeeded), runs_pruned or runs_failed by its
// state.
void CountRun(const model::RunRecord& run, Row* row);

// variants: in display order (baseline first); runs: every run of the experiment; values: the
// final values of `metrics` and ExtraMetrics(); only succeeded runs count, and of the runs and
// values only those options.confirmation_runs selects (by default: none of search.confirm's). Each
// variant is compared with spec::BaselineFor(variant, baseline). Cells are decided and marked by
// `options` and by the task levels of each variant's first run's config (report/task_levels.h).
std::vector<Row> BuildReport(const std::vector<std::string>& variants,
                             const std::vector<model::RunRecord>& runs,
                             const std::vector<model::FinalValue>& values,
                             const std::vector<std::string>& metrics, const std::string& baseline,
                             const std::map<std::string, std::string>& goal = {},
                             const ReportOptions& options = {});

// One line per baseline row and metric whose mean sits at a level: "eval/acc: baseline is at the
// most-frequent-value shortcut (0.32): this table cannot show the lookup mechanism"; and first,
// when seeds gave identical results (Row::seeds_identical), one line that says so.
std::vector<std::string> Banners(const std::vector<Row>& rows);

// What a table's verdicts control: its method, alpha, and per metric the size of its family.
struct FamilySummary {
  std::string method;  // "holm", "bonferroni", "none"
  double alpha = 0.05;
  std::vector<std::pair<std::string, int>> comparisons;  // per metric: comparisons in the family
  bool controlled = true;  // false for "none" and for a selected view (no verdicts)
  std::string family;      // in words, for legends
};
// options: the table's; rows: BuildReport's. A fixed-seed family is the comparisons with a test
// (one without can never be called different); adaptive seeds' is every comparison (the split of
// alpha is planned before any seed runs).
FamilySummary SummarizeFamily(const ReportOptions& options, const std::vector<Row>& rows,
                              const std::vector<std::string>& metrics);

// Baseline rows first (in their order), then the others by decreasing |relative delta| of the
// first metric; rows without one keep their order at the end. Stable.
void SortByEffect(std::vector<Row>* rows);

}  // namespace tae::report
