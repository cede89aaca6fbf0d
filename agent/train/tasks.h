#pragma once

// Training tasks: each one is a deterministic stream of training batches (seeded from
// train.seed) plus a fixed held-out set of eval batches drawn from a different generator stream.
// See docs/tasks.md for what each task tests and which positions are scored.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/train/config.h"

namespace tae::train {

// One batch of next-token prediction: the model reads `inputs` and is scored on predicting
// `targets` at the positions where `mask` is 1.
struct Batch {
  torch::Tensor inputs;   // [batch, seq_len] int64
  torch::Tensor targets;  // [batch, seq_len] int64
  torch::Tensor mask;     // [batch, seq_len] float32, 1 = scored
};

class Task {
 public:
  virtual ~Task() = default;

  // Number of distinct tokens (the model's vocabulary, special tokens included).
  virtual int64_t VocabSize() const = 0;
  // Accuracy of uniform guessing on the scored positions.
  virtual double ChanceAccuracy() const = 0;
  // The next training batch of the seeded stream.
  virtual Batch NextTrainBatch() = 0;
  // The held-out evaluation set: train.eval_batches fixed batches.
  virtual const std::vector<Batch>& EvalBatches() const = 0;

  // The position of the training stream, for checkpoints: after RestoreStreamState(s) the next
  // NextTrainBatch() returns what it returned after SaveStreamState() gave s.
  virtual std::string SaveStreamState() const = 0;
  // Fails (InvalidArgument) on text that SaveStreamState of this task did not produce.
  virtual absl::Status RestoreStreamState(const std::string& state) = 0;
};

// Builds the task named by config.train.task (lm reads train.data or the cached KJV text; copy
// hides its answers from bidirectional models).
absl::StatusOr<std::unique_ptr<Task>> MakeTask(const TrainConfig& config);

// The data generator's random source: a 64-bit Mersenne Twister whose seed mixes train.seed with
// a stream id (train and eval streams never coincide). Draws are platform-independent.
class TaskRng {
 public:
  static constexpr uint64_t kTrainStream = 1;
  static constexpr uint64_t kEvalStream = 2;

  TaskRng(uint64_t seed, uint64_t stream);
  // Uniform in [0, n); n > 0.
  int64_t Below(int64_t n);

  // The engine's state as text (the standard's portable mt19937_64 serialisation) and back.
  std::string Save() const;
  absl::Status Restore(const std::string& state);

 private:
  std::mt19937_64 engine_;
};

}  // namespace tae::train
