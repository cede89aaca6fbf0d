#pragma once

// Checkpoints of a tae-train run (docs/engine.md "Checkpoints and exact resume"): model and
// optimiser state, the torch RNG, the task's data-stream position and the trainer's counters, in
// one file `checkpoint.pt` of a directory, replaced atomically (write, fsync, rename). A run that
// finds a checkpoint of the same config resumes at the next step and produces the same losses as
// if it had never stopped (same thread count).

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tae::train {

// Training statistics since the last train/loss line.
struct TrainWindow {
  double loss_sum = 0.0;
  int64_t steps = 0;
  double grad_norm = 0.0;  // of the latest step
  double lr = 0.0;         // of the latest step
  double seconds = 0.0;
  int64_t tokens = 0;
};

// Everything besides the model and the optimiser.
struct TrainerState {
  int64_t step = 0;         // the last completed step
  std::string fingerprint;  // the config the checkpoint belongs to
  std::string task_stream;  // Task::SaveStreamState()
  torch::Tensor rng_state;  // the default CPU generator's state
  TrainWindow window;
  double first_train_loss = 0.0;
  double last_train_loss = 0.0;
};

// The file a checkpoint directory holds.
std::string CheckpointPath(const std::string& dir);

// Writes the checkpoint into `dir` (created if missing), replacing any previous one only once the
// new one is complete on disk.
absl::Status SaveCheckpoint(const std::string& dir, const TrainerState& state,
                            torch::nn::Module& model, torch::optim::Optimizer& optimizer);

// Loads `dir`'s checkpoint into `model` and `optimizer` and returns its state; nullopt when there
// is none. A checkpoint of another config (fingerprint differs) is FailedPrecondition before
// anything is loaded; an unreadable one is DataLoss and may leave the model half-loaded (the run
// must fail, not train on).
absl::StatusOr<std::optional<TrainerState>> LoadCheckpoint(const std::string& dir,
                                                           const std::string& fingerprint,
                                                           torch::nn::Module& model,
                                                           torch::optim::Optimizer& optimizer);

}  // namespace tae::train
