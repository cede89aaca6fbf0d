#include "server/seeds/confirm.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/report/tuned.h"

namespace tae::seeds {

ConfirmPlan PlanConfirm(const model::SearchSettings& search,
                        const std::vector<model::RunRecord>& runs,
                        const std::vector<model::FinalValue>& values) {
  ConfirmPlan plan;
  if (search.confirm <= 0 || runs.empty()) {
    return plan;
  }
  std::vector<std::string> variants;  // by first run: the experiment's order
  std::set<std::string> seen;
  int64_t highest_seed = runs.front().seed;
  std::map<std::string, int> confirmations;             // variant -> its confirmation runs
  std::map<std::string, const model::RunRecord*> like;  // variant -> its lowest-seed search run
  for (const model::RunRecord& run : runs) {
    highest_seed = std::max(highest_seed, run.seed);
    if (seen.insert(run.variant).second) {
      variants.push_back(run.variant);
    }
    if (run.confirm) {
      ++confirmations[run.variant];
      continue;
    }
    if (!model::IsFinal(run.state)) {
      return plan;  // the search is not over
    }
    if (run.state == model::RunState::kCancelled && plan.held.empty()) {
      plan.held = absl::StrCat("r", run.id, " was cancelled, so the search is not confirmed");
    }
    const model::RunRecord*& lowest = like[run.variant];
    if (lowest == nullptr || run.seed < lowest->seed) {
      lowest = &run;
    }
  }
  if (!plan.held.empty()) {
    return plan;
  }
  std::vector<model::FinalValue> searched;
  for (const model::FinalValue& value : values) {
    if (!value.confirm && value.key == search.metric) {
      searched.push_back(value);
    }
  }
  const std::vector<report::TunedChoice> choices =
      report::ChooseTuned(variants, searched, search.metric, search.goal == "max");
  for (const report::TunedChoice& choice : choices) {
    if (choice.variant.empty()) {
      continue;  // no candidate point: nothing to confirm
    }
    const int missing = search.confirm - confirmations[choice.variant];
    if (missing <= 0) {
      continue;
    }
    ConfirmRuns add;
    add.variant = choice.variant;
    add.like_run = like.at(choice.variant)->id;
    for (int i = 0; i < missing; ++i) {
      add.seeds.push_back(highest_seed + 1 + i);
    }
    add.why =
        absl::StrFormat("%s chosen on %s (%s): %g over %d seeds, best of %d points", choice.point,
                        search.metric, search.goal, choice.score, choice.n, choice.candidates);
    plan.add.push_back(std::move(add));
  }
  return plan;
}

}  // namespace tae::seeds
