#pragma once

// search.confirm = N: the confirmation runs an experiment adds once its search is over.
//
// The winner's curse: the tuned table (report/tuned.h) shows each variant at the grid point whose
// seeds scored best, so those seeds' mean is biased toward luck (with K equal points of n seeds
// and noise sigma, by about sigma / sqrt(n) * E[max of K standard normals]), and so is its delta
// against the baseline. Confirmation re-runs each variant's chosen point on N fresh seeds; the
// tuned table then reports those seeds alone, whose mean is unbiased.
//
// The search is over when every run that is not a confirmation run (a search run) is final. Then
// each variant's point is chosen as the tuned table chooses it (report::ChooseTuned on the search
// metric and goal, over the search runs' final values only), and a chosen point with fewer than N
// confirmation runs gets the rest. A variant without a candidate point (every point pruned or
// failed) gets none. Nothing is added while a search run is pending, nor after a search run was
// cancelled (someone said stop; `held` says so).
//
// The plan is a pure function of the stored runs and their final values, and it asks for an
// absolute count: computing it twice, or again after a restart, adds nothing twice. A confirmation
// run that fails is not replaced (taectl retry requeues it). New seeds start above the
// experiment's highest seed, the same ones for every variant in one plan (so no seed of a point is
// reused, and the variants' confirmations share seeds as their searches do); each run copies the
// config of the chosen point's lowest-seed search run (spec::ConfigAtSeed), as adaptive seeds do.

#include <cstdint>
#include <string>
#include <vector>

#include "server/model/records.h"

namespace tae::seeds {

struct ConfirmRuns {
  std::string variant;         // the chosen point's variant name ("no-pos[lr=0.001]")
  std::vector<int64_t> seeds;  // ascending, above every seed of the experiment
  int64_t like_run = 0;        // the point's lowest-seed search run: its config is the template
  // For the runs' first transition: "lr=0.001 chosen on eval/loss (min): 2.31 over 3 seeds, best
  // of 9 points".
  std::string why;
};

struct ConfirmPlan {
  std::vector<ConfirmRuns> add;  // in the tuned table's order: the baseline first
  std::string held;              // why a due confirmation is not added; "" otherwise
};

// What an experiment with `search` (search.confirm = search.confirm) adds now; nothing when
// search.confirm is 0. runs: all of the experiment's runs, in id order; values: their final
// values of search.metric (others are ignored).
ConfirmPlan PlanConfirm(const model::SearchSettings& search,
                        const std::vector<model::RunRecord>& runs,
                        const std::vector<model::FinalValue>& values);

}  // namespace tae::seeds
