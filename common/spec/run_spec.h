// A run spec (run.json: the flat config taed writes for each run) read by the schema
// (schema.h's RunSpecKeys): what tae-train checks before the cross-key checks that taed runs too
// (checks.h's CheckConfig), and the schema as JSON (`tae-train --schema`), which the torch engine
// (agent/python/tae_torch/spec.py) reads to check a run spec the same way, with the same messages.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tae::spec {

// InvalidArgument `run spec: key "KEY": WHY`, the form of every run-spec error.
absl::Status RunSpecError(std::string_view key, std::string_view why);

// The trainer keys of `spec` (RunSpecKeys), checked: every key the schema has is present (a key
// added later may be absent: its absent_json stands in) and its value has the key's type, range,
// allowed values and uniqueness; no key of RunSpecTables() is unknown (`program` names the reader
// in that message: "is PROGRAM older than taectl?"). Keys outside those tables (resources.*,
// name, ...) and experiment keys in them (train.seeds) are ignored. Returns the keys with their
// values as given (absent ones filled in); the first problem is InvalidArgument (RunSpecError).
absl::StatusOr<nlohmann::json> CheckRunSpec(const nlohmann::json& spec, std::string_view program);

// A run spec with the default of every RunSpecKeys() key (train.seed 0).
nlohmann::json DefaultRunSpec();

// What identifies a run for checkpoints: the keys of `spec` that are RunSpecKeys() on the
// training trajectory, as compact JSON with sorted keys (a key a spec lacks is not added, so old
// specs keep their fingerprint).
std::string RunSpecFingerprint(const nlohmann::json& spec);

// The run-spec schema as JSON (docs/engine.md, "One schema"):
//   {"tables": [...], "ignored": [experiment keys of those tables], "keys": [{"name", "type"
//    (int|float|bool|string|enum|int_array|float_array|head_map), "doc", "default", "absent"
//    (only for keys a run spec may leave out), "trajectory", "min"/"max" (only finite ones),
//    "min_open", "max_open", "range" (as in messages; "" without bounds), "allowed" (enums),
//    "unique", "non_empty"}, ...]}
nlohmann::json RunSpecSchemaJson();

}  // namespace tae::spec
