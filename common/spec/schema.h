// The schema of the experiment file and of a run spec (run.json): every key with its type, default,
// allowed values and doc. The one definition of the keys: taed validates experiment files by it,
// tae-train and the torch engine (agent/python/tae_torch, through `tae-train --schema`, see
// run_spec.h) read run specs by it.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace tae::spec {

enum class ValueType {
  kInt,
  kFloat,  // accepts TOML integers; stored as a JSON double
  kBool,
  kString,
  kEnum,         // a string from KeyInfo::allowed
  kName,         // a non-empty string of [A-Za-z0-9._-]+ (experiment and ablation names)
  kIntArray,     // elements checked against min/max, `unique`, `non_empty`
  kFloatArray,   // the same with numbers (integers become floats)
  kStringMap,    // a table of string -> string (labels)
  kHeadMap,      // a table of layer index (as a string) -> unique non-negative ints (prune_heads)
  kScalarArray,  // an array of integers, floats, booleans or strings ([params] lists)
  kMetricList,   // a non-empty-string array of metric names, each once ([report] metrics)
  kGoalMap,      // a table of metric name -> "min" | "max" ([report] goal)
  kFloorMap,     // a table of metric name -> finite number ([report] floor)
  // train.seeds: a kIntArray, or a table { min, max, alpha, margin } (adaptive seeds; stored as
  // a JSON object with all four, margin a metric -> number table)
  kSeeds,
  // A size in bytes: an integer, or a string of a number and a unit (B, kB/KB, MB, GB, TB in
  // powers of 1000; KiB, MiB, GiB, TiB in powers of 1024), e.g. "20GB"; stored as integer bytes.
  kBytes,
  // Regular expressions (RE2 syntax) with named groups: a string, or an array of strings; stored
  // as an array. Each must compile and name at least one group other than `step`.
  kPatterns,
};

// Where a key lives.
enum class KeyScope {
  kExperiment,  // name, description, train.seeds: part of the Spec, not of a run's config
  kRun,         // part of every run's config; an [[ablation]] may override it
};

struct KeyInfo {
  std::string_view name;  // full dotted name, e.g. "model.layers"
  ValueType type = ValueType::kInt;
  KeyScope scope = KeyScope::kRun;
  std::string_view default_json;  // the default as JSON text; empty: the key is required
  std::string_view allowed;       // kEnum: the allowed values, separated by '|'
  double min = -std::numeric_limits<double>::infinity();  // numbers, array and kHeadMap elements
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;   // true: value > min (else >=)
  bool max_open = false;   // true: value < max (else <=)
  bool unique = false;     // kIntArray, kFloatArray, kHeadMap's lists: no element twice
  bool non_empty = false;  // kIntArray: at least one element
  std::string_view doc;
  // Run specs (run.json): what a run spec without the key means, as JSON text. Set for keys added
  // after the first run.json format (a run stored before them must train as it did then); empty:
  // a run spec must have the key.
  std::string_view absent_json;
  // false: the key does not change the training trajectory (threads, checkpoints, evaluations,
  // reporting), so it is left out of the checkpoint fingerprint and a run may resume with it
  // changed.
  bool trajectory = true;
};

// The whole schema, in documentation order (top-level keys, [model], [train], [resources]).
const std::vector<KeyInfo>& Schema();

// The schema entry of a full dotted name, or nullptr.
const KeyInfo* FindKey(std::string_view name);

// The keys of a run spec that the trainers read (tae-train, the torch engine), in schema order:
// the run-scope keys of RunSpecTables(), and train.seed, the run's element of train.seeds (set by
// taed for each run; not a key of the experiment file).
const std::vector<KeyInfo>& RunSpecKeys();

// The tables whose keys a run spec's trainer reads ("model", "train", "eval"): a key of these
// that is not in RunSpecKeys() (nor an experiment-scope key such as train.seeds) is refused.
const std::vector<std::string_view>& RunSpecTables();

// The tables of the file that hold schema keys ("model", "train", "resources").
const std::vector<std::string_view>& Sections();

// A flat config with the default of every run-scope key.
nlohmann::json DefaultConfig();

// The allowed range of a number key as text, e.g. "0..64", ">= 1", ">= 0 and < 1"; empty when
// the key has no bounds.
std::string DescribeRange(const KeyInfo& key);

// The allowed values of an enum key, e.g. {"relu", "gelu"}.
std::vector<std::string> AllowedValues(const KeyInfo& key);

// Optimal-string-alignment edit distance (a transposition counts as one edit).
int EditDistance(std::string_view a, std::string_view b);

// The candidate the user probably meant by `unknown`: one within edit distance 2, else one with
// the same last component ("lr" -> "train.lr"), else one in the same table whose last component
// starts with the other's ("model.pos" -> "model.pos_encoding").
std::optional<std::string> Suggest(std::string_view unknown,
                                   const std::vector<std::string_view>& candidates);

// " (did you mean 'X'?)" or "" -- for appending to an "unknown key" message.
std::string DidYouMean(std::string_view unknown, const std::vector<std::string_view>& candidates);

}  // namespace tae::spec
