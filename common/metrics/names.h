#pragma once

// The metric names tae-train writes and taed, taectl and the report read back: one spelling.
// The torch engine (agent/python/tae_torch/engine.py) writes the same names.

#include <algorithm>
#include <string>
#include <vector>

namespace tae::metrics {

inline constexpr char kTrainLoss[] = "train/loss";
inline constexpr char kEvalLoss[] = "eval/loss";
inline constexpr char kEvalAcc[] = "eval/acc";
inline constexpr char kStepMs[] = "perf/step_ms";
inline constexpr char kTokensPerS[] = "perf/tokens_per_s";

// What a report or plot shows when nobody named a metric: eval/loss and eval/acc when the runs
// have either (tae-train's), else the runs' own metrics (a script's "Loss", "val/acc") in name
// order, at most `limit`, leaving out what TAE measures about every run (perf/, model/, sys/,
// heads/). Empty when the runs have none of their own.
inline std::vector<std::string> DefaultMetrics(std::vector<std::string> present, size_t limit = 4) {
  std::sort(present.begin(), present.end());
  present.erase(std::unique(present.begin(), present.end()), present.end());
  if (std::binary_search(present.begin(), present.end(), kEvalLoss) ||
      std::binary_search(present.begin(), present.end(), kEvalAcc)) {
    return {kEvalLoss, kEvalAcc};
  }
  std::vector<std::string> own;
  for (const std::string& name : present) {
    const bool measured = name.rfind("perf/", 0) == 0 || name.rfind("model/", 0) == 0 ||
                          name.rfind("sys/", 0) == 0 || name.rfind("heads/", 0) == 0;
    if (!measured && own.size() < limit) {
      own.push_back(name);
    }
  }
  return own;
}

}  // namespace tae::metrics
