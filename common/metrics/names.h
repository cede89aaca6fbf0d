#pragma once

// The metric names tae-train writes and taed, taectl and the report read back: one spelling.
// The torch engine (agent/python/tae_torch/engine.py) writes the same names.

namespace tae::metrics {

inline constexpr char kTrainLoss[] = "train/loss";
inline constexpr char kEvalLoss[] = "eval/loss";
inline constexpr char kEvalAcc[] = "eval/acc";
inline constexpr char kStepMs[] = "perf/step_ms";
inline constexpr char kTokensPerS[] = "perf/tokens_per_s";

}  // namespace tae::metrics
