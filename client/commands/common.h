#pragma once

// Flag parsing shared by the simple verbs: `--json`, `--help`, N positional arguments.

#include <cstdio>
#include <string>

#include "client/commands/commands.h"
#include "common/cli/flags.h"

namespace tae::client {

// Parses flags; returns -1 to go on, or the exit code to return (help printed or bad usage).
int ParseOrExit(cli::FlagSet& flags, const Args& args, size_t min_positional, size_t max_positional,
                Args* positional);

}  // namespace tae::client
