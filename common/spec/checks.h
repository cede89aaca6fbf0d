// Checks that involve more than one key of a resolved (flat) run config: the one copy in C++,
// run by taed on every run an experiment file expands to (parser.cc) and by tae-train on its
// run.json (agent/train/config.cc). The torch engine's copy (agent/python/tae_torch/spec.py) is
// held to it by tests/train/torch_schema_agreement_test.py. Needs nlohmann json only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace tae::spec {

struct CrossProblem {
  // "KEY: why", KEY being keys.front().
  std::string what;
  // The keys involved, the offending one first. The error is reported at the one that the
  // latest layer (ablation, --set, file) set, preferring the first.
  std::vector<std::string_view> keys;
};

// Checks a full flat config whose single values are already valid; returns the first problem.
std::optional<CrossProblem> CheckConfig(const nlohmann::json& config);

}  // namespace tae::spec
