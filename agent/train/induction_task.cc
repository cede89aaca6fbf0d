#include "agent/train/induction_task.h"

#include <algorithm>

namespace tae::train {
namespace {

constexpr int64_t kMinBlock = 2;  // a block of one symbol would be a constant row

class InductionFormat final : public RowFormat {
 public:
  explicit InductionFormat(const TaskShape& shape)
      : vocab_(shape.vocab), row_len_(shape.seq_len + 1), max_block_(row_len_ / 2) {}

  // Row indices: the block at 0 .. n-1, then repeats; scored inputs n .. seq_len-1.
  void Fill(TaskRng& rng, int64_t* row, float* scored) const override {
    const int64_t block = kMinBlock + rng.Below(max_block_ - kMinBlock + 1);
    for (int64_t i = 0; i < block; ++i) {
      row[i] = rng.Below(vocab_);
    }
    for (int64_t i = block; i < row_len_; ++i) {
      row[i] = row[i - block];
    }
    std::fill(scored + block, scored + row_len_ - 1, 1.0f);
  }

 private:
  int64_t vocab_;
  int64_t row_len_;
  int64_t max_block_;  // (seq_len + 1) / 2: at least one full repeat
};

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> MakeInductionTask(const TaskShape& shape) {
  if (absl::Status status = CheckTaskShape("induction", shape); !status.ok()) {
    return status;
  }
  return std::unique_ptr<Task>(
      std::make_unique<SyntheticTask>(std::make_unique<InductionFormat>(shape), shape));
}

}  // namespace tae::train
