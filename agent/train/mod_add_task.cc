#include "agent/train/mod_add_task.h"

namespace tae::train {
namespace {

constexpr int64_t kProblemLen = 5;  // a PLUS b EQ c

class ModAddFormat final : public RowFormat {
 public:
  explicit ModAddFormat(const TaskShape& shape)
      : vocab_(shape.vocab), problems_((shape.seq_len + 1) / kProblemLen) {}

  int64_t SpecialTokenCount() const override { return SpecialTokens::kCommon + 2; }

  // Row indices of problem j: a at 5j, PLUS at 5j+1, b at 5j+2, EQ at 5j+3 (scored), c at 5j+4.
  void Fill(TaskRng& rng, int64_t* row, float* scored) const override {
    const SpecialTokens tokens(vocab_);
    for (int64_t j = 0; j < problems_; ++j) {
      int64_t* problem = row + kProblemLen * j;
      problem[0] = rng.Below(vocab_);
      problem[1] = tokens.plus;
      problem[2] = rng.Below(vocab_);
      problem[3] = tokens.eq;
      problem[4] = (problem[0] + problem[2]) % vocab_;
      scored[kProblemLen * j + 3] = 1.0f;
    }
  }

 private:
  int64_t vocab_;
  int64_t problems_;  // M
};

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> MakeModAddTask(const TaskShape& shape) {
  if (absl::Status status = CheckTaskShape("mod_add", shape); !status.ok()) {
    return status;
  }
  return std::unique_ptr<Task>(
      std::make_unique<SyntheticTask>(std::make_unique<ModAddFormat>(shape), shape));
}

}  // namespace tae::train
