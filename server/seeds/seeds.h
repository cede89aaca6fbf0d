#pragma once

// Adaptive seeds (train.seeds = { min, max, alpha, margin }): which runs an experiment adds.
//
// Every variant starts with `min` seeds (submit). Whenever a run of the experiment ends, taed asks
// PlanSeeds what to add: for each grid point, each comparison "variant vs the point's baseline" on
// the primary metric is followed over its looks by stats::FollowLooks (common/stats/sequential.h),
// and a comparison whose next look needs more seeds brings each arm to that many (the baseline to
// the most any of its comparisons wants), never past `max` runs per arm. A comparison's look n
// uses the first n seeds of each arm in seed order and the course stops at its first final
// verdict, so a baseline that gains seeds for a sibling neither re-tests nor flips a comparison
// already decided or stopped as futile. The table (server/report) follows the same course.
//
// A failed seed is reported, never replaced. A run that ends failed is a result of its variant at
// that seed, not a value missing at random: a variant that diverges at some seeds and is judged on
// the others looks better than it is, and replacing the seed hides exactly that. So the
// comparison whose next look needs a failed seed is held at its last look whose seeds all
// succeeded (the look its spending function budgeted, no test added or skipped), listed in
// Plan::held ("no-pos vs baseline: r12 failed"), and the report counts the variant's failed runs
// next to that verdict. A baseline's failed seed holds every comparison that reaches it; a failure
// beyond a comparison's final look changes nothing. Holding never adds a look, so it cannot raise
// the false-positive rate; it costs power, which is the honest price of a failing variant. Fix the
// cause and submit again, or read the held verdict for what it is.
//
// Also held, i.e. never grown: an arm with a cancelled run (someone said stop), and a comparison
// whose succeeded runs did not report the primary metric (more seeds would not report it either).
//
// The plan is a pure function of the stored runs and their final values, and it asks for
// absolute counts: computing it twice, or again after a restart, adds nothing twice. New seeds
// continue above the variant's highest seed; each copies the config of the variant's lowest-seed
// run (spec::ConfigAtSeed), so a taed upgraded mid-study keeps the study's settings.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/stats/sequential.h"
#include "server/model/records.h"

namespace tae::seeds {

// The metric adaptive seeds decide on: the first of [report] metrics, else eval/loss.
std::string PrimaryMetric(const model::ExperimentReport& report);

struct NewSeeds {
  std::string variant;
  std::vector<int64_t> seeds;  // ascending, above the variant's highest seed
  int64_t like_run = 0;        // the variant's lowest-seed run: its config is the template
  // Why, for the run's first transition: "eval/loss undecided at n=3 (p=0.21): no-pos vs
  // baseline".
  std::string why;
};

struct Plan {
  // Per grid point (in the order of their first runs) its baseline first, then its variants.
  std::vector<NewSeeds> add;
  // Comparisons that will not grow, and why ("no-pos: r12 is cancelled").
  std::vector<std::string> held;
};

// The comparisons of one metric's family: the variants (at every grid point) that are not their
// own baseline, of the runs that are not search.confirm's.
int Comparisons(const std::vector<model::RunRecord>& runs);

// The design of an adaptive experiment for `metric` (its margin from report.margin) when its
// family has `comparisons` comparisons: each spends stats::SharedAlpha of report.alpha by
// report.correction (common/stats/family.h), so that the family's error rate is at most alpha.
// Check it with stats::DesignError.
stats::SequentialDesign DesignOf(const model::ExperimentReport& report, const std::string& metric,
                                 int comparisons = 1);

// Each variant's seeds in seed order as the sequential test sees `metric`: a succeeded run's final
// value; "r12 failed", "r12 was cancelled", "r12 was pruned" or "r12 succeeded without reporting
// eval/loss" for a run that ended without one; pending for a run not finished. values: final
// values of any metrics (others are ignored).
std::map<std::string, std::vector<stats::Outcome>> SeedOutcomes(
    const std::vector<model::RunRecord>& runs, const std::vector<model::FinalValue>& values,
    const std::string& metric);

// What an adaptive experiment adds now (nothing when report.min_seeds is 0: a list of seeds).
// runs: all of the experiment's runs; values: their final values of PrimaryMetric(report) (others
// are ignored).
Plan PlanSeeds(const model::ExperimentReport& report, const std::vector<model::RunRecord>& runs,
               const std::vector<model::FinalValue>& values);

// The same with the design's boundaries computed once by the caller
// (stats::ComputeBoundaries(DesignOf(report, PrimaryMetric(report), Comparisons(runs)))), for
// callers that plan the same experiment many times (bench/seeds).
Plan PlanSeeds(const model::ExperimentReport& report, const stats::Boundaries& boundaries,
               const std::vector<model::RunRecord>& runs,
               const std::vector<model::FinalValue>& values);

}  // namespace tae::seeds
