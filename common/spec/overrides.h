// `taectl submit --set KEY=VALUE` overrides.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/schema.h"
#include "nlohmann/json.hpp"

namespace tae::spec {

struct SetOverride {
  std::string arg;  // "KEY=VALUE" as given, for messages
  const KeyInfo* key = nullptr;
  nlohmann::json value;  // validated against `key`
};

// Parses and validates --set arguments, in order. VALUE is TOML value syntax; text that is not
// one (or any non-string value for a string key) is taken as a bare string. Errors are
// InvalidArgument "--set ARG: what is wrong".
// `params`, if given, holds the experiment's declared [params] keys, which --set may set too.
class ParamSchema;
absl::StatusOr<std::vector<SetOverride>> ParseOverrides(const std::vector<std::string>& args,
                                                        const ParamSchema* params = nullptr);

}  // namespace tae::spec
