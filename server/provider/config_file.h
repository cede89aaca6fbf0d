#pragma once

// What the providers' TOML files (ssh-hosts.toml, tpu-pools.toml) share: errors that name
// FILE:LINE:COL, the text allowed in ids and label values, and readers of one key's value
// (errors "FILE:LINE:COL: KEY: expected ...").

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

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

inline absl::Status ConfigString(const std::string& path, const std::string& key,
                                 const toml::node& value, std::string* out) {
  if (!value.is_string() || value.as_string()->get().empty()) {
    return ConfigError(path, value, absl::StrCat(key, ": expected a non-empty string"));
  }
  *out = value.as_string()->get();
  return absl::OkStatus();
}

inline absl::Status ConfigBool(const std::string& path, const std::string& key,
                               const toml::node& value, bool* out) {
  if (!value.is_boolean()) {
    return ConfigError(path, value, absl::StrCat(key, ": expected true or false"));
  }
  *out = value.as_boolean()->get();
  return absl::OkStatus();
}

inline absl::Status ConfigInt(const std::string& path, const std::string& key,
                              const toml::node& value, int low, int high, int* out) {
  const toml::value<int64_t>* number = value.as_integer();
  if (number == nullptr || number->get() < low || number->get() > high) {
    return ConfigError(path, value,
                       absl::StrCat(key, ": expected an integer in ", low, "..", high));
  }
  *out = static_cast<int>(number->get());
  return absl::OkStatus();
}

// The [[pool]] tables of a pools file (tpu-pools.toml, gke-pools.toml) in file order, pointing
// into `root`; anything else at the top level is an error naming FILE:LINE:COL.
inline absl::StatusOr<std::vector<const toml::table*>> PoolTables(const toml::table& root,
                                                                  const std::string& path) {
  std::vector<const toml::table*> tables;
  for (auto&& [key, node] : root) {
    const toml::array* array = node.as_array();
    if (key.str() != "pool" || array == nullptr) {
      return ConfigError(
          path, node,
          absl::StrCat("unknown key '", std::string(key.str()), "' (expected [[pool]] tables)"));
    }
    for (const toml::node& item : *array) {
      const toml::table* table = item.as_table();
      if (table == nullptr) {
        return ConfigError(path, item, "pool: expected a table");
      }
      tables.push_back(table);
    }
  }
  return tables;
}

// Seconds in 0..max_s (an integer or a float).
inline absl::Status ConfigSeconds(const std::string& path, const std::string& key,
                                  const toml::node& value, double max_s, double* out) {
  std::optional<double> seconds = value.value<double>();
  if (!seconds || !(*seconds >= 0) || *seconds > max_s) {
    return ConfigError(path, value, absl::StrCat(key, ": expected seconds in 0..", max_s));
  }
  *out = *seconds;
  return absl::OkStatus();
}

// A table of agent labels: names and values PlainText.
inline absl::Status ConfigLabels(const std::string& path, const toml::node& value,
                                 std::map<std::string, std::string>* out) {
  const toml::table* labels = value.as_table();
  if (labels == nullptr) {
    return ConfigError(path, value, "labels: expected a table of strings");
  }
  for (auto&& [key, label] : *labels) {
    const std::string name(key.str());
    const toml::value<std::string>* text = label.as_string();
    if (text == nullptr || !PlainText(name) || !PlainText(text->get())) {
      return ConfigError(
          path, label,
          absl::StrCat("labels.", name, ": expected a string without ',', '=' or line breaks"));
    }
    (*out)[name] = text->get();
  }
  return absl::OkStatus();
}

}  // namespace tae::provider
