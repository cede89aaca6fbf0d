#pragma once

// ASHA over a [grid]: which grid points to stop early (issue 27). The stopping form of
// asynchronous successive halving as Optuna's SuccessiveHalvingPruner (3.1) implements it with
// min_resource = search.min_steps, reduction_factor = search.reduction (eta) and
// min_early_stopping_rate = 0, with three changes for finite grids (docs/design.md, "ASHA on a
// grid"): a rung waits for `bootstrap` points before it judges (Optuna prunes the early arrivals
// instead), a diverged or failed seed is the worst value rather than a missing one, and such a
// point is always pruned. tests/search/asha_oracle_test.py replays randomised studies through
// both: with bootstrap 1 every decision must be Optuna's, and with bootstrap > 1 every judgement
// must be the one Optuna's promotion rule gives over the values recorded at that moment.
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
//    compete among themselves; within = study, all points do (GroupOf). On a [scale] ladder each
//    rung is a competition of its own: a bigger model never prunes a smaller one.
//  - Judging a point at rung k records its value there, then ranks it among the n values its
//    group has recorded at rung k, its own included: rank = 1 + the values strictly better. It is
//    kept when rank <= keeps = max(1, n / eta) (Optuna's promotable index n // eta - 1, with -1
//    raised to 0: the first eta - 1 points of a rung are kept only when best so far), else pruned.
//    Every value tied at the threshold is kept.
//  - The finite rule (bootstrap 0, the default for new experiments): a grid is finite and known
//    in advance, so the rung's population is too: rung 0 keeps K_0 = max(1, N / eta) of the N
//    points of the group, rung k keeps K_k = max(1, K_(k-1) / eta). A point is judged as soon as
//    its value is recorded and kept when rank <= K_k among the values recorded so far: a point is
//    pruned only once K_k better values are in, which no later arrival can undo, so it never stops
//    a point that synchronous successive halving over the same arrivals would keep; nothing waits.
//    Measured by simulation (bench/README.md, "ASHA by simulation"): against bootstrap 2 on a
//    shuffled 9-point grid, the full grid's 2nd point is stopped at rung 0 in 0.7% of studies
//    instead of 20%, its 3rd in 3.6% instead of 40%, for 35% of the steps instead of 33%.
//  - Bootstrap: a rung judges nothing until `bootstrap` points of the group have recorded a value
//    there, or every point of the group that can still reach it has (not pruned, not closed, not
//    past it). Until then an arriving point's value is recorded and it gets kWait: its runs go
//    on. When the rung fills, the arriving point is judged, then the waiting ones in the order
//    they arrived, each against every value recorded there then. bootstrap 1 is Optuna's rule
//    with bootstrap_count 0.
//  - Diverged is worst: a seed whose value is NaN or +-inf at a rung (a diverged seed keeps that
//    value at every later rung: a run's first non-finite report ends its series for the search),
//    or that ended failed before the rung's step, makes its point's value the worst possible
//    (+inf, or -inf with goal max) as soon as it is known, without waiting for the other seeds.
//    Such a value is recorded (it is a competitor that lost) and its point is always pruned, at
//    once (it never waits for the bootstrap), with "diverged at step N" or "failed at step N" in
//    the reason.
//  - A point's rungs are judged in order. One report past several rungs completes each of them
//    with the same value, judged in turn until the point is pruned (Optuna's loop).
//  - Missing data never prunes: a point whose runs all ended (not failed) without a value at a
//    rung some of them reached gets a kNoData decision ("not judged"); a run that never reports
//    the metric holds its point's rung open until it ends.
//  - A rung at or past a run's train.steps (SearchRun::steps) is not a rung for it: a run that
//    trains to its end is never judged at its end, so it can never end `pruned` after its last
//    step (Optuna has no train.steps and judges a report at the final step like any other: there
//    a trial whose last step is a rung can be pruned after it trained). Such a run records no
//    value there, is no competitor there, and its point closes when its next rung is past every
//    run's train.steps. A diverged or failed seed counts as worst only at rungs before its
//    train.steps. Runs of unknown train.steps (0) reach every rung; a kPrune for a point whose
//    runs have all ended changes nothing but the record.
//
// Two layers, both pure: no clock, no I/O; every decision is a function of the calls so far, in
// their order.
//  - AshaJudge: one RungValue (point, group, rung, value) in, one Decision out.
//  - GridSearch: what taed's wiring feeds. Built from an experiment's runs (run id + variant
//    name); Observe(run, metric, step, value) for each stored metric point as it arrives and
//    Ended(run, last_step, failed) when a run reaches a final state (succeeded, failed, cancelled,
//    pruned; not lost: a lost run comes back as a new attempt, and its rung values so far stay),
//    each returning the decisions it completes, in order.
//
// What the wiring does with a Decision: store it (point, rung, step, value, seeds, verdict,
// reason) in the same statement batch as its effect; kPrune: every run of the point that is not
// final (Runs(point): queued ones too, all hosts of a gang) ends in state `pruned` with the
// decision's reason; kKeep and kWait: nothing (they are the rung view's data); kNoData: a line in
// the point's runs' logs. Later reports of a pruned point's runs are ignored here. A worst value
// is +-inf and is stored so.
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
#include <optional>
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
  // >= 1: values a rung waits for before it judges; 0: the finite rule (above).
  int64_t bootstrap = 1;
};

