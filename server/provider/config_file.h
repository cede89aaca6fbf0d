#pragma once

// What the providers' TOML files (ssh-hosts.toml, tpu-pools.toml) share: errors that name
// FILE:LINE:COL, and the text allowed in ids and label values.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "toml++/toml.h"

namespace tae::provider {

inline std::string Where(const std::string& path, const toml::source_region& source) {
  return absl::StrCat(path, ":", source.begin.line, ":", source.begin.column);
}

inline absl::Status ConfigError(const std::string& path, const toml::node& node,
                                const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(Where(path, node.source()), ": ", what));
}

// The TOML text as a table, or InvalidArgument "FILE:LINE:COL: what toml++ says".
inline absl::StatusOr<toml::table> ParseConfigToml(const std::string& text,
                                                   const std::string& path) {
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(path, error.source()), ": ", std::string(error.description())));
  }
}

// An id, zone or label value: none of the separators the agent's --labels syntax uses.
inline bool PlainText(const std::string& text) {
  return !text.empty() && text.find_first_of(",=\n\r") == std::string::npos;
}

}  // namespace tae::provider
