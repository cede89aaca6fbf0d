#include "agent/train/order_tasks.h"

#include <algorithm>

namespace tae::train {
namespace {

enum class Order { kReversed, kSorted };

class OrderFormat final : public RowFormat {
 public:
  OrderFormat(Order order, const TaskShape& shape)
      : order_(order), vocab_(shape.vocab), length_(shape.seq_len / 2) {}

  // Row indices: s at 0 .. L-1, SEP at L, f(s) at L+1 .. 2L; scored inputs L .. 2L-1.
  void Fill(TaskRng& rng, int64_t* row, float* scored) const override {
    for (int64_t i = 0; i < length_; ++i) {
      row[i] = rng.Below(vocab_);
    }
    row[length_] = SpecialTokens(vocab_).sep;
    int64_t* answer = row + length_ + 1;
    std::copy(row, row + length_, answer);
    if (order_ == Order::kReversed) {
      std::reverse(answer, answer + length_);
    } else {
      std::sort(answer, answer + length_);
    }
    std::fill(scored + length_, scored + 2 * length_, 1.0f);
  }

 private:
  Order order_;
  int64_t vocab_;
  int64_t length_;
};

absl::StatusOr<std::unique_ptr<Task>> MakeOrderTask(const char* name, Order order,
                                                    const TaskShape& shape) {
  if (absl::Status status = CheckTaskShape(name, shape); !status.ok()) {
    return status;
  }
  return std::unique_ptr<Task>(
      std::make_unique<SyntheticTask>(std::make_unique<OrderFormat>(order, shape), shape));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> MakeReverseTask(const TaskShape& shape) {
  return MakeOrderTask("reverse", Order::kReversed, shape);
}

absl::StatusOr<std::unique_ptr<Task>> MakeSortTask(const TaskShape& shape) {
  return MakeOrderTask("sort", Order::kSorted, shape);
}

}  // namespace tae::train
