#include "agent/train/synthetic_task.h"

#include <optional>
#include <utility>

#include "common/spec/task_checks.h"

namespace tae::train {

absl::Status CheckTaskShape(const char* task, const TaskShape& shape) {
  if (std::optional<spec::CrossProblem> problem =
          spec::CheckTaskShape(task, shape.vocab, shape.seq_len)) {
    return absl::InvalidArgumentError(problem->what);
  }
  return absl::OkStatus();
}

SyntheticTask::SyntheticTask(std::unique_ptr<RowFormat> format, const TaskShape& shape)
    : format_(std::move(format)), shape_(shape), train_rng_(shape.seed, TaskRng::kTrainStream) {
  TaskRng eval_rng(shape.seed, TaskRng::kEvalStream);
  eval_.reserve(static_cast<size_t>(shape.eval_batches));
  for (int64_t i = 0; i < shape.eval_batches; ++i) {
    eval_.push_back(Generate(eval_rng));
  }
}

Batch SyntheticTask::Generate(TaskRng& rng) const {
  const int64_t seq_len = shape_.seq_len;
  const int64_t row_len = seq_len + 1;
  const SpecialTokens tokens(shape_.vocab);
  torch::Tensor rows = torch::full({shape_.batch_size, row_len}, tokens.pad, torch::kLong);
  torch::Tensor scored = torch::zeros({shape_.batch_size, seq_len});
  int64_t* row_data = rows.data_ptr<int64_t>();
  float* scored_data = scored.data_ptr<float>();
  for (int64_t b = 0; b < shape_.batch_size; ++b) {
    format_->Fill(rng, row_data + b * row_len, scored_data + b * seq_len);
  }
  Batch batch;
  batch.inputs = rows.slice(1, 0, seq_len).contiguous();
  batch.targets = rows.slice(1, 1, row_len).contiguous();
  batch.mask = scored;
  if (shape_.hide_answers) {  // input p + 1 is the answer of scored position p
    batch.inputs.slice(1, 1, seq_len)
        .masked_fill_(scored.slice(1, 0, seq_len - 1).gt(0.0f), tokens.mask);
  }
  return batch;
}

}  // namespace tae::train
