#include "agent/train/induction_task.h"

#include <algorithm>

namespace tae::train {
namespace {

constexpr int64_t kMinBlock = 2;   // one scored position
constexpr int64_t kMinSeqLen = 5;  // block lengths 2 and 3
constexpr char kNeeds[] = "a block of 2 or 3 symbols and its repeat, so the length can vary";

class InductionFormat final : public RowFormat {
 public:
  explicit InductionFormat(const TaskShape& shape)
      : vocab_(shape.vocab), row_len_(shape.seq_len + 1), max_block_(row_len_ / 2) {}

  // Row indices: prefix 0 .. P-1, block P .. P+n-1, repeat P+n .. seq_len (= P+2n-1); scored
  // inputs P+n .. seq_len-1.
  void Fill(TaskRng& rng, int64_t* row, float* scored) const override {
    const int64_t block = kMinBlock + rng.Below(max_block_ - kMinBlock + 1);
    const int64_t repeat = row_len_ - block;
    for (int64_t i = 0; i < repeat; ++i) {
      row[i] = rng.Below(vocab_);
    }
    std::copy(row + repeat - block, row + repeat, row + repeat);
    std::fill(scored + repeat, scored + row_len_ - 1, 1.0f);
  }

 private:
  int64_t vocab_;
  int64_t row_len_;
  int64_t max_block_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> MakeInductionTask(const TaskShape& shape) {
  if (absl::Status status = CheckTaskShape("induction", shape, kMinSeqLen, kNeeds); !status.ok()) {
    return status;
  }
  return std::unique_ptr<Task>(
      std::make_unique<SyntheticTask>(std::make_unique<InductionFormat>(shape), shape));
}

}  // namespace tae::train
