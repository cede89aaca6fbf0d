#pragma once

// Byte-level language modelling: the first 90% of the text's bytes are the training split, the
// last 10% the eval split; every row is a random window of seq_len + 1 bytes and every position
// is scored (vocabulary 256).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/train/tasks.h"

namespace tae::train {

class LmTask : public Task {
 public:
  static constexpr int64_t kVocab = 256;

  // Fails when either split is shorter than seq_len + 1 bytes.
  static absl::StatusOr<std::unique_ptr<LmTask>> Create(std::string text, int64_t seq_len,
                                                        int64_t batch_size, int64_t eval_batches,
                                                        uint64_t seed);

  int64_t VocabSize() const override { return kVocab; }
  double ChanceAccuracy() const override { return 1.0 / kVocab; }
  Batch NextTrainBatch() override;
  const std::vector<Batch>& EvalBatches() const override { return eval_; }
  std::string SaveStreamState() const override { return train_rng_.Save(); }
  absl::Status RestoreStreamState(const std::string& state) override {
    return train_rng_.Restore(state);
  }

  int64_t train_end() const { return train_end_; }

 private:
  LmTask(std::string text, int64_t seq_len, int64_t batch_size, uint64_t seed);
  // Windows start uniformly in [begin, end - seq_len - 1].
  Batch Windows(TaskRng& rng, int64_t begin, int64_t end) const;

  std::string text_;
  int64_t seq_len_;
  int64_t batch_size_;
  int64_t train_end_;
  TaskRng train_rng_;
  std::vector<Batch> eval_;
};

}  // namespace tae::train
