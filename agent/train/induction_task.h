#pragma once

// induction: each row of seq_len + 1 tokens is  r_1 .. r_P  b_1 .. b_n  b_1 .. b_n  with every
// token uniform over the vocab symbols, a block length n drawn uniformly from
// 2 .. (seq_len + 1) / 2 for each row and P = seq_len + 1 - 2n random prefix tokens, so the
// repeat ends the row. The n - 1 positions that read b_1 .. b_(n-1) of the repeat (and predict
// b_2 .. b_n) are scored; b_1 of the repeat is not predictable and not scored. Needs vocab >= 2
// and seq_len >= 5 (two block lengths). docs/tasks.md has the diagram.

#include <memory>

#include "absl/status/statusor.h"
#include "agent/train/synthetic_task.h"

namespace tae::train {

absl::StatusOr<std::unique_ptr<Task>> MakeInductionTask(const TaskShape& shape);

}  // namespace tae::train
