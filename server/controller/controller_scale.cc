// scale.stop_if: a [scale] ladder's larger rungs are held at submit (model::kHeldNotBefore) until
// its first K rungs have ended; then report::PlanScaleStop decides which ablations skip them.
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/spec.h"
#include "server/controller/controller.h"
#include "server/lifecycle/lifecycle.h"
#include "server/report/scale.h"
#include "spdlog/spdlog.h"

namespace tae::controller {

void Controller::DecideDueLadders() {
  std::set<int64_t> due;
  due.swap(ladders_due_);
  for (int64_t experiment_id : due) {
    DecideLadder(experiment_id);
  }
}

void Controller::DecideLadder(int64_t experiment_id) {
  absl::StatusOr<model::ExperimentSource> source = store_->GetExperimentSource(experiment_id);
  if (!source.ok()) {
    Noted(source.status(), "read an experiment for scale.stop_if");
    return;
  }
  const model::ScaleSettings& settings = source->report.scale;
  if (settings.stop_rungs <= 0) {
    return;
  }
  absl::StatusOr<std::vector<model::RunRecord>> runs = store_->ListRuns(experiment_id);
  if (!runs.ok()) {
    Noted(runs.status(), "read an experiment's runs for scale.stop_if");
    return;
  }
  std::vector<const model::RunRecord*> held;
  for (const model::RunRecord& run : *runs) {
    if (run.state == model::RunState::kQueued && run.not_before >= model::kHeldNotBefore) {
      held.push_back(&run);
    }
  }
  if (held.empty()) {
    return;  // decided before
  }
  const std::string metric =
      source->report.metrics.empty() ? std::string("eval/loss") : source->report.metrics.front();
  absl::StatusOr<std::vector<model::FinalValue>> values =
      store_->FinalValues(experiment_id, {metric, "model/params", report::kParamsMetric});
  if (!values.ok()) {
    Noted(values.status(), "read an experiment's values for scale.stop_if");
    return;
  }
  const report::ScaleStopPlan plan = report::PlanScaleStop(settings, *runs, *values, metric);
  if (!plan.due) {
    return;
  }
  const double now = Now();
  std::vector<std::pair<int64_t, model::Decide>> skip;
  int released = 0;
  for (const model::RunRecord* run : held) {
    const std::string ablation = spec::WithoutRung(run->variant);
    if (auto it = plan.skip.find(ablation); it != plan.skip.end()) {
      skip.emplace_back(run->id, lifecycle::Finish(model::RunState::kPruned, it->second, now));
      continue;
    }
    absl::StatusOr<model::RunRecord> after = store_->Transition(
        run->id, lifecycle::Release(absl::StrCat("released by scale.stop_if after rungs 0-",
                                                 settings.stop_rungs - 1),
                                    now));
    if (!after.ok()) {
      Noted(after.status(), "release a run held by scale.stop_if");
      continue;
    }
    ++released;
  }
  for (const auto& [ablation, why] : plan.skip) {
    spdlog::info("e{}: {} {}", experiment_id, ablation, why);
  }
  if (!skip.empty()) {
    if (absl::Status s = store_->RecordSearch(experiment_id, {}, skip); !s.ok()) {
      Noted(s, "skip the larger rungs scale.stop_if stopped");
    }
  }
  spdlog::info("e{}: scale.stop_if after rungs 0-{}: {} run(s) skipped, {} released", experiment_id,
               settings.stop_rungs - 1, skip.size(), released);
}

}  // namespace tae::controller
