#pragma once

// Flag parsing shared by the simple verbs: `--json`, `--help`, N positional arguments.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands/commands.h"
#include "common/cli/flags.h"
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

}  // namespace tae::client
