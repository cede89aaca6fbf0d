#pragma once

// What an asha [search] saved (issue 27, `taectl report` footer and `taectl show EXP`): the steps
// its runs ran against the full grid's, and the points judged and pruned at each rung. Pure.
//
// steps_run is the sum of each run's last step (its highest stored step of any metric: a pruned
// run stopped there, a queued one is at 0); steps_full the sum of each run's train.steps from its
// config, what the grid would have run without pruning. A run whose config has no train.steps (a
// command job that does not say) counts in neither and is counted in runs_without_steps.
// Slot-seconds are not estimated: a pruned run's full length in seconds is not known.

#include <cstdint>
#include <vector>

#include "server/model/records.h"

namespace tae::report {

struct RungSavings {
  int rung = 0;
  int64_t step = 0;  // the rung's step
  int judged = 0;    // points kept or pruned there
  int pruned = 0;
  int nodata = 0;  // points whose runs all ended without a value there
};

struct SearchSavings {
  int64_t steps_run = 0;
  int64_t steps_full = 0;
  int runs = 0;                    // runs counted
  int runs_without_steps = 0;      // runs without train.steps (in neither sum)
  int points_pruned = 0;           // distinct points with a prune decision
  std::vector<RungSavings> rungs;  // by rung
  // steps_run / steps_full; 1 when steps_full is 0.
  double fraction() const;
};

struct RunSteps {
  std::string config_json;
  int64_t last_step = 0;
};

SearchSavings SavingsOf(const std::vector<RunSteps>& runs,
                        const std::vector<model::SearchDecisionRecord>& decisions);

}  // namespace tae::report
