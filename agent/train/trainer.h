#pragma once

// The training loop of one run: builds the model and optimiser, trains for train.steps steps
// with the lr schedule and grad clipping, evaluates every train.eval_every steps and at the end
// (under NoGradGuard, model in eval mode), and reports metric lines plus human progress lines.

#include <torch/torch.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>

#include "absl/status/statusor.h"
#include "agent/train/config.h"
#include "agent/train/metrics_sink.h"
#include "agent/train/model.h"
#include "agent/train/tasks.h"

namespace tae::train {

struct EvalResult {
  double loss = std::numeric_limits<double>::quiet_NaN();  // mean CE over scored positions
  double accuracy = 0.0;                                   // token accuracy over scored positions
  double sequence_accuracy = 0.0;  // rows whose scored positions are all right
};

struct TrainSummary {
  int64_t params = 0;
  double first_train_loss = std::numeric_limits<double>::quiet_NaN();  // mean of the first log
  double last_train_loss = std::numeric_limits<double>::quiet_NaN();   // mean of the last log
  EvalResult final_eval;
};

// Mean cross entropy over the positions where mask is 1. logits [B, T, V], targets/mask [B, T].
torch::Tensor MaskedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                 const torch::Tensor& mask);

class Trainer {
 public:
  static constexpr int64_t kTrainLogEvery = 10;

  // `task` and `sink` must outlive the trainer; `progress` may be nullptr (no human output).
  Trainer(const TrainConfig& config, Task* task, MetricsSink* sink, std::ostream* progress);

  // Trains and evaluates; libtorch exceptions come back as Internal, a lost metrics fd as
  // Unavailable.
  absl::StatusOr<TrainSummary> Run();

  // Evaluates `model` on the task's eval batches (NoGradGuard, eval mode, then back to train).
  static EvalResult Evaluate(TransformerLM& model, const Task& task);

 private:
  struct Window;  // training statistics since the last train/loss line

  absl::StatusOr<TrainSummary> RunOrThrow();
  double TrainStep(TransformerLM& model, torch::optim::Optimizer& optimizer, int64_t step,
                   double* grad_norm);
  absl::Status ReportTrain(int64_t step, Window* window, TrainSummary* summary);
  absl::Status ReportEval(TransformerLM& model, int64_t step, const TrainSummary& summary,
                          EvalResult* result);

  TrainConfig config_;
  Task* task_;
  MetricsSink* sink_;
  std::ostream* progress_;
  double last_tokens_per_s_ = 0.0;
};

// The optimiser of train.optimizer; weight decay applies to matrices only (not biases / gains).
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainingConfig& config,
                                                       TransformerLM& model);

}  // namespace tae::train
