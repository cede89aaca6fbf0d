#pragma once

// The training loop of one run: builds the model and optimiser, trains for train.steps steps
// with the lr schedule and grad clipping, evaluates every train.eval_every steps and at the end
// (under NoGradGuard, model in eval mode), and reports metric lines plus human progress lines.

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "agent/train/checkpoint.h"
#include "agent/train/config.h"
#include "agent/train/distributed.h"
#include "agent/train/head_importance.h"
#include "agent/train/metrics_sink.h"
#include "agent/train/model.h"
#include "agent/train/profiler.h"
#include "agent/train/step_record.h"
#include "agent/train/tasks.h"

namespace tae::train {

class FusedAdamW;

struct EvalResult {
  double loss = std::numeric_limits<double>::quiet_NaN();  // mean CE over scored positions
  double accuracy = 0.0;                                   // token accuracy over scored positions
  double sequence_accuracy = 0.0;  // rows whose scored positions are all right
};

struct TrainSummary {
  int64_t params = 0;
  int64_t resumed_from = 0;  // the checkpoint step the run resumed after; 0: a fresh start
  bool interrupted = false;  // stopped early by TrainerOptions::stop (a checkpoint was written)
  double first_train_loss = std::numeric_limits<double>::quiet_NaN();  // mean of the first log
  double last_train_loss = std::numeric_limits<double>::quiet_NaN();   // mean of the last log
  EvalResult final_eval;
};

// Mean cross entropy over the positions where mask is 1. logits [B, T, V], targets/mask [B, T].
torch::Tensor MaskedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                 const torch::Tensor& mask);

struct TrainerOptions {
  // Where checkpoints go (train.checkpoint_every, and always at the end); "": no checkpoints and
  // no resume.
  std::string checkpoint_dir;
  // Identifies the config a checkpoint belongs to (a checkpoint of another config is refused).
  std::string fingerprint;
  // Asked after every step but the last; when it answers true (e.g. after SIGTERM), the run
  // checkpoints after that step and returns with TrainSummary::interrupted.
  // In a data-parallel run (world size > 1) only every train.log_every steps and at the last
  // step, where the ranks agree: the run stops when any rank's answer is true.
  std::function<bool(int64_t step)> should_stop;
  // The process group of a data-parallel run (must outlive the trainer); nullptr: a single
  // process. Every rank draws the same global batch of train.batch_size rows and trains on its
  // slice; the gradients are summed over the ranks so that every rank applies the update of the
  // whole batch. Only rank 0 resumes, evaluates, reports metrics and writes checkpoints.
  Collective* collective = nullptr;
  // Records the initial weights and every step's batch, loss, grad norm and weights (tae-train
  // --record-steps); nullptr: none. Single-process runs only.
  StepRecorder* step_record = nullptr;
  // Profiles on demand and at train.profile_at (docs/profiles.md); nullptr: none. Rank 0 only.
  StepProfiler* profiler = nullptr;
};

class Trainer {
 public:
  static constexpr int64_t kTrainLogEvery = 10;

  // `task` and `sink` must outlive the trainer; `progress` may be nullptr (no human output).
  Trainer(const TrainConfig& config, Task* task, MetricsSink* sink, std::ostream* progress,
          TrainerOptions options = {});

  // Trains and evaluates; libtorch exceptions come back as Internal, a lost metrics fd as
  // Unavailable.
  absl::StatusOr<TrainSummary> Run();

  // Evaluates `model` on the task's eval batches (NoGradGuard, eval mode, then back to train).
  static EvalResult Evaluate(TransformerLM& model, const Task& task);

 private:
  absl::StatusOr<TrainSummary> RunOrThrow();
  absl::Status ReportModel(TransformerLM& model, const TrainSummary& summary);
  // Resumes from options_.checkpoint_dir if it holds a checkpoint; returns the next step to run.
  absl::StatusOr<int64_t> Resume(TransformerLM& model, torch::optim::Optimizer& optimizer,
                                 TrainWindow* window, TrainSummary* summary);
  absl::Status Checkpoint(TransformerLM& model, torch::optim::Optimizer& optimizer, int64_t step,
                          const TrainWindow& window, const TrainSummary& summary);
  double TrainStep(TransformerLM& model, torch::optim::Optimizer& optimizer, int64_t step,
                   const Batch& batch, double* grad_norm);
  absl::Status ReportTrain(int64_t step, TrainWindow* window, TrainSummary* summary);
  absl::Status ReportEval(TransformerLM& model, int64_t step, const TrainSummary& summary,
                          EvalResult* result);
  absl::Status ReportHeads(const HeadScores& scores, int64_t step);
  // eval.prune_heads_by_importance and eval.quantize (compression.h), after training.
  absl::Status ReportPruning(TransformerLM& model, const HeadScores& scores,
                             const EvalResult& unpruned);
  absl::Status ReportQuantized(TransformerLM& model);
  // Rank 0 of a data-parallel run or a single process: the one that reports and checkpoints.
  bool Primary() const;
  // Data-parallel start: rank 0's first step, optimiser state, data position and parameters on
  // every rank. Returns the first step.
  int64_t SyncStart(TransformerLM& model, torch::optim::Optimizer& optimizer, int64_t first_step);
  // Sums the gradients over the ranks (one flat buffer with FusedAdamW).
  void AllReduceGradients(TransformerLM& model, FusedAdamW* fused);
  // Sums the window's train loss over the ranks; returns whether any rank asked to stop.
  bool SyncWindow(int64_t step, TrainWindow* window);

  TrainConfig config_;
  Task* task_;
  MetricsSink* sink_;
  std::ostream* progress_;
  TrainerOptions options_;
  double last_tokens_per_s_ = 0.0;
  double allreduce_seconds_ = 0.0;  // gradient all-reduce time in the current log window
};

// The process's peak resident set size in MiB (getrusage).
double PeakRssMb();

// The optimiser of train.optimizer; weight decay applies to matrices only (not biases / gains).
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainingConfig& config,
                                                       TransformerLM& model);

}  // namespace tae::train
