#pragma once

// Adaptive seeds as taed runs them, by simulation: one grid point with several variants against
// one shared baseline, runs that finish in random order with several in flight, and runs that
// fail. Each time a run ends the real planner (seeds::PlanSeeds) decides what to add, on the same
// RunRecord and FinalValue rows the store would hold; when nothing is left in flight each
// comparison's verdict is read as the report reads it (seeds::SeedOutcomes, stats::FollowLooks).
//
// Deterministic: study i draws from NormalSource(seed + i), whatever the number of threads.

#include <cstdint>
#include <vector>

#include "common/stats/sequential.h"

namespace tae::bench {

struct PlannerStudy {
  stats::SequentialDesign design;  // min, max, alpha (margin 0)
  std::vector<double> effects;     // per variant: its true delta in seed standard deviations
  double fail_rate = 0;            // each run fails with this probability
  int studies = 20000;
  uint64_t seed = 1;
  int threads = 2;
};

struct PlannerResult {
  // Per comparison (the variants' order): shares of studies.
  std::vector<double> different;
  std::vector<double> futile;  // undecided, stopped before max by futility
  std::vector<double> held;    // held at a failed seed
  double mean_runs = 0;        // runs per study, all arms, failed ones included
  double mean_failed = 0;      // failed runs per study
  int fixed_runs = 0;          // (variants + 1) * max: every arm at max seeds
  double mean_in_flight = 0;   // runs in flight when a run ends, on average
};

PlannerResult SimulatePlanner(const PlannerStudy& study);

}  // namespace tae::bench
