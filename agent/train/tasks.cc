#include "agent/train/tasks.h"

#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "agent/train/assoc_recall_task.h"
#include "agent/train/copy_task.h"
#include "agent/train/corpus.h"
#include "agent/train/induction_task.h"
#include "agent/train/lm_task.h"
#include "agent/train/mod_add_task.h"
#include "agent/train/order_tasks.h"
#include "agent/train/synthetic_task.h"

namespace tae::train {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

TaskRng::TaskRng(uint64_t seed, uint64_t stream)
    : engine_(SplitMix64(SplitMix64(seed) ^ SplitMix64(stream + 0x7461650000ULL))) {}

int64_t TaskRng::Below(int64_t n) {
  const uint64_t range = static_cast<uint64_t>(n);
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % range;
  uint64_t draw = engine_();
  while (draw >= limit) {
    draw = engine_();
  }
  return static_cast<int64_t>(draw % range);
}

std::string TaskRng::Save() const {
  std::ostringstream out;
  out << engine_;
  return out.str();
}

absl::Status TaskRng::Restore(const std::string& state) {
  std::istringstream in(state);
  std::mt19937_64 engine;
  in >> engine;
  if (in.fail()) {
    return absl::InvalidArgumentError("task stream state: not a generator state");
  }
  engine_ = engine;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Task>> MakeTask(const TrainConfig& config) {
  const TrainingConfig& t = config.train;
  TaskShape shape;
  shape.vocab = t.vocab;
  shape.seq_len = t.seq_len;
  shape.batch_size = t.batch_size;
  shape.eval_batches = t.eval_batches;
  shape.seed = t.seed;
  shape.hide_answers = !config.model.causal;  // bidirectional models must not read answers
  switch (t.task) {
    case TaskKind::kCopy:
      return MakeCopyTask(shape);
    case TaskKind::kReverse:
      return MakeReverseTask(shape);
    case TaskKind::kSort:
      return MakeSortTask(shape);
    case TaskKind::kAssocRecall:
      return MakeAssocRecallTask(shape);
    case TaskKind::kInduction:
      return MakeInductionTask(shape);
    case TaskKind::kModAdd:
      return MakeModAddTask(shape);
    case TaskKind::kLm:
      break;
  }
  absl::StatusOr<std::string> text =
      t.data.empty() ? LoadKjvText(DefaultKjvCachePath()) : ReadTextFile(t.data);
  if (!text.ok()) {
    return text.status();
  }
  absl::StatusOr<std::unique_ptr<LmTask>> task =
      LmTask::Create(*std::move(text), t.seq_len, t.batch_size, t.eval_batches, t.seed);
  if (!task.ok()) {
    return task.status();
  }
  return std::unique_ptr<Task>(*std::move(task));
}

}  // namespace tae::train
