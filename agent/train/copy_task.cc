#include "agent/train/copy_task.h"

#include <algorithm>

namespace tae::train {

CopyLayout MakeCopyLayout(int64_t vocab, int64_t seq_len) {
  CopyLayout layout;
  layout.copy_length = seq_len / 2;  // 2L + 1 tokens fit in the seq_len + 1 of a row
  layout.separator = vocab;
  layout.pad = vocab + 1;
  layout.mask_token = vocab + 2;
  layout.first_scored = layout.copy_length;
  layout.last_scored = 2 * layout.copy_length - 1;
  return layout;
}

CopyTask::CopyTask(int64_t vocab, int64_t seq_len, int64_t batch_size, int64_t eval_batches,
                   uint64_t seed, bool hide_answers)
    : vocab_(vocab),
      seq_len_(seq_len),
      batch_size_(batch_size),
      hide_answers_(hide_answers),
      layout_(MakeCopyLayout(vocab, seq_len)),
      train_rng_(seed, TaskRng::kTrainStream) {
  TaskRng eval_rng(seed, TaskRng::kEvalStream);
  eval_.reserve(static_cast<size_t>(eval_batches));
  for (int64_t i = 0; i < eval_batches; ++i) {
    eval_.push_back(Generate(eval_rng));
  }
}

Batch CopyTask::NextTrainBatch() { return Generate(train_rng_); }

absl::StatusOr<std::unique_ptr<Task>> MakeCopyTask(const TaskShape& shape) {
  if (absl::Status status = CheckTaskShape("copy", shape); !status.ok()) {
    return status;
  }
  return std::unique_ptr<Task>(std::make_unique<CopyTask>(shape.vocab, shape.seq_len,
                                                          shape.batch_size, shape.eval_batches,
                                                          shape.seed, shape.hide_answers));
}

Batch CopyTask::Generate(TaskRng& rng) const {
  const int64_t row_len = seq_len_ + 1;
  const int64_t length = layout_.copy_length;
  torch::Tensor rows = torch::full({batch_size_, row_len}, layout_.pad, torch::kLong);
  int64_t* data = rows.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch_size_; ++b) {
    int64_t* row = data + b * row_len;
    for (int64_t i = 0; i < length; ++i) {
      row[i] = rng.Below(vocab_);
      row[length + 1 + i] = row[i];
    }
    row[length] = layout_.separator;
  }
  Batch batch;
  batch.inputs = rows.slice(1, 0, seq_len_).contiguous();
  batch.targets = rows.slice(1, 1, row_len).contiguous();
  if (hide_answers_) {  // input positions L+1 .. 2L hold the second copy
    batch.inputs.slice(1, length + 1, std::min(2 * length + 1, seq_len_)).fill_(layout_.mask_token);
  }
  batch.mask = torch::zeros({batch_size_, seq_len_});
  batch.mask.slice(1, layout_.first_scored, layout_.last_scored + 1).fill_(1.0);
  return batch;
}

}  // namespace tae::train
