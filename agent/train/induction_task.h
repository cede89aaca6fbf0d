#pragma once

// induction: each row of seq_len + 1 tokens is a block b_1 .. b_n of symbols drawn uniformly from
// the vocab, repeated until the row is full (row[i] = b_(i mod n + 1), the last repeat cut short),
// with the block length n drawn uniformly from 2 .. (seq_len + 1) / 2 for each row. Every
// position from the first repeat on is scored except the one predicting its first token b_1, which
// nothing announces: input positions n .. seq_len-1. Needs vocab >= 2 and seq_len >= 5 (two
// block lengths). docs/tasks.md has the diagram.

#include <memory>

#include "absl/status/statusor.h"
#include "agent/train/synthetic_task.h"

namespace tae::train {

absl::StatusOr<std::unique_ptr<Task>> MakeInductionTask(const TaskShape& shape);

}  // namespace tae::train
