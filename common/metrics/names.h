#pragma once

// The metric names tae-train writes and taed, taectl and the report read back: one spelling.
// The torch engine (agent/python/tae_torch/engine.py) writes the same names.

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace tae::metrics {

inline constexpr char kTrainLoss[] = "train/loss";
inline constexpr char kEvalLoss[] = "eval/loss";
inline constexpr char kEvalAcc[] = "eval/acc";
inline constexpr char kStepMs[] = "perf/step_ms";
inline constexpr char kTokensPerS[] = "perf/tokens_per_s";

// The metrics tae-train (and the torch engine) report while training: every train.log_every
// steps (train/*, perf/*) and every train.eval_every steps and at the last (eval/*). Only these
// can judge a run before it ends (an asha [search]); the compression columns below come after
// the last step.
inline const std::vector<std::string>& TrainingMetrics() {
  static const auto* const names = new std::vector<std::string>{
      kEvalLoss,  kEvalAcc,          "eval/seq_acc", "eval/ppl", kTrainLoss,
      "train/lr", "train/grad_norm", kTokensPerS,    kStepMs,    "perf/peak_rss_mb"};
  return *names;
}

// Which way a metric nobody gave a goal for is better: larger for accuracies and throughput,
// smaller for the rest (losses, times). [report] goal and [search] goal override it.
inline bool LargerIsBetterByDefault(const std::string& metric) {
  return metric.find("acc") != std::string::npos || metric == kTokensPerS;
}

// Compression columns tae-train adds after training (docs/engine.md "Compression"), in the order
// a report shows them after eval/loss and eval/acc: prune<pct>/eval/{loss,acc} by fraction, then
// the int8 model's loss, accuracy, weight bytes and eval speed beside fp32's.
inline std::vector<std::string> CompressionMetrics(const std::vector<std::string>& present) {
  std::vector<std::pair<double, std::string>> pruned;
  for (const std::string& name : present) {
    const size_t slash = name.find('/');
    if (name.rfind("prune", 0) == 0 && slash != std::string::npos && slash > 5 &&
        (name.compare(slash, std::string::npos, "/eval/loss") == 0 ||
         name.compare(slash, std::string::npos, "/eval/acc") == 0)) {
      const double pct = std::strtod(name.substr(5, slash - 5).c_str(), nullptr);
      pruned.emplace_back(pct + (name.back() == 'c' ? 0.5e-9 : 0.0), name);
    }
  }
  std::sort(pruned.begin(), pruned.end());
  std::vector<std::string> out;
  for (auto& [pct, name] : pruned) {
    out.push_back(std::move(name));
  }
  for (const char* name : {"quant/eval/loss", "quant/eval/acc", "model/linear_bytes",
                           "quant/linear_bytes", "eval/tokens_per_s", "quant/eval/tokens_per_s"}) {
    if (std::find(present.begin(), present.end(), name) != present.end()) {
      out.push_back(name);
    }
  }
  return out;
}

// What a report or plot shows when nobody named a metric: eval/loss and eval/acc when the runs
// have either (tae-train's; with the compression columns they have), else the runs' own metrics (a
// script's "Loss", "val/acc") in name order, at most `limit`, leaving out what TAE measures about
// every run (perf/, model/, sys/, heads/). Empty when the runs have none of their own.
inline std::vector<std::string> DefaultMetrics(std::vector<std::string> present, size_t limit = 4) {
  std::sort(present.begin(), present.end());
  present.erase(std::unique(present.begin(), present.end()), present.end());
  if (std::binary_search(present.begin(), present.end(), kEvalLoss) ||
      std::binary_search(present.begin(), present.end(), kEvalAcc)) {
    std::vector<std::string> out = {kEvalLoss, kEvalAcc};
    for (std::string& name : CompressionMetrics(present)) {
      out.push_back(std::move(name));
    }
    return out;
  }
  std::vector<std::string> own;
  for (const std::string& name : present) {
    const bool measured = name.rfind("perf/", 0) == 0 || name.rfind("model/", 0) == 0 ||
                          name.rfind("sys/", 0) == 0 || name.rfind("heads/", 0) == 0 ||
                          name.rfind("prune/", 0) == 0;
    if (!measured && own.size() < limit) {
      own.push_back(name);
    }
  }
  return own;
}

}  // namespace tae::metrics
