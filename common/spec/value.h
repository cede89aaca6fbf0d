// Converting one TOML value into the validated JSON value of a schema key.
#pragma once

#include <toml++/toml.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/spec/schema.h"
#include "nlohmann/json.hpp"

namespace tae::spec {

// What is wrong and where (the source position of the offending node).
struct Problem {
  toml::source_position where;
  std::string what;
};

// "an integer", "a string", ... for messages.
std::string_view TypeName(toml::node_type type);

// Checks `node` against `key` (type, range, allowed values) and stores the JSON value in *out.
// `display` names the value in messages (usually key.name). Returns the first problem, if any.
std::optional<Problem> ConvertValue(const KeyInfo& key, std::string_view display,
                                    const toml::node& node, nlohmann::json* out);

// "20GB", "1.5 GiB", "4096" (bytes) as a number of bytes; nullopt when the text is not a size
// (an unknown unit, a negative or non-finite number, more than 2^63 bytes).
std::optional<int64_t> ParseByteSize(std::string_view text);

}  // namespace tae::spec
