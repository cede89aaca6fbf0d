#pragma once

// How a dashboard route's pattern reads a path (the table is Api::Routes, api_routes.cc). Pure.

#include <map>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace tae::http {

// A path's captured parts by name: "/api/runs/{run}/logs" on "/api/runs/r12/logs" is
// {"run": "r12"}.
using PathParams = std::map<std::string, std::string>;

// `path`'s parts (split at '/', empty ones skipped) against `pattern`'s: a literal part matches
// itself, "{name}" any one part (captured under name), and "*", only as the last part, whatever
// is left, nothing included (captured under "*", joined by '/'). nullopt when they differ.
std::optional<PathParams> MatchPath(absl::string_view pattern, absl::string_view path);

}  // namespace tae::http
