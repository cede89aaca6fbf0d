#pragma once

// mod_add: each row packs M = (seq_len + 1) / 5 problems  a PLUS b EQ c  with a, b uniform over
// the vocab symbols and c = (a + b) mod vocab (so p = train.vocab), then PAD to seq_len + 1
// tokens. The M positions that read EQ (and predict c) are scored. Needs vocab >= 2 and
// seq_len >= 4 (one problem). docs/tasks.md has the diagram.

#include <memory>

#include "absl/status/statusor.h"
#include "agent/train/synthetic_task.h"

namespace tae::train {

absl::StatusOr<std::unique_ptr<Task>> MakeModAddTask(const TaskShape& shape);

}  // namespace tae::train
