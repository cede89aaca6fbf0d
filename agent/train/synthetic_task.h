#pragma once

// The machinery shared by the generated tasks reverse, sort, assoc_recall, induction and mod_add
// (docs/tasks.md): a task is a RowFormat (how one row of seq_len + 1 tokens is drawn and which
// input positions are scored) run by SyntheticTask, which batches rows into next-token
// prediction, draws the train stream and the fixed eval batches, and hides answers from
// bidirectional models.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/train/tasks.h"

namespace tae::train {

// The sizes and seed of a generated task (train.vocab, train.seq_len, ...). hide_answers is
// !model.causal.
struct TaskShape {
  int64_t vocab = 16;
  int64_t seq_len = 32;
  int64_t batch_size = 32;
  int64_t eval_batches = 8;
  uint64_t seed = 0;
  bool hide_answers = false;
};

// Token ids after the `vocab` symbols 0 .. vocab-1, the same for every generated task (and for
// copy): SEP = vocab, PAD = vocab + 1, MASK = vocab + 2; mod_add adds PLUS and EQ after them.
struct SpecialTokens {
  explicit SpecialTokens(int64_t vocab)
      : sep(vocab), pad(vocab + 1), mask(vocab + 2), plus(vocab + 3), eq(vocab + 4) {}

  static constexpr int64_t kCommon = 3;  // SEP, PAD, MASK

  int64_t sep;
  int64_t pad;
  int64_t mask;
  int64_t plus;
  int64_t eq;
};

// InvalidArgument naming train.vocab or train.seq_len when the shape leaves no room for the
// task's layout: spec::CheckTaskShape, the table taed's CheckConfig uses too.
absl::Status CheckTaskShape(const char* task, const TaskShape& shape);

class RowFormat {
 public:
  virtual ~RowFormat() = default;

  // Tokens after the vocab symbols (SEP, PAD, MASK, ...).
  virtual int64_t SpecialTokenCount() const { return SpecialTokens::kCommon; }
  // Draws one row: row[0 .. seq_len] is pre-filled with PAD and scored[0 .. seq_len) with 0; sets
  // scored[p] = 1 for every input position p whose target row[p + 1] is an answer.
  virtual void Fill(TaskRng& rng, int64_t* row, float* scored) const = 0;
};

class SyntheticTask final : public Task {
 public:
  // Draws the eval batches from the eval stream.
  SyntheticTask(std::unique_ptr<RowFormat> format, const TaskShape& shape);

  int64_t VocabSize() const override { return shape_.vocab + format_->SpecialTokenCount(); }
  // Every generated task's answers are uniform over the vocab symbols (sort's only marginally:
  // docs/tasks.md).
  double ChanceAccuracy() const override { return 1.0 / static_cast<double>(shape_.vocab); }
  Batch NextTrainBatch() override { return Generate(train_rng_); }
  const std::vector<Batch>& EvalBatches() const override { return eval_; }
  std::string SaveStreamState() const override { return train_rng_.Save(); }
  absl::Status RestoreStreamState(const std::string& state) override {
    return train_rng_.Restore(state);
  }

 private:
  // With hide_answers, every input that is the target of a scored position becomes MASK.
  Batch Generate(TaskRng& rng) const;

  std::unique_ptr<RowFormat> format_;
  TaskShape shape_;
  TaskRng train_rng_;
  std::vector<Batch> eval_;
};

}  // namespace tae::train
