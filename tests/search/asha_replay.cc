// Test-only: replays recorded metric reports through server/search's GridSearch and prints its
// decisions, for tests/search/asha_oracle_test.py to compare with Optuna's pruner.
//
// stdin, JSON lines, any number of studies one after another:
//   {"study": {"metric": "m", "min_steps": 10, "reduction": 3, "maximize": false,
//              "bootstrap": 1, "train_steps": 90, "within": "variant" | "study",
//              "runs": [[run_id, "variant[x=1]"], ...], "restart_every": 0}}
//   {"run": 7, "step": 30, "value": 1.25}      a metric point (value null: NaN)
//   {"end": 7, "last_step": 90, "failed": false} the run reached a final state
//   {"done": true}                              the study is over
// stdout, one JSON line per decision: {"event": i (0-based, within the study), "verdict",
// "point", "group", "rung", "step", "value" (null for NaN, "inf" and "-inf" for a worst value),
// "seeds", "reason"}, then {"done": true} per
// study. With restart_every = N > 0, after every N events the search is rebuilt as a restarted
// taed would (asha.h): Restore(the decisions so far), then every event so far replayed, metric
// points first, then ends; a decision that replay makes, or a failed Restore, is printed as
// {"error": "..."}.
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/search/asha.h"

namespace {

using tae::search::Decision;
using tae::search::GridSearch;

struct Study {
  tae::search::AshaRule rule;
  tae::spec::SearchWithin within = tae::spec::SearchWithin::kVariant;
  std::vector<tae::search::SearchRun> runs;
  int restart_every = 0;
  std::vector<nlohmann::json> events;
  std::vector<Decision> decisions;
  std::optional<GridSearch> search;
};

nlohmann::json Number(double value) {
  if (std::isnan(value)) {
    return nullptr;
  }
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  return value;
}

void Print(size_t event, const Decision& d) {
  std::cout << nlohmann::json{{"event", event},
                              {"verdict", tae::search::VerdictName(d.verdict)},
                              {"point", d.point},
                              {"group", d.group},
                              {"rung", d.rung},
                              {"step", d.step},
                              {"value", Number(d.value)},
                              {"seeds", d.seeds},
                              {"reason", d.reason}}
                   .dump()
            << "\n";
}

std::vector<Decision> Apply(GridSearch& search, const Study& study, const nlohmann::json& event) {
  if (event.contains("run")) {
    const nlohmann::json& value = event.at("value");
    return search.Observe(event.at("run").get<int64_t>(), study.rule.metric,
                          event.at("step").get<int64_t>(),
                          value.is_null() ? std::nan("") : value.get<double>());
  }
  return search.Ended(event.at("end").get<int64_t>(), event.at("last_step").get<int64_t>(),
                      event.value("failed", false));
}

void Restart(Study& study) {
  study.search.emplace(study.rule, study.within, study.runs);
  if (absl::Status status = study.search->Restore(study.decisions); !status.ok()) {
    std::cout << nlohmann::json{{"error", status.ToString()}}.dump() << "\n";
  }
  for (bool ends : {false, true}) {
    for (const nlohmann::json& event : study.events) {
      if (event.contains("end") != ends) {
        continue;
      }
      for (const Decision& d : Apply(*study.search, study, event)) {
        std::cout << nlohmann::json{{"error", "the replay after a restart decided: " + d.point +
                                                  " " + d.reason}}
                         .dump()
                  << "\n";
      }
    }
  }
}

}  // namespace

int main() {
  std::optional<Study> study;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) {
      continue;
    }
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event.contains("study")) {
      const nlohmann::json& s = event.at("study");
      study.emplace();
      study->rule.metric = s.at("metric").get<std::string>();
      study->rule.min_steps = s.at("min_steps").get<int64_t>();
      study->rule.reduction = s.at("reduction").get<int64_t>();
      study->rule.maximize = s.at("maximize").get<bool>();
      study->rule.bootstrap = s.value("bootstrap", 1);
      study->within = s.at("within") == "study" ? tae::spec::SearchWithin::kStudy
                                                : tae::spec::SearchWithin::kVariant;
      for (const nlohmann::json& run : s.at("runs")) {
        study->runs.push_back({run.at(0).get<int64_t>(), run.at(1).get<std::string>(),
                               s.value("train_steps", int64_t{0})});
      }
      study->restart_every = s.value("restart_every", 0);
      study->search.emplace(study->rule, study->within, study->runs);
      continue;
    }
    if (event.contains("done")) {
      std::cout << "{\"done\": true}\n" << std::flush;
      study.reset();
      continue;
    }
    const size_t index = study->events.size();
    study->events.push_back(event);
    for (Decision& d : Apply(*study->search, *study, event)) {
      Print(index, d);
      study->decisions.push_back(std::move(d));
    }
    if (study->restart_every > 0 && study->events.size() % study->restart_every == 0) {
      Restart(*study);
    }
  }
  return 0;
}
