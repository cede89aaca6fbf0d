#pragma once

// Compression evaluated after training, as more metric columns of the same run
// (docs/engine.md "Compression"):
//
//  - Head pruning by importance (Michel et al. 2019): the heads are ranked by their gradient
//    importance (head_importance.h; normalised within each layer, ranked across layers) and the
//    least important fraction f is masked (gated to 0, as the masked score does), for each f of
//    eval.prune_heads_by_importance. Emitted: prune/eval/loss and prune/eval/acc at step = heads
//    kept (one point per fraction plus the unpruned model: the curve taectl plot --pruning
//    draws), and prune<pct>/eval/loss, prune<pct>/eval/acc, prune<pct>/heads_kept at the final
//    step for the report's columns.
//
//  - int8 dynamic quantisation (eval.quantize = "int8-dynamic"): every nn.Linear's weight is
//    quantised to int8 per output channel, activations per tensor at run time, through libtorch's
//    quantized::linear_dynamic (the engine, qnnpack or onednn, is in the run's meta). Emitted:
//    quant/eval/loss, quant/eval/acc and their deltas against fp32, quant/linear_bytes and
//    fp32 linear_bytes, and eval tokens/s of both.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/train/head_importance.h"
#include "agent/train/model.h"
#include "agent/train/tasks.h"

namespace tae::train {

struct EvalPoint {
  double loss = 0;
  double accuracy = 0;
};

struct PrunePoint {
  double fraction = 0;  // asked for
  int64_t heads_total = 0;
  int64_t heads_kept = 0;
  EvalPoint eval;
};

// The heads (layer, head) ranked least important first by `scores.gradient` (ties: by masked
// loss delta, then index).
std::vector<std::pair<int64_t, int64_t>> RankHeads(const HeadScores& scores);

// Evaluates `model` with the least important round(f * heads) heads masked, for each fraction.
// Leaves the model's gates cleared.
std::vector<PrunePoint> PruneByImportance(TransformerLM& model, const Task& task, int64_t heads,
                                          const HeadScores& scores,
                                          const std::vector<double>& fractions);

struct QuantResult {
  std::string engine;  // "qnnpack" | "onednn"
  EvalPoint fp32;
  EvalPoint int8;
  int64_t fp32_linear_bytes = 0;  // the quantised layers' weights as float32
  int64_t int8_linear_bytes = 0;  // as int8 plus per-channel scales and zero points
  double fp32_tokens_per_s = 0;   // eval forward passes, same batches, same threads
  double int8_tokens_per_s = 0;
};

// Evaluates `model` as is and with its linear layers quantised (see the header comment).
// FailedPrecondition when libtorch offers no quantized engine here.
absl::StatusOr<QuantResult> EvaluateInt8Dynamic(TransformerLM& model, const Task& task);

// The quantized engine this machine's libtorch offers ("qnnpack", "onednn"), or "" when none.
std::string QuantizedEngine();

}  // namespace tae::train
