#include "agent/train/lm_task.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tae::train {
namespace {

// First byte of the eval split: the last 10% of the text is held out.
int64_t TrainEnd(int64_t size) { return size / 10 * 9 + (size % 10) * 9 / 10; }

}  // namespace

absl::StatusOr<std::unique_ptr<LmTask>> LmTask::Create(std::string text, int64_t seq_len,
                                                       int64_t batch_size, int64_t eval_batches,
                                                       uint64_t seed) {
  const int64_t size = static_cast<int64_t>(text.size());
  const int64_t train_end = TrainEnd(size);
  const int64_t window = seq_len + 1;
  if (train_end < window || size - train_end < window) {
    return absl::InvalidArgumentError(
        absl::StrCat("lm task: text of ", size, " bytes is too short for train.seq_len ", seq_len,
                     " (each of the 90%/10% train/eval splits needs at least ", window, " bytes)"));
  }
  std::unique_ptr<LmTask> task(new LmTask(std::move(text), seq_len, batch_size, seed));
  TaskRng eval_rng(seed, TaskRng::kEvalStream);
  for (int64_t i = 0; i < eval_batches; ++i) {
    task->eval_.push_back(task->Windows(eval_rng, task->train_end_, size));
  }
  return task;
}

LmTask::LmTask(std::string text, int64_t seq_len, int64_t batch_size, uint64_t seed)
    : text_(std::move(text)),
      seq_len_(seq_len),
      batch_size_(batch_size),
      train_end_(TrainEnd(static_cast<int64_t>(text_.size()))),
      train_rng_(seed, TaskRng::kTrainStream) {}

Batch LmTask::NextTrainBatch() { return Windows(train_rng_, 0, train_end_); }

Batch LmTask::Windows(TaskRng& rng, int64_t begin, int64_t end) const {
  const int64_t row_len = seq_len_ + 1;
  torch::Tensor rows = torch::empty({batch_size_, row_len}, torch::kLong);
  int64_t* data = rows.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch_size_; ++b) {
    const int64_t start = begin + rng.Below(end - begin - row_len + 1);
    for (int64_t i = 0; i < row_len; ++i) {
      data[b * row_len + i] = static_cast<unsigned char>(text_[static_cast<size_t>(start + i)]);
    }
  }
  Batch batch;
  batch.inputs = rows.slice(1, 0, seq_len_).contiguous();
  batch.targets = rows.slice(1, 1, row_len).contiguous();
  batch.mask = torch::ones({batch_size_, seq_len_});
  return batch;
}

}  // namespace tae::train
