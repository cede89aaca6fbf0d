// [params]: an experiment's own knobs, for the user's program (a [job] command) rather than
// tae-train. The baseline declares each with a typed TOML value (nested tables group them);
// [[ablation]]s, [grid] and --set may only set declared keys, with the declared type. Each
// becomes a run-scope key "params.<name>" in every run's config, so everything that works for
// schema keys (spec hash, dry-run, placeholders, pivots, compare, export) works for them.
#pragma once

#include <toml++/toml.h>

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/spec/schema.h"
#include "common/spec/value.h"

namespace tae::spec {

// The table that declares them, and the prefix of their keys.
inline constexpr std::string_view kParamsTable = "params";

class ParamSchema {
 public:
  // Declares `full` ("params.rotary", "params.model.dim") with the type of `node`: an integer, a
  // float (which then also takes integers), a boolean, a string, or an array of those. A name is
  // letters, digits, '_' and '-' (it becomes a command-line flag).
  std::optional<Problem> Declare(const std::string& full, const toml::key& key,
                                 const toml::node& node);

  // The declared key, or nullptr.
  const KeyInfo* Find(std::string_view full) const;
  // Whether `full` is "params" or a table of declared keys ("params.model").
  bool IsGroup(std::string_view full) const;
  // Every declared key, in declaration order.
  std::vector<std::string_view> Names() const;

 private:
  std::deque<std::string> names_;     // deque: KeyInfo::name points into its elements
  std::deque<std::string> defaults_;  // the declared values as JSON text
  std::deque<KeyInfo> keys_;
};

// A schema key, else a param `params` declares (params may be null), else nullptr.
const KeyInfo* FindKeyOrParam(std::string_view name, const ParamSchema* params);

// `names` followed by every param `params` declares (params may be null): suggestion candidates.
std::vector<std::string_view> WithParams(std::vector<std::string_view> names,
                                         const ParamSchema* params);

}  // namespace tae::spec
