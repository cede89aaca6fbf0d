#pragma once

// Flag parsing shared by the simple verbs: `--json`, `--help`, N positional arguments.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands/commands.h"
#include "common/cli/flags.h"
#include "nlohmann/json.hpp"
#include "tae/v1/control.pb.h"

namespace tae::client {

// Parses flags; returns -1 to go on, or the exit code to return (help printed or bad usage).
int ParseOrExit(cli::FlagSet& flags, const Args& args, size_t min_positional, size_t max_positional,
                Args* positional);

// "r12", "R12" or "12" -> 12; anything else is InvalidArgument naming the text.
absl::StatusOr<int64_t> ParseRunId(const std::string& text);
// Accepts -o as --output (the flag parser knows long flags only).
Args WithLongOutput(const Args& args);

// What to show of these runs when nobody named a metric: metrics::DefaultMetrics of the final
// metrics they have, at most `limit`.
std::vector<std::string> RunsDefaultMetrics(const tae::v1::ListRunsResponse& runs, size_t limit);

// A run's config as show and compare list it: for a command job, only the keys that reach it
// (spec::ReachesCommand with `command_keys`, GetRunResponse.command_keys) unless `all`, with
// `hidden` (if not null) set to how many were left out; other runs' config whole.
nlohmann::ordered_json ShownConfig(const tae::v1::Run& run,
                                   const std::vector<std::string>& command_keys, bool all,
                                   int* hidden);

}  // namespace tae::client
