#include "agent/train/synthetic_task.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tae::train {

absl::Status CheckTaskShape(const char* task, const TaskShape& shape, int64_t min_seq_len,
                            const char* needs, int64_t min_vocab, const char* vocab_needs) {
  if (shape.vocab < min_vocab) {
    const std::string why = *vocab_needs == '\0' ? "" : absl::StrCat(" (", vocab_needs, ")");
    return absl::InvalidArgumentError(absl::StrCat("train.vocab: task ", task, " needs at least ",
                                                   min_vocab, " symbols", why, ", got ",
                                                   shape.vocab));
  }
  if (shape.seq_len < min_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat("train.seq_len: task ", task, " needs at least ",
                                                   min_seq_len, " positions (", needs, "), got ",
                                                   shape.seq_len));
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
