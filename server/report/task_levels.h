#pragma once

// What a metric of a built-in tae-train task scores without learning what the task tests: chance
// (guessing uniformly among the possible answers) and the known shortcuts (docs/tasks.md, derived
// there from agent/train's row layouts). The report marks a cell sitting at one of them and puts a
// banner over a table whose baseline does: its deltas then cannot show the mechanism.
//
// Pure: a run's resolved config in, numbers out.

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tae::report {

struct Level {
  std::string kind;   // "chance", "shortcut" or "floor" (a user's [report] floor)
  double value = 0;   // in the metric's units
  std::string what;   // "the most-frequent-value shortcut"
  std::string hides;  // what a baseline at this level cannot show: "the lookup mechanism"
};

// The levels of `metric` ("eval/acc", "eval/loss") for a run of `config` (flat resolved keys:
// train.task, train.vocab, train.seq_len, train.data, job.command). None for a custom command
// (job.command set), an unknown task or an unknown metric. Sorted by value.
std::vector<Level> TaskLevels(const nlohmann::json& config, const std::string& metric);

// E[max_v N_v] / K for (N_v) ~ Multinomial(K, uniform over `values` symbols): the accuracy of
// answering every query of an assoc_recall row with the row's most frequent value.
double MostFrequentShare(int64_t pairs, int64_t values);

// E[-log(N_a / K)] for the value a of a uniformly chosen pair of the same row: the loss (nats) of
// predicting the row's value frequencies without matching keys.
double FrequencyLoss(int64_t pairs, int64_t values);

}  // namespace tae::report
