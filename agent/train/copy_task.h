#pragma once

// Copy task: each row is  s_1 .. s_L  SEP  s_1 .. s_L  [PAD...]  with s_i uniform over
// train.vocab symbols and L = seq_len / 2, read as next-token prediction. Only the positions whose
// target is the second copy are scored, so a model that cannot look back L+1 positions is at
// chance (1 / vocab). For a bidirectional model (model.causal = false) the second copy is replaced
// by MASK in the inputs (the targets are unchanged): it would otherwise read its answers there.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/train/synthetic_task.h"
#include "agent/train/tasks.h"

namespace tae::train {

struct CopyLayout {
  int64_t copy_length;   // L
  int64_t separator;     // token id of SEP (= vocab)
  int64_t pad;           // token id of PAD (= vocab + 1)
  int64_t mask_token;    // token id of MASK (= vocab + 2)
  int64_t first_scored;  // first scored input position (= L, the SEP)
  int64_t last_scored;   // last scored input position (= 2L - 1)
};

CopyLayout MakeCopyLayout(int64_t vocab, int64_t seq_len);

class CopyTask : public Task {
 public:
  // Symbols 0..vocab-1, SEP, PAD, MASK; needs vocab >= 1 and seq_len >= 2. `hide_answers`
  // replaces the second copy in the inputs by MASK (for bidirectional models).
  CopyTask(int64_t vocab, int64_t seq_len, int64_t batch_size, int64_t eval_batches, uint64_t seed,
           bool hide_answers = false);

  int64_t VocabSize() const override { return vocab_ + 3; }
  double ChanceAccuracy() const override { return 1.0 / static_cast<double>(vocab_); }
  Batch NextTrainBatch() override;
  const std::vector<Batch>& EvalBatches() const override { return eval_; }
  std::string SaveStreamState() const override { return train_rng_.Save(); }
  absl::Status RestoreStreamState(const std::string& state) override {
    return train_rng_.Restore(state);
  }

  const CopyLayout& layout() const { return layout_; }

 private:
  Batch Generate(TaskRng& rng) const;

  int64_t vocab_;
  int64_t seq_len_;
  int64_t batch_size_;
  bool hide_answers_;
  CopyLayout layout_;
  TaskRng train_rng_;
  std::vector<Batch> eval_;
};

// The copy task of `shape`, once the task table (spec::CheckTaskShape) says the shape fits, as
// every other task is made.
absl::StatusOr<std::unique_ptr<Task>> MakeCopyTask(const TaskShape& shape);

}  // namespace tae::train