// The rule of an experiment's [search] (meaningful when plan.asha()).
AshaRule RuleOf(const spec::SearchPlan& plan);

// The step of rung `rung` (>= 0): min_steps * reduction^rung, saturating at INT64_MAX.
int64_t RungStep(const AshaRule& rule, int rung);

// The rung steps below `last_step` (a run's train.steps): where a run can be stopped early. The
// rung view's columns.
std::vector<int64_t> RungSteps(const AshaRule& rule, int64_t last_step);

// The competition a grid point `variant` ("no-pos[lr=0.001]") is in: its ablation's name
// ("no-pos") when within = variant, "" when within = study; on a ladder, at its rung
// ("no-pos[rung=1]"; "[rung=1]" within the study).
std::string GroupOf(spec::SearchWithin within, std::string_view variant);

// A grid point's value at one rung: what a decision is made on.
struct RungValue {
  std::string point;  // the grid point's variant name
  std::string group;  // its competition (GroupOf)
  int rung = 0;
  double value = 0;  // the mean over `seeds` runs
  int seeds = 1;
  // Set: the value is the worst (a seed diverged or failed), and why: "diverged at step 30 (r4:
  // nan)", "failed at step 20 (r7)". A non-finite `value` without it counts as worst too.
  std::string worst;
};

enum class Verdict {
  kKeep,     // in the best 1/eta at its rung: it runs on to the next
  kPrune,    // stop every run of the point
  kNoData,   // its runs ended without a value at a rung they reached: not judged
  kWait,     // its value is recorded; the rung judges it once `bootstrap` points reached it
  kIgnored,  // AshaJudge only: the point was pruned already, or the rung is not its next
};

const char* VerdictName(Verdict verdict);  // "keep", "prune", "nodata", "wait", "ignored"

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
  // diverged at step 24 (r4: nan), 9th of 9, keeps best 3"; "rung 0 (step 30): eval/loss 2.1,
  // waits for 3 points at the rung (1 so far)"; "rung 1 (step 90): no run of the point reported
  // eval/loss at or after step 90; not judged".
  std::string reason;
};

// The point-level rule: the values recorded at each rung of each group, and each point's next
// rung. Deterministic in the order of calls.
class AshaJudge {
 public:
  explicit AshaJudge(AshaRule rule) : rule_(std::move(rule)) {}

  // A point of `group` that may reach rungs: what "every point that can still reach it" counts.
  // A point first named by Judge or NoData is added then.
  void AddPoint(const std::string& point, const std::string& group);

