// Controller: [search] method = "asha". server/search decides which grid points stop; this feeds
// it the stored metric points and run ends, and stores each decision with its effect.

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/controller/controller.h"
#include "server/lifecycle/lifecycle.h"
#include "spdlog/spdlog.h"

namespace tae::controller {
namespace {

search::AshaRule RuleOf(const model::SearchSettings& s) {
  search::AshaRule rule;
  rule.metric = s.metric;
  rule.maximize = s.goal == "max";
  rule.min_steps = s.min_steps;
  rule.reduction = s.reduction;
  rule.bootstrap = s.bootstrap;
  return rule;
}

model::SearchDecisionRecord ToRecord(const search::Decision& d, double at) {
  model::SearchDecisionRecord r;
  r.point = d.point;
  r.group = d.group;
  r.rung = d.rung;
  r.step = d.step;
  if (d.verdict != search::Verdict::kNoData && !std::isnan(d.value)) {
    r.value = d.value;  // +-inf: a worst value (a seed diverged or failed)
  }
  r.seeds = d.seeds;
  r.verdict = search::VerdictName(d.verdict);
  r.rank = d.rank;
  r.competitors = d.competitors;
  r.keeps = d.keeps;
  r.reason = d.reason;
  r.at = at;
  return r;
}

search::Decision FromRecord(const model::SearchDecisionRecord& r) {
  search::Decision d;
  d.verdict = r.verdict == "prune"    ? search::Verdict::kPrune
              : r.verdict == "nodata" ? search::Verdict::kNoData
              : r.verdict == "wait"   ? search::Verdict::kWait
                                      : search::Verdict::kKeep;
  d.point = r.point;
  d.group = r.group;
  d.rung = r.rung;
  d.step = r.step;
  d.value = r.value.value_or(std::nan(""));
  d.seeds = r.seeds;
  d.rank = r.rank;
  d.competitors = r.competitors;
  d.keeps = r.keeps;
  d.reason = r.reason;
  return d;
}

}  // namespace

void Controller::RunFinal(int64_t run_id, int64_t experiment_id) {
  SeedsDue(experiment_id);
  ladders_due_.insert(experiment_id);
  EndSearchRun(run_id);
}

void Controller::StartSearch(int64_t experiment_id, bool replay) {
  absl::StatusOr<model::ExperimentSource> source = store_->GetExperimentSource(experiment_id);
  if (!source.ok() || !source->report.search.asha()) {
    Noted(source.status(), "read an experiment's [search]");
    return;
  }
  const model::SearchSettings& settings = source->report.search;
  absl::StatusOr<std::vector<model::RunRecord>> runs = store_->ListRuns(experiment_id);
  if (!runs.ok()) {
    Noted(runs.status(), "read an experiment's runs for its search");
    return;
  }
  // Confirmation runs (search.confirm) come after the search and are none of its points' seeds.
  runs->erase(std::remove_if(runs->begin(), runs->end(),
                             [](const model::RunRecord& run) { return run.confirm; }),
              runs->end());
  std::vector<search::SearchRun> searched;
  for (const model::RunRecord& run : *runs) {
    searched.push_back({run.id, run.variant, model::TrainSteps(run.config_json).value_or(0)});
  }
  ActiveSearch active;
  active.metric = settings.metric;
  active.search = std::make_unique<search::GridSearch>(
      RuleOf(settings),
      settings.within == "study" ? spec::SearchWithin::kStudy : spec::SearchWithin::kVariant,
      std::move(searched));
  std::vector<search::Decision> fresh;
  if (replay) {
    absl::StatusOr<std::vector<model::SearchDecisionRecord>> stored =
        store_->SearchDecisions(experiment_id);
    absl::StatusOr<std::vector<model::RunPoint>> points =
        stored.ok() ? store_->MetricPoints(experiment_id, settings.metric)
                    : absl::StatusOr<std::vector<model::RunPoint>>(stored.status());
    if (!points.ok()) {
      Noted(points.status(), "read a search's decisions and points");
      return;
    }
    std::vector<search::Decision> decisions;
    for (const model::SearchDecisionRecord& record : *stored) {
      decisions.push_back(FromRecord(record));
    }
    if (absl::Status restored = active.search->Restore(decisions); !restored.ok()) {
      // Never a silent new decision: its runs go on as a grid's would.
      spdlog::error("e{}: its [search] cannot resume ({}); no more of its points are stopped",
                    experiment_id, restored.ToString());
      return;
    }
    std::set<int64_t> searched_ids;
    for (const model::RunRecord& run : *runs) {
      searched_ids.insert(run.id);
    }
    for (const model::RunPoint& point : *points) {
      if (searched_ids.count(point.run_id) == 0) {
        continue;  // a confirmation run's
      }
      int64_t& last = active.last_step[point.run_id];
      last = std::max(last, point.step);
      for (search::Decision& d :
           active.search->Observe(point.run_id, settings.metric, point.step, point.value)) {
        fresh.push_back(std::move(d));
      }
    }
    for (const model::RunRecord& run : *runs) {
      if (model::IsFinal(run.state)) {
        for (search::Decision& d : active.search->Ended(run.id, active.last_step[run.id],
                                                        run.state == model::RunState::kFailed)) {
          fresh.push_back(std::move(d));
        }
      }
    }
    spdlog::info("e{}: its [search] resumed from {} decisions and {} points", experiment_id,
                 decisions.size(), points->size());
  }
  for (const model::RunRecord& run : *runs) {
    search_of_run_[run.id] = experiment_id;
  }
  searches_[experiment_id] = std::move(active);
  ApplySearch(experiment_id, std::move(fresh));
}

void Controller::ObserveSearch(const std::vector<model::IngestEvent>& events) {
  if (searches_.empty()) {
    return;
  }
  std::map<int64_t, std::vector<search::Decision>> decided;
  for (const model::IngestEvent& event : events) {
    auto owner = search_of_run_.find(event.run_id);
    if (event.kind != model::IngestEvent::Kind::kMetrics || owner == search_of_run_.end()) {
      continue;
    }
    auto it = searches_.find(owner->second);
    if (it == searches_.end()) {
      continue;
    }
    ActiveSearch& active = it->second;
    for (const model::MetricValue& value : event.values) {
      if (value.key != active.metric) {
        continue;
      }
      int64_t& last = active.last_step[event.run_id];
      last = std::max(last, event.step);
      for (search::Decision& d :
           active.search->Observe(event.run_id, value.key, event.step, value.value)) {
        decided[owner->second].push_back(std::move(d));
      }
    }
  }
  for (auto& [experiment_id, decisions] : decided) {
    ApplySearch(experiment_id, std::move(decisions));
  }
}

void Controller::EndSearchRun(int64_t run_id) {
  auto owner = search_of_run_.find(run_id);
  if (owner == search_of_run_.end()) {
    return;
  }
  auto it = searches_.find(owner->second);
  if (it == searches_.end()) {
    return;
  }
  ActiveSearch& active = it->second;
  absl::StatusOr<model::RunRecord> run = store_->GetRun(run_id);
  Noted(run.status(), "read an ended run for its search");
  const bool failed = run.ok() && run->state == model::RunState::kFailed;
  ApplySearch(owner->second, active.search->Ended(run_id, active.last_step[run_id], failed));
}

void Controller::ApplySearch(int64_t experiment_id, std::vector<search::Decision> decisions) {
  auto it = searches_.find(experiment_id);
  if (it == searches_.end()) {
    return;
  }
  // A pruned point's runs end, and their ends may complete other decisions: until none is new.
  bool freed = false;
  while (!decisions.empty()) {
    const double now = Now();
    std::vector<model::SearchDecisionRecord> records;
    std::vector<std::pair<int64_t, model::Decide>> prune;
    std::vector<model::RunRecord> stop;  // on agents now
    for (const search::Decision& d : decisions) {
      if (d.verdict == search::Verdict::kIgnored) {
        continue;
      }
      records.push_back(ToRecord(d, now));
      if (d.verdict == search::Verdict::kNoData) {
        spdlog::info("e{}: {}: {}", experiment_id, d.point, d.reason);
        continue;
      }
      if (d.verdict != search::Verdict::kPrune) {
        continue;
      }
      spdlog::info("e{}: {} pruned: {}", experiment_id, d.point, d.reason);
      for (int64_t run_id : it->second.search->Runs(d.point)) {
        absl::StatusOr<model::RunRecord> run = store_->GetRun(run_id);
        if (!run.ok() || model::IsFinal(run->state)) {
          continue;
        }
        prune.emplace_back(run_id,
                           lifecycle::Finish(model::RunState::kPruned,
                                             absl::StrCat("pruned by [search]: ", d.reason), now));
        if (run->state == model::RunState::kAssigned || run->state == model::RunState::kRunning) {
          stop.push_back(*run);
        }
      }
    }
    if (records.empty()) {
      break;
    }
    if (absl::Status s = store_->RecordSearch(experiment_id, records, prune); !s.ok()) {
      Noted(s, "store a search's decisions");
      break;  // a restart replays the points and decides them again
    }
    freed = freed || !prune.empty();
    if (!prune.empty()) {
      SeedsDue(experiment_id);  // the pruned runs may have been the search's last (search.confirm)
    }
    for (const model::RunRecord& run : stop) {
      const std::vector<std::string> agents = AgentsOfRun(run);
      StopRanks(run.id, run.attempt, agents, "", "pruned by [search]");
      Release(run.id, agents);  // its end is stored: the agent's exit report changes nothing
    }
    decisions.clear();
    for (const auto& [run_id, decide] : prune) {
      for (search::Decision& d : it->second.search->Ended(run_id, it->second.last_step[run_id])) {
        decisions.push_back(std::move(d));
      }
    }
  }
  if (freed) {
    Schedule();  // the pruned runs' slots (and their queued places) go to the next runs
  }
}

}  // namespace tae::controller
