#pragma once

// ASHA over a [grid]: which grid points to stop early (issue 27). The stopping form of
// asynchronous successive halving, exactly as Optuna's SuccessiveHalvingPruner (3.1) implements
// it with min_resource = search.min_steps, reduction_factor = search.reduction (eta),
// min_early_stopping_rate = 0 and bootstrap_count = 0; tests/search/asha_oracle_test.py replays
// randomised studies through both and requires the same decisions.
//
// The rule.
//  - Rung k (k = 0, 1, ...) is at step min_steps * eta^k.
//  - The unit of a decision is a grid point with all its seeds (one variant name such as
//    "no-pos[lr=0.001]"; its runs are its seeds). A run's value at rung k is its first report of
//    the metric (in arrival order) at a step >= the rung's step: Optuna judges a trial on the
//    value it reports at the first step at or past the rung. The point's value at rung k is the
//    mean over its runs that have one (summed in the order the runs were given), taken once every
//    run of the point has one or has ended. A point waits for its own seeds, never for other
//    points: it competes with the points that have a value at that rung so far.
//  - Competition: within = variant, the grid points of one variant ("baseline" or an ablation)
//    compete among themselves; within = study, all points do (GroupOf).
//  - Judging a point at rung k records its value there, then ranks it among the n values its
//    group has recorded at rung k, its own included: rank = 1 + the values strictly better. It is
//    kept when rank <= keeps = max(1, n / eta) (Optuna's promotable index n // eta - 1, with -1
//    raised to 0: the first eta - 1 points of a rung are kept only when best so far), else pruned.
//    Every value tied at the threshold is kept. A NaN value is pruned and not recorded (Optuna
//    too): one diverged seed stops its point.
//  - A point's rungs are judged in order. One report past several rungs completes each of them
//    with the same value, judged in turn until the point is pruned (Optuna's loop).
//  - Missing data never prunes: a point whose runs all ended without a value at a rung some of
//    them reached gets a kNoData decision ("not judged"); a run that never reports the metric
//    holds its point's rung open until it ends.
//  - Rungs are not capped at train.steps: a run's last report also completes the rungs up to its
//    last step, and its value there is recorded for the points judged after it (as in Optuna). A
//    kPrune for a point whose runs have all ended changes nothing but the record.
//
// Two layers, both pure: no clock, no I/O; every decision is a function of the calls so far, in
// their order.
//  - AshaJudge: one RungValue (point, group, rung, value) in, one Decision out.
//  - GridSearch: what taed's wiring feeds. Built from an experiment's runs (run id + variant
//    name); Observe(run, metric, step, value) for each stored metric point as it arrives and
//    Ended(run, last_step) when a run reaches a final state (succeeded, failed, cancelled, pruned;
//    not lost: a lost run comes back as a new attempt, and its rung values so far stay), each
//    returning the decisions it completes, in order.
//
// What the wiring does with a Decision: store it (point, rung, step, value, seeds, verdict,
// reason) in the same statement batch as its effect; kPrune: every run of the point that is not
// final (Runs(point): queued ones too, all hosts of a gang) ends in state `pruned` with the
// decision's reason; kKeep: nothing (it is the rung view's data); kNoData: a line in the point's
// runs' logs. Later reports of a pruned point's runs are ignored here.
//
// After a taed restart: build a new GridSearch with the same runs in the same order, Restore()
// the stored decisions in their stored order (it re-judges each and checks it gets the same
// verdict, so a changed rule or a damaged store is an error, not a silent new decision), then
// Observe every stored metric point of the runs (each run's points in the order they arrived,
// resent steps included: a run's rung value is its first report at or past the rung) and call
// Ended for the final ones. Because every completed rung was judged by the call that completed
// it, this replay decides nothing new; any decision it returns is new and is applied as usual.
//
// Not thread-safe: one owner (taed's scheduling strand).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/spec/spec.h"

