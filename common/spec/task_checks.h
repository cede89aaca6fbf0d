// Checks that a run config's task fits its shape: train.vocab and train.seq_len leave room for the
// task's layout (docs/tasks.md). Part of CheckConfig, so a bad combination is refused at submit.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/spec/checks.h"
#include "nlohmann/json.hpp"

namespace tae::spec {

// For the generated tasks (every task but lm, whose vocabulary is the 256 bytes): train.vocab must
// be at least 2 and train.seq_len at least the task's minimum (reverse, sort, mod_add 4,
// induction 5, assoc_recall 8). The message names the key, e.g. "train.seq_len: task
// assoc_recall needs at least 8 positions (...), got 6".
std::optional<CrossProblem> CheckTask(const nlohmann::json& config);

// The same for a task and its shape, as tae-train's task constructors ask it: the one table of
// what each task needs. Nothing for a task without needs (lm, or a name it does not know).
std::optional<CrossProblem> CheckTaskShape(std::string_view task, int64_t vocab, int64_t seq_len);

}  // namespace tae::spec
