#pragma once

// Text sources for the lm task: a user file, or the King James Bible from Debian's bible-kjv
// (`bible -f gen1:1-rev22:21`), cached at $XDG_CACHE_HOME/tae/kjv.txt (default ~/.cache/tae).

#include <string>

#include "absl/status/statusor.h"

namespace tae::train {

// The whole file; NotFound naming the path when it cannot be read.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// Where the KJV text is cached.
std::string DefaultKjvCachePath();

// The KJV text: read from `cache_path` when present, else produced by `bible` and written there
// atomically (temp file + rename; a cache that cannot be written is only a warning on stderr).
// FailedPrecondition with an install hint when `bible` is not on PATH.
absl::StatusOr<std::string> LoadKjvText(const std::string& cache_path);

}  // namespace tae::train
