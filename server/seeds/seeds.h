#pragma once

// Adaptive seeds (train.seeds = { min, max, alpha, margin }): which runs an experiment adds.
//
// Every variant starts with `min` seeds (submit). Whenever a run of the experiment ends, taed asks
// PlanSeeds what to add: for each grid point, each comparison "variant vs the point's baseline" on
// the primary metric is decided by the group-sequential test (common/stats/sequential.h), and a
// comparison still undecided, with nothing pending in either arm, adds one seed to each arm (the
// baseline once for all its comparisons), never past `max` runs per arm. A failed run gives no
// value and its seed is not reused: the arm gets another seed in its place.
//
// Held, i.e. never grown: an arm with a cancelled run (someone said stop), and a comparison whose
// succeeded runs did not report the primary metric (more seeds would not report it either).
//
// The plan is a pure function of the stored runs and their final values, and it asks for
// absolute counts: computing it twice, or again after a restart, adds nothing twice. New seeds
// continue above the variant's highest seed; each copies the config of the variant's lowest-seed
// run (spec::ConfigAtSeed), so a taed upgraded mid-study keeps the study's settings.

#include <cstdint>
#include <string>
#include <vector>

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

// What an adaptive experiment adds now (nothing when report.min_seeds is 0: a list of seeds).
// runs: all of the experiment's runs; values: their final values of PrimaryMetric(report) (others
// are ignored).
Plan PlanSeeds(const model::ExperimentReport& report, const std::vector<model::RunRecord>& runs,
               const std::vector<model::FinalValue>& values);

}  // namespace tae::seeds