  // Records `value` at its rung, which must be its point's next (0 first); otherwise, or when the
  // point was pruned or waits, one kIgnored with a reason and nothing recorded. Returns the
  // point's own decision first (kWait while the rung is not full), then those of the points that
  // waited at the rung, if this filled it. `fire`: judge the rung now whatever the bootstrap says
  // (Restore, where the stored decisions say it was judged).
  std::vector<Decision> Judge(const RungValue& value, bool fire = false);
  // The point's rung was reached without data (kNoData): it is not judged and not judged again.
  // Then the decisions of rungs that no longer wait for it.
  std::vector<Decision> NoData(const std::string& point, const std::string& group, int rung);
  // The point reaches no more rungs (its runs ended before its next rung's step): the decisions
  // of rungs that no longer wait for it. A waiting point stays waiting.
  std::vector<Decision> Close(const std::string& point);
  // Judges the points waiting at `rung` of `group` now (Restore).
  std::vector<Decision> Fire(const std::string& group, int rung);

  int NextRung(const std::string& point) const;
  bool Pruned(const std::string& point) const;
  bool Waiting(const std::string& point) const;
  // The values recorded at `rung` in `group`, in the order they were recorded.
  std::vector<double> Recorded(const std::string& group, int rung) const;
  const AshaRule& rule() const { return rule_; }

 private:
  struct PointState {
    std::string group;
    int next_rung = 0;
    bool pruned = false;
    bool closed = false;   // kNoData or Close: nothing more to judge
    bool waiting = false;  // its value at next_rung is recorded; the rung has not judged it
    RungValue value;       // while waiting
  };
  struct RungState {
    std::vector<double> recorded;
    std::vector<std::string> waiting;  // in arrival order
  };
  PointState& Point(const std::string& point, const std::string& group);
  double Worst() const;  // +inf, or -inf with goal max
  bool Full(const std::string& group, int rung) const;
  // A decision about `value` with its point, rung, step, value and seeds filled in.
  Decision DecisionAt(const RungValue& value, Verdict verdict) const;
  Decision Rank(PointState& point, const RungValue& value);
  std::vector<Decision> FireReady(const std::string& group);

  AshaRule rule_;
  std::map<std::string, PointState> points_;
  std::map<std::pair<std::string, int>, RungState> rungs_;  // (group, rung)
};

struct SearchRun {
  int64_t run_id = 0;
  std::string variant;  // its grid point's variant name ("no-pos[lr=0.001]")
  // Its train.steps (0: not known). A run that failed or diverged counts as the worst only at
  // rungs it was meant to reach: a rung past its last step judges nothing of it.
  int64_t steps = 0;
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
  // The run reached a final state at `last_step` (its last step; 0 if it never started);
  // `failed`: it failed (the job's fault), so the rungs it did not reach count as its worst.
  std::vector<Decision> Ended(int64_t run_id, int64_t last_step, bool failed = false);

  // Replays stored decisions (kKeep, kPrune, kNoData, kWait; in their stored order) into a new
  // search. FailedPrecondition naming the first one that the rule now judges differently.
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
    bool failed = false;
    int64_t last_step = 0;
    int64_t steps = 0;  // SearchRun::steps
    // Its first non-finite report: the run's series ends there for the search.
    std::optional<int64_t> diverged_step;
    double diverged_value = 0;
  };
  struct Point {
    std::string group;
    std::vector<int64_t> runs;
    bool closed = false;  // every run ended past its last rung, or kNoData
  };
  // Judges what the point's runs complete, then what that frees (points a filled rung kept).
  std::vector<Decision> Advance(const std::string& point_name);
  std::vector<Decision> AdvanceOne(const std::string& point_name);
  // The value of the point's next rung if its runs complete it; nullopt while one may still.
  // `beyond`: the point's next rung is at or past every run's train.steps (it reaches no more).
  std::optional<RungValue> NextValue(const std::string& point_name, bool* no_data, bool* beyond);

  AshaJudge judge_;
  std::map<int64_t, Run> runs_;
  std::map<std::string, Point> points_;
};

}  // namespace tae::search
