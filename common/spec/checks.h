// Checks that involve more than one key of a resolved (flat) run config.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace tae::spec {

struct CrossProblem {
  std::string what;
  // The keys involved, the offending one first. The error is reported at the one that the
  // latest layer (ablation, --set, file) set, preferring the first.
  std::vector<std::string_view> keys;
};

// Checks a full flat config whose single values are already valid; returns the first problem.
std::optional<CrossProblem> CheckConfig(const nlohmann::json& config);

}  // namespace tae::spec
