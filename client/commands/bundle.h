#pragma once

// taectl export EXP --bundle DIR (bundle.cc says what the directory holds).

#include <string>

#include "absl/status/status.h"

namespace tae::client {

// Writes the bundle of `experiment` (id, e<ID> or name) into `dir` (created if missing) through
// the dashboard API of the taed of `home`; a progress line on stderr when `progress`.
absl::Status WriteBundle(const std::string& home, const std::string& experiment,
                         const std::string& dir, bool progress);

}  // namespace tae::client