namespace tae::search {

struct AshaRule {
  std::string metric = "eval/loss";  // for reasons and Observe's filter
  bool maximize = false;             // goal "max"
  int64_t min_steps = 1;             // >= 1: rung 0's step
  int64_t reduction = 3;             // eta >= 2
};

// The rule of an experiment's [search] (meaningful when plan.asha()).
AshaRule RuleOf(const spec::SearchPlan& plan);

// The step of rung `rung` (>= 0): min_steps * reduction^rung, saturating at INT64_MAX.
int64_t RungStep(const AshaRule& rule, int rung);

// The rung steps below `last_step` (a run's train.steps): where a run can be stopped early. The
// rung view's columns.
std::vector<int64_t> RungSteps(const AshaRule& rule, int64_t last_step);

// The competition a grid point `variant` ("no-pos[lr=0.001]") is in: its ablation's name
// ("no-pos") when within = variant, "" when within = study.
std::string GroupOf(spec::SearchWithin within, std::string_view variant);

// A grid point's value at one rung: what a decision is made on.
struct RungValue {
  std::string point;  // the grid point's variant name
  std::string group;  // its competition (GroupOf)
  int rung = 0;
  double value = 0;  // the mean over `seeds` runs
  int seeds = 1;
};

enum class Verdict {
  kKeep,     // in the best 1/eta at its rung: it runs on to the next
  kPrune,    // stop every run of the point
  kNoData,   // its runs ended without a value at a rung they reached: not judged
  kIgnored,  // AshaJudge only: the point was pruned already, or the rung is not its next
};

const char* VerdictName(Verdict verdict);  // "keep", "prune", "nodata", "ignored"

struct Decision {
  Verdict verdict = Verdict::kKeep;
  std::string point;
  std::string group;
  int rung = 0;
  int64_t step = 0;  // the rung's step
  double value = 0;  // NaN for kNoData
  int seeds = 0;     // runs the value is the mean of
  int rank = 0;      // 1-based among `competitors` (ties share the better rank); 0 if not ranked
  int competitors = 0;
  int keeps = 0;  // the best this many (and ties) are kept
  // "rung 2 (step 270): eval/loss 1.93, 7th of 9, keeps best 3"; "rung 0 (step 30): eval/loss
  // nan, not a number"; "rung 1 (step 90): no run of the point reported eval/loss at or after
  // step 90; not judged".
  std::string reason;
};

// The point-level rule: the values recorded at each rung of each group, and each point's next
// rung. Deterministic in the order of Judge calls.
class AshaJudge {
 public:
  explicit AshaJudge(AshaRule rule) : rule_(std::move(rule)) {}

  // Judges `value` at its rung, which must be its point's next (0 first); otherwise, or when the
  // point was pruned, kIgnored with a reason and nothing recorded.
  Decision Judge(const RungValue& value);
  // The point's rung was reached without data (kNoData): it is not judged and not judged again.
  Decision NoData(const std::string& point, const std::string& group, int rung);

  int NextRung(const std::string& point) const;
  bool Pruned(const std::string& point) const;
  // The values recorded at `rung` in `group`, in the order they were judged.
  std::vector<double> Recorded(const std::string& group, int rung) const;
  const AshaRule& rule() const { return rule_; }

 private:
  struct PointState {
    int next_rung = 0;
    bool pruned = false;
    bool closed = false;  // kNoData: nothing more to judge
  };
  AshaRule rule_;
  std::map<std::string, PointState> points_;
  std::map<std::pair<std::string, int>, std::vector<double>> recorded_;  // (group, rung)
};

struct SearchRun {
  int64_t run_id = 0;
  std::string variant;  // its grid point's variant name ("no-pos[lr=0.001]")
};

// The run-level search of one experiment (see the top of this file).
class GridSearch {
 public:
  // `runs`: every run of the experiment, in a fixed order (run id order); a point's mean sums
  // its runs in this order.
  GridSearch(AshaRule rule, spec::SearchWithin within, std::vector<SearchRun> runs);

  // A metric point of a run; other metrics than the rule's, unknown runs and the runs of a
  // pruned point are ignored. Returns the decisions it completes, in order.
  std::vector<Decision> Observe(int64_t run_id, std::string_view metric, int64_t step,
                                double value);
  // The run reached a final state at `last_step` (its last step; 0 if it never started).
  std::vector<Decision> Ended(int64_t run_id, int64_t last_step);

  // Replays stored decisions (kKeep, kPrune, kNoData; in their stored order) into a new search.
  // FailedPrecondition naming the first one that the rule now judges differently.
  absl::Status Restore(const std::vector<Decision>& decisions);

  bool Pruned(const std::string& point) const { return judge_.Pruned(point); }
  // The runs of a point, in the order given.
  std::vector<int64_t> Runs(const std::string& point) const;
  const AshaJudge& judge() const { return judge_; }

 private:
  struct Run {
    std::string point;
    std::map<int, double> values;  // rung -> its first value at or past the rung's step
    bool ended = false;
    int64_t last_step = 0;
  };
  struct Point {
    std::string group;
    std::vector<int64_t> runs;
    bool closed = false;  // every run ended past its last rung, or kNoData
  };
  std::vector<Decision> Advance(const std::string& point_name);

  AshaJudge judge_;
  std::map<int64_t, Run> runs_;
  std::map<std::string, Point> points_;
};

}  // namespace tae::search
