// Checks that a run config's task fits its shape: train.vocab and train.seq_len leave room for the
// task's layout (docs/tasks.md). Part of CheckConfig, so a bad combination is refused at submit.
#pragma once

#include <optional>

#include "common/spec/checks.h"
#include "nlohmann/json.hpp"

namespace tae::spec {

std::optional<CrossProblem> CheckTask(const nlohmann::json& config);

}  // namespace tae::spec
