#include "agent/train/assoc_recall_task.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

namespace tae::train {
namespace {

class AssocRecallFormat final : public RowFormat {
 public:
  explicit AssocRecallFormat(const TaskShape& shape)
      : keys_(shape.vocab / 2),
        values_(shape.vocab - keys_),
        pairs_(std::min(keys_, shape.seq_len / 4)),
        queries_(shape.seq_len / 2 - pairs_) {}

  // Row indices: k_i at 2i, v_i at 2i+1, SEP at 2K, q_j at 2K+1+2j (scored), a_j at 2K+2+2j.
  // Keys are symbols 0 .. vocab/2 - 1 and values the rest, so a query token matches keys only
  // (as in MQAR, Arora et al. 2023): with one alphabet a query also matched the values equal to
  // it, and the lookup needed position parity on top of content.
  void Fill(TaskRng& rng, int64_t* row, float* scored) const override {
    // Distinct keys: the first K draws of a Fisher-Yates shuffle of the key symbols.
    std::vector<int64_t> symbols(static_cast<size_t>(keys_));
    std::iota(symbols.begin(), symbols.end(), 0);
    for (int64_t i = 0; i < pairs_; ++i) {
      std::swap(symbols[static_cast<size_t>(i)],
                symbols[static_cast<size_t>(i + rng.Below(keys_ - i))]);
      row[2 * i] = symbols[static_cast<size_t>(i)];
      row[2 * i + 1] = keys_ + rng.Below(values_);
    }
    row[2 * pairs_] = SpecialTokens(keys_ + values_).sep;
    for (int64_t j = 0; j < queries_; ++j) {
      const int64_t pair = rng.Below(pairs_);
      const int64_t query = 2 * pairs_ + 1 + 2 * j;
      row[query] = row[2 * pair];
      row[query + 1] = row[2 * pair + 1];
      scored[query] = 1.0f;
    }
  }

 private:
  int64_t keys_;     // key symbols: 0 .. keys_ - 1
  int64_t values_;   // value symbols: keys_ .. keys_ + values_ - 1
  int64_t pairs_;    // K
  int64_t queries_;  // Q
};

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> MakeAssocRecallTask(const TaskShape& shape) {
  if (absl::Status status = CheckTaskShape("assoc_recall", shape); !status.ok()) {
    return status;
  }
  return std::unique_ptr<Task>(
      std::make_unique<SyntheticTask>(std::make_unique<AssocRecallFormat>(shape), shape));
}

}  // namespace tae::train
