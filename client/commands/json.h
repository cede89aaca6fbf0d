#pragma once

// The JSON shapes taectl prints with --json (documented in docs/cli.md).

#include "nlohmann/json.hpp"
#include "tae/v1/control.pb.h"

namespace tae::client {

nlohmann::ordered_json ExperimentJson(const tae::v1::Experiment& exp);
nlohmann::ordered_json RunJson(const tae::v1::Run& run);
nlohmann::ordered_json AgentJson(const tae::v1::AgentInfo& agent);
nlohmann::ordered_json ReportJson(const tae::v1::ReportResponse& report);

}  // namespace tae::client
