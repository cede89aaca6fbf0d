#pragma once

// reverse and sort: each row is  s_1 .. s_L  SEP  f(s)  [PAD]  with L = seq_len / 2, s_i uniform
// over the vocab symbols and f(s) the reversed (reverse) or ascending (sort) sequence; the L
// positions whose target is f(s) are scored. Needs vocab >= 2 and seq_len >= 4 (L >= 2).
// docs/tasks.md has the diagram.

#include <memory>

#include "absl/status/statusor.h"
#include "agent/train/synthetic_task.h"

namespace tae::train {

absl::StatusOr<std::unique_ptr<Task>> MakeReverseTask(const TaskShape& shape);
absl::StatusOr<std::unique_ptr<Task>> MakeSortTask(const TaskShape& shape);

}  // namespace tae::train
