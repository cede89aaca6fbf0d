#pragma once

// The JSON shapes taectl prints with --json (documented in docs/cli.md).

#include "client/commands/head_grid.h"
#include "nlohmann/json.hpp"
#include "tae/v1/control.pb.h"

namespace tae::client {

nlohmann::ordered_json ExperimentJson(const tae::v1::Experiment& exp);
nlohmann::ordered_json RunJson(const tae::v1::Run& run);
nlohmann::ordered_json AgentJson(const tae::v1::AgentInfo& agent);
nlohmann::ordered_json ReportJson(const tae::v1::ReportResponse& report);
// {"run": 12, "layers": L, "heads": H, "masked": [[..]], "gradient": [[..]],
//  "cells": [["scored"|"pruned"|"removed"|"missing", ...], ...]}; unscored values are null.
nlohmann::ordered_json HeadGridJson(int64_t run_id, const HeadGrid& grid);

}  // namespace tae::client
