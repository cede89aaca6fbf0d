#include "common/spec/run_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/spec/schema.h"
#include "common/spec/text.h"

namespace tae::spec {
namespace {

using nlohmann::json;
using Why = std::optional<std::string>;

// The value as JSON text, cut at 60 characters (the torch engine shows it the same way).
std::string Shown(const json& value) {
  std::string text = value.dump();
  constexpr size_t kMaxShown = 60;
  if (text.size() > kMaxShown) {
    text = text.substr(0, kMaxShown) + "...";
  }
  return text;
}

bool InRange(const KeyInfo& key, double value) {
  bool above = key.min_open ? value > key.min : value >= key.min;
  bool below = key.max_open ? value < key.max : value <= key.max;
  return above && below;
}

// A JSON integer that fits in int64_t (nlohmann keeps larger ones as unsigned).
bool IsInt64(const json& value) {
  return value.is_number_integer() &&
         !(value.is_number_unsigned() &&
           value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

std::string OutOfRange(const KeyInfo& key, const json& value) {
  std::string range = DescribeRange(key);
  return range.empty() ? Cat("is out of range, got ", Shown(value))
                       : Cat("must be ", range, ", got ", Shown(value));
}

Why CheckNumber(const KeyInfo& key, const json& value) {
  if (key.type == ValueType::kInt) {
    if (!value.is_number_integer()) {
      return Cat("must be an integer, got ", Shown(value));
    }
    if (!IsInt64(value) || !InRange(key, value.get<double>())) {
      return OutOfRange(key, value);
    }
    return std::nullopt;
  }
  if (!value.is_number()) {
    return Cat("must be a number, got ", Shown(value));
  }
  if (!InRange(key, value.get<double>())) {
    return OutOfRange(key, value);
  }
  return std::nullopt;
}

// Elements of kIntArray / kFloatArray (and of one layer of a kHeadMap): typed, in the key's range,
// each once when the key is unique. `prefix` goes before each message ("layer 0: ").
Why CheckElements(const KeyInfo& key, const json& value, bool integers, std::string_view prefix) {
  const std::string range = DescribeRange(key);
  std::set<double> seen;
  for (const json& item : value) {
    const bool typed = integers ? IsInt64(item) : item.is_number();
    if (!typed || !InRange(key, item.get<double>())) {
      return Cat(prefix, "entries must be ", integers ? "integers" : "numbers",
                 range.empty() ? "" : " ", range, ", got ", Shown(item));
    }
    if (key.unique && !seen.insert(item.get<double>()).second) {
      return Cat(prefix, Shown(item), " is listed twice");
    }
  }
  return std::nullopt;
}

Why CheckArray(const KeyInfo& key, const json& value) {
  const bool integers = key.type == ValueType::kIntArray;
  if (!value.is_array()) {
    return Cat("must be a list of ", integers ? "integers" : "numbers", ", got ", Shown(value));
  }
  if (key.non_empty && value.empty()) {
    return std::string("must not be empty");
  }
  return CheckElements(key, value, integers, "");
}

// { "layer": [head, ...] }: layer indices written as decimal strings, head indices in the key's
// range (>= 0), each once. Whether the layers and heads exist is the trainer's cross-key check.
Why CheckHeadMap(const KeyInfo& key, const json& value) {
  if (!value.is_object()) {
    return Cat("must be an object of layer -> head indices, got ", Shown(value));
  }
  for (const auto& [layer, list] : value.items()) {
    const bool digits =
        !layer.empty() && layer.size() <= 6 &&
        std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      return Cat("\"", layer, "\" is not a layer index");
    }
    if (!list.is_array()) {
      return Cat("layer ", layer, ": must be a list of head indices, got ", Shown(list));
    }
    if (Why why = CheckElements(key, list, true, Cat("layer ", layer, ": "))) {
      return why;
    }
  }
  return std::nullopt;
}

Why CheckValue(const KeyInfo& key, const json& value) {
  switch (key.type) {
    case ValueType::kInt:
    case ValueType::kFloat:
      return CheckNumber(key, value);
    case ValueType::kBool:
      if (!value.is_boolean()) {
        return Cat("must be true or false, got ", Shown(value));
      }
      return std::nullopt;
    case ValueType::kString:
    case ValueType::kEnum: {
      if (!value.is_string()) {
        return Cat("must be a string, got ", Shown(value));
      }
      std::vector<std::string> allowed = AllowedValues(key);
      if (key.type == ValueType::kEnum &&
          std::find(allowed.begin(), allowed.end(), value.get<std::string>()) == allowed.end()) {
        return Cat("must be one of ", absl::StrJoin(allowed, "|"), ", got ", Shown(value));
      }
      return std::nullopt;
    }
    case ValueType::kIntArray:
    case ValueType::kFloatArray:
      return CheckArray(key, value);
    case ValueType::kHeadMap:
      return CheckHeadMap(key, value);
    default:
      return Cat("has a type run specs do not hold");
  }
}

std::string_view Table(std::string_view name) {
  size_t dot = name.find('.');
  return dot == std::string_view::npos ? std::string_view() : name.substr(0, dot);
}

bool InRunSpecTables(std::string_view name) {
  const std::vector<std::string_view>& tables = RunSpecTables();
  return std::find(tables.begin(), tables.end(), Table(name)) != tables.end();
}

const KeyInfo* FindRunSpecKey(std::string_view name) {
  for (const KeyInfo& key : RunSpecKeys()) {
    if (key.name == name) {
      return &key;
    }
  }
  return nullptr;
}

// Experiment-scope keys of the trainer's tables (train.seeds): a run spec may carry them.
std::vector<std::string> IgnoredKeys() {
  std::vector<std::string> keys;
  for (const KeyInfo& key : Schema()) {
    if (key.scope == KeyScope::kExperiment && InRunSpecTables(key.name)) {
      keys.emplace_back(key.name);
    }
  }
  return keys;
}

std::string_view TypeName(ValueType type) {
  switch (type) {
    case ValueType::kInt:
      return "int";
    case ValueType::kFloat:
      return "float";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kEnum:
      return "enum";
    case ValueType::kIntArray:
      return "int_array";
    case ValueType::kFloatArray:
      return "float_array";
    case ValueType::kHeadMap:
      return "head_map";
    default:
      return "other";
  }
}

json KeyJson(const KeyInfo& key) {
  json entry = {{"name", key.name},
                {"type", TypeName(key.type)},
                {"doc", key.doc},
                {"default", json::parse(key.default_json)},
                {"trajectory", key.trajectory},
                {"range", DescribeRange(key)}};
  if (!key.absent_json.empty()) {
    entry["absent"] = json::parse(key.absent_json);
  }
  // Infinite bounds have no JSON number: an absent min or max is unbounded.
  if (std::isfinite(key.min)) {
    entry["min"] = key.min;
    entry["min_open"] = key.min_open;
  }
  if (std::isfinite(key.max)) {
    entry["max"] = key.max;
    entry["max_open"] = key.max_open;
  }
  if (key.type == ValueType::kEnum) {
    entry["allowed"] = AllowedValues(key);
  }
  if (key.type == ValueType::kIntArray || key.type == ValueType::kFloatArray ||
      key.type == ValueType::kHeadMap) {
    entry["unique"] = key.unique;
    entry["non_empty"] = key.non_empty;
  }
  return entry;
}

}  // namespace

absl::Status RunSpecError(std::string_view key, std::string_view why) {
  return absl::InvalidArgumentError(Cat("run spec: key \"", key, "\": ", why));
}

absl::StatusOr<json> CheckRunSpec(const json& spec, std::string_view program) {
  if (!spec.is_object()) {
    return absl::InvalidArgumentError("run spec: must be a JSON object");
  }
  const std::vector<std::string> ignored = IgnoredKeys();
  for (const auto& [name, value] : spec.items()) {
    if (InRunSpecTables(name) && FindRunSpecKey(name) == nullptr &&
        std::find(ignored.begin(), ignored.end(), name) == ignored.end()) {
      return RunSpecError(name, Cat("unknown key (is ", program, " older than taectl?)"));
    }
  }
  json checked = json::object();
  for (const KeyInfo& key : RunSpecKeys()) {
    const std::string name(key.name);
    auto it = spec.find(name);
    if (it == spec.end()) {
      if (key.absent_json.empty()) {
        return RunSpecError(name, "missing");
      }
      checked[name] = json::parse(key.absent_json);
      continue;
    }
    if (Why why = CheckValue(key, *it)) {
      return RunSpecError(name, *why);
    }
    checked[name] = *it;
  }
  return checked;
}

json DefaultRunSpec() {
  json spec = json::object();
  for (const KeyInfo& key : RunSpecKeys()) {
    spec[std::string(key.name)] = json::parse(key.default_json);
  }
  return spec;
}

std::string RunSpecFingerprint(const json& spec) {
  json kept = json::object();
  for (const KeyInfo& key : RunSpecKeys()) {
    auto it = spec.find(std::string(key.name));
    if (key.trajectory && it != spec.end()) {
      kept[std::string(key.name)] = *it;
    }
  }
  return kept.dump();
}

json RunSpecSchemaJson() {
  json keys = json::array();
  for (const KeyInfo& key : RunSpecKeys()) {
    keys.push_back(KeyJson(key));
  }
  return {{"source", "common/spec/schema.cc, written by tae-train --schema"},
          {"tables", RunSpecTables()},
          {"ignored", IgnoredKeys()},
          {"keys", std::move(keys)}};
}

}  // namespace tae::spec
