#pragma once

// assoc_recall: each row is  k_1 v_1 .. k_K v_K  SEP  q_1 a_1 .. q_Q a_Q  [PAD]  with
// K = min(vocab, seq_len / 4) pairs of distinct keys k_i and uniform values v_i (both over the
// vocab symbols), then Q = seq_len / 2 - K queries q_j, each one of the row's keys picked
// uniformly, followed by its value a_j. The Q positions that read a query (and predict its value)
// are scored. Needs vocab >= 2 and seq_len >= 8 (K >= 2). docs/tasks.md has the diagram.

#include <memory>

#include "absl/status/statusor.h"
#include "agent/train/synthetic_task.h"

namespace tae::train {

absl::StatusOr<std::unique_ptr<Task>> MakeAssocRecallTask(const TaskShape& shape);

}  // namespace tae::train
