#include "server/store/rows.h"

#include "nlohmann/json.hpp"

namespace tae::store::rows {

std::string LabelsToJson(const model::Labels& labels) { return nlohmann::json(labels).dump(); }

model::Labels LabelsFromJson(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  model::Labels labels;
  if (doc.is_object()) {
    for (const auto& [key, value] : doc.items()) {
      labels[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  }
  return labels;
}

std::string ReportToJson(const model::ExperimentReport& report) {
  nlohmann::json doc = {{"metrics", report.metrics}, {"goal", report.goal}};
  if (!report.floor.empty()) {
    doc["floor"] = report.floor;
  }
  if (report.correction != "holm") {
    doc["correction"] = report.correction;
  }
  if (report.pairing != "none") {
    doc["pairing"] = report.pairing;
  }
  if (report.search.declared) {
    doc["search"] = {{"method", report.search.method},       {"metric", report.search.metric},
                     {"goal", report.search.goal},           {"min_steps", report.search.min_steps},
                     {"reduction", report.search.reduction}, {"within", report.search.within},
                     {"bootstrap", report.search.bootstrap}};
    if (report.search.confirm > 0) {
      doc["search"]["confirm"] = report.search.confirm;
    }
  }
  if (report.scale.declared()) {
    doc["scale"] = {{"rungs", report.scale.rungs},
                    {"params", report.scale.params},
                    {"stop_rungs", report.scale.stop_rungs},
                    {"stop_band", report.scale.stop_band}};
  }
  if (report.min_seeds > 0) {
    doc["seeds"] = {{"min", report.min_seeds},
                    {"max", report.max_seeds},
                    {"alpha", report.alpha},
                    {"margin", report.margin}};
  }
  return doc.dump();
}

model::ExperimentReport ReportFromJson(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  model::ExperimentReport report;
  if (!doc.is_object()) {
    return report;
  }
  if (auto it = doc.find("metrics"); it != doc.end() && it->is_array()) {
    for (const nlohmann::json& name : *it) {
      if (name.is_string()) {
        report.metrics.push_back(name.get<std::string>());
      }
    }
  }
  if (auto it = doc.find("goal"); it != doc.end() && it->is_object()) {
    for (const auto& [name, goal] : it->items()) {
      if (goal == "min" || goal == "max") {
        report.goal[name] = goal.get<std::string>();
      }
    }
  }
  if (auto it = doc.find("floor"); it != doc.end() && it->is_object()) {
    for (const auto& [name, level] : it->items()) {
      if (level.is_number()) {
        report.floor[name] = level.get<double>();
      }
    }
  }
  if (auto it = doc.find("correction"); it != doc.end() && it->is_string()) {
    report.correction = it->get<std::string>();
  }
  if (auto it = doc.find("pairing"); it != doc.end() && it->is_string()) {
    report.pairing = it->get<std::string>();
  }
  if (auto it = doc.find("seeds"); it != doc.end() && it->is_object()) {
    report.min_seeds = it->value("min", 0);
    report.max_seeds = it->value("max", 0);
    report.alpha = it->value("alpha", 0.05);
    if (auto margin = it->find("margin"); margin != it->end() && margin->is_object()) {
      for (const auto& [name, value] : margin->items()) {
        if (value.is_number()) {
          report.margin[name] = value.get<double>();
        }
      }
    }
  }
  if (auto it = doc.find("scale"); it != doc.end() && it->is_object()) {
    model::ScaleSettings& scale = report.scale;
    if (auto rungs = it->find("rungs"); rungs != it->end() && rungs->is_array()) {
      for (const nlohmann::json& rung : *rungs) {
        scale.rungs.push_back(rung.is_string() ? rung.get<std::string>() : rung.dump());
      }
    }
    if (auto params = it->find("params"); params != it->end() && params->is_array()) {
      for (const nlohmann::json& n : *params) {
        if (n.is_number()) {
          scale.params.push_back(n.get<double>());
        }
      }
    }
    if (scale.params.size() != scale.rungs.size()) {
      scale.params.clear();
    }
    scale.stop_rungs = it->value("stop_rungs", 0);
    scale.stop_band = it->value("stop_band", 0.0);
  }
  if (auto it = doc.find("search"); it != doc.end() && it->is_object()) {
    model::SearchSettings& s = report.search;
    s.declared = true;
    s.method = it->value("method", s.method);
    s.metric = it->value("metric", s.metric);
    s.goal = it->value("goal", s.goal);
    s.min_steps = it->value("min_steps", s.min_steps);
    s.reduction = it->value("reduction", s.reduction);
    s.bootstrap = it->value("bootstrap", s.bootstrap);
    s.within = it->value("within", s.within);
    s.confirm = it->value("confirm", s.confirm);
  }
  return report;
}

model::ExperimentRecord ReadExperiment(const Statement& stmt) {
  model::ExperimentRecord exp;
  exp.id = stmt.Int(0);
  exp.name = stmt.Text(1);
  exp.description = stmt.Text(2);
  exp.spec_hash = stmt.Text(3);
  exp.spec_path = stmt.Text(4);
  exp.created_at = stmt.Double(5);
  exp.paused = stmt.Int(6) != 0;
  exp.report = ReportFromJson(stmt.Text(7));
  return exp;
}

const char* const kRunColumns =
    "id, experiment_id, variant, seed, config, state, attempt, max_attempts, priority, slots, "
    "labels, COALESCE(agent_id, ''), pid, exit_code, reason, created_at, started_at, finished_at, "
    "meta, not_before, max_concurrent, hosts, COALESCE(snapshot_id, ''), command, "
    "attempts_granted, keep_checkpoints, infra_faults, retry_on, start_fault, start_faults, "
    "confirm, max_disk, gang_failure, gang_failure_code, gang_failure_at";

model::RunRecord ReadRun(const Statement& stmt) {
  model::RunRecord run;
  run.id = stmt.Int(0);
  run.experiment_id = stmt.Int(1);
  run.variant = stmt.Text(2);
  run.seed = stmt.Int(3);
  run.config_json = stmt.Text(4);
  run.state = model::RunStateFromString(stmt.Text(5)).value_or(model::RunState::kFailed);
  run.attempt = static_cast<int>(stmt.Int(6));
  run.max_attempts = static_cast<int>(stmt.Int(7));
  run.priority = static_cast<int>(stmt.Int(8));
  run.slots = static_cast<int>(stmt.Int(9));
  run.labels = LabelsFromJson(stmt.Text(10));
  run.agent_id = stmt.Text(11);
  run.pid = stmt.Int(12);
  if (!stmt.IsNull(13)) {
    run.exit_code = static_cast<int>(stmt.Int(13));
  }
  run.reason = stmt.Text(14);
  run.created_at = stmt.Double(15);
  run.started_at = stmt.OptionalDouble(16);
  run.finished_at = stmt.OptionalDouble(17);
  run.meta = LabelsFromJson(stmt.Text(18));  // the same shape: a JSON object of strings
  run.not_before = stmt.Double(19);
  run.max_concurrent = static_cast<int>(stmt.Int(20));
  run.hosts = static_cast<int>(stmt.Int(21));
  run.snapshot_id = stmt.Text(22);
  run.command = stmt.Text(23);
  run.attempts_granted = static_cast<int>(stmt.Int(24));
  run.keep_checkpoints = static_cast<int>(stmt.Int(25));
  run.infra_faults = static_cast<int>(stmt.Int(26));
  run.retry_on = stmt.Text(27);
  run.start_fault = stmt.Text(28);
  run.start_faults = static_cast<int>(stmt.Int(29));
  run.confirm = stmt.Int(30) != 0;
  run.max_disk = stmt.Int(31);
  run.gang_failure = stmt.Text(32);
  run.gang_failure_code = static_cast<int>(stmt.Int(33));
  run.gang_failure_at = stmt.Double(34);
  return run;
}

void AddToCounts(model::RunState state, int n, model::RunCounts* counts) {
  counts->total += n;
  switch (state) {
    case model::RunState::kQueued:
      counts->queued += n;
      break;
    case model::RunState::kAssigned:
    case model::RunState::kRunning:
      counts->running += n;
      break;
    case model::RunState::kSucceeded:
      counts->succeeded += n;
      break;
    case model::RunState::kFailed:
      counts->failed += n;
      break;
    case model::RunState::kCancelled:
      counts->cancelled += n;
      break;
    case model::RunState::kLost:
      counts->lost += n;
      break;
    case model::RunState::kPruned:
      counts->pruned += n;
      break;
  }
}

}  // namespace tae::store::rows
