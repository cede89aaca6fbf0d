#include "server/report/savings.h"

#include <map>
#include <optional>
#include <set>
#include <string>

namespace tae::report {

double SearchSavings::fraction() const {
  return steps_full > 0 ? static_cast<double>(steps_run) / static_cast<double>(steps_full) : 1.0;
}

SearchSavings SavingsOf(const std::vector<RunSteps>& runs,
                        const std::vector<model::SearchDecisionRecord>& decisions) {
  SearchSavings out;
  for (const RunSteps& run : runs) {
    const std::optional<int64_t> steps = model::TrainSteps(run.config_json);
    if (!steps.has_value()) {
      ++out.runs_without_steps;
      continue;
    }
    ++out.runs;
    out.steps_run += run.last_step;
    out.steps_full += *steps;
  }
  std::map<int, RungSavings> rungs;
  std::set<std::string> pruned;
  for (const model::SearchDecisionRecord& d : decisions) {
    RungSavings& rung = rungs[d.rung];
    rung.rung = d.rung;
    rung.step = d.step;
    if (d.verdict == "wait") {
      continue;  // its keep or prune comes when the rung fills
    }
    if (d.verdict == "nodata") {
      ++rung.nodata;
      continue;
    }
    ++rung.judged;
    if (d.verdict == "prune") {
      ++rung.pruned;
      pruned.insert(d.point);
    }
  }
  for (const auto& entry : rungs) {
    out.rungs.push_back(entry.second);
  }
  out.points_pruned = static_cast<int>(pruned.size());
  return out;
}

}  // namespace tae::report
