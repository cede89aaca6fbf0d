#include "common/spec/value.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "common/metrics/patterns.h"
#include "common/spec/text.h"

namespace tae::spec {
namespace {

using Result = std::optional<Problem>;

std::string_view Expected(ValueType type) {
  switch (type) {
    case ValueType::kInt:
      return "an integer";
    case ValueType::kFloat:
      return "a number";
    case ValueType::kBool:
      return "a boolean";
    case ValueType::kString:
    case ValueType::kEnum:
    case ValueType::kName:
      return "a string";
    case ValueType::kIntArray:
      return "an array of integers";
    case ValueType::kFloatArray:
      return "an array of numbers";
    case ValueType::kStringMap:
      return "a table of strings";
    case ValueType::kHeadMap:
      return "a table of layer -> head indices";
    case ValueType::kScalarArray:
      return "an array";
    case ValueType::kMetricList:
      return "an array of metric names";
    case ValueType::kGoalMap:
      return "a table of metric = \"min\" or \"max\"";
    case ValueType::kFloorMap:
      return "a table of metric = number";
    case ValueType::kSeeds:
      return "an array of integers or a table { min, max, alpha, margin }";
    case ValueType::kBytes:
      return "a size (bytes, or a string such as \"20GB\")";
    case ValueType::kPatterns:
      return "a regular expression, or an array of them";
  }
  return "a value";
}

Problem WrongType(std::string_view display, std::string_view expected, const toml::node& node) {
  return {node.source().begin,
          Cat(display, ": expected ", expected, ", got ", TypeName(node.type()))};
}

bool InRange(const KeyInfo& key, double value) {
  bool above = key.min_open ? value > key.min : value >= key.min;
  bool below = key.max_open ? value < key.max : value <= key.max;
  return above && below;
}

Problem OutOfRange(const KeyInfo& key, std::string_view display, std::string_view value,
                   const toml::node& node) {
  return {node.source().begin,
          Cat(display, ": ", value, " is out of range (must be ", DescribeRange(key), ")")};
}

bool IsNameChar(char c, bool allow_slash) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
         (allow_slash && c == '/');
}

bool IsValidName(std::string_view name, bool allow_slash) {
  if (name.empty() || name == "." || name == "..") {
    return false;
  }
  for (char c : name) {
    if (!IsNameChar(c, allow_slash)) {
      return false;
    }
  }
  return true;
}

Result ConvertInt(const KeyInfo& key, std::string_view display, const toml::node& node,
                  nlohmann::json* out) {
  const toml::value<int64_t>* value = node.as_integer();
  if (value == nullptr) {
    return WrongType(display, Expected(key.type), node);
  }
  int64_t v = value->get();
  if (!InRange(key, static_cast<double>(v))) {
    return OutOfRange(key, display, Cat(v), node);
  }
  *out = v;
  return std::nullopt;
}

Result ConvertFloat(const KeyInfo& key, std::string_view display, const toml::node& node,
                    nlohmann::json* out) {
  double v = 0;
  if (const toml::value<int64_t>* i = node.as_integer()) {
    v = static_cast<double>(i->get());
  } else if (const toml::value<double>* f = node.as_floating_point()) {
    v = f->get();
  } else {
    return WrongType(display, Expected(key.type), node);
  }
  if (!std::isfinite(v)) {
    return Problem{node.source().begin, Cat(display, ": ", v, " is not a finite number")};
  }
  if (!InRange(key, v)) {
    return OutOfRange(key, display, Cat(v), node);
  }
  *out = v;
  return std::nullopt;
}

Result ConvertBytes(const KeyInfo& key, std::string_view display, const toml::node& node,
                    nlohmann::json* out) {
  std::optional<int64_t> bytes;
  if (const toml::value<int64_t>* i = node.as_integer()) {
    if (i->get() >= 0) {
      bytes = i->get();
    }
  } else if (const toml::value<std::string>* text = node.as_string()) {
    bytes = ParseByteSize(text->get());
  } else {
    return WrongType(display, Expected(key.type), node);
  }
  if (!bytes.has_value()) {
    return Problem{node.source().begin,
                   Cat(display,
                       ": not a size (write bytes, or a number and a unit: B, KB, MB, "
                       "GB, TB, KiB, MiB, GiB, TiB, e.g. \"20GB\")")};
  }
  if (!InRange(key, static_cast<double>(*bytes))) {
    return OutOfRange(key, display, Cat(*bytes, " bytes"), node);
  }
  *out = *bytes;
  return std::nullopt;
}

Result ConvertString(const KeyInfo& key, std::string_view display, const toml::node& node,
                     nlohmann::json* out) {
  const toml::value<std::string>* value = node.as_string();
  if (value == nullptr) {
    return WrongType(display, Expected(key.type), node);
  }
  const std::string& v = value->get();
  if (key.type == ValueType::kEnum) {
    std::vector<std::string> allowed = AllowedValues(key);
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      return Problem{node.source().begin,
                     Cat(display, ": '", v, "' is not one of ", absl::StrJoin(allowed, ", "))};
    }
  }
  if (key.type == ValueType::kName && v.empty()) {
    return Problem{node.source().begin, Cat(display, ": must not be empty")};
  }
  if (key.type == ValueType::kName && !IsValidName(v, false)) {
    return Problem{node.source().begin,
                   Cat(display, ": '", v, "' is not a valid name (use [A-Za-z0-9._-]+)")};
  }
  *out = v;
  return std::nullopt;
}

Result ConvertIntArray(const KeyInfo& key, std::string_view display, const toml::node& node,
                       nlohmann::json* out) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    return WrongType(display, Expected(key.type), node);
  }
  if (key.non_empty && array->empty()) {
    return Problem{node.source().begin, Cat(display, ": must not be empty")};
  }
  nlohmann::json values = nlohmann::json::array();
  std::set<double> seen;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    std::string element_display = Cat(display, "[", i, "]");
    const toml::value<int64_t>* value = element.as_integer();
    const toml::value<double>* number = element.as_floating_point();
    const bool floats = key.type == ValueType::kFloatArray;
    if (value == nullptr && (!floats || number == nullptr)) {
      return WrongType(element_display, floats ? "a number" : "an integer", element);
    }
    const double v = value != nullptr ? static_cast<double>(value->get()) : number->get();
    const std::string shown = value != nullptr ? Cat(value->get()) : Cat(v);
    if (!InRange(key, v)) {
      return OutOfRange(key, element_display, shown, element);
    }
    if (key.unique && !seen.insert(v).second) {
      return Problem{element.source().begin, Cat(element_display, ": ", shown, " is listed twice")};
    }
    if (value != nullptr && !floats) {
      values.push_back(value->get());
    } else {
      values.push_back(v);
    }
  }
  *out = std::move(values);
  return std::nullopt;
}

Result ConvertStringMap(const KeyInfo& key, std::string_view display, const toml::node& node,
                        nlohmann::json* out) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return WrongType(display, Expected(key.type), node);
  }
  nlohmann::json values = nlohmann::json::object();
  for (auto&& [name, value] : *table) {
    if (!IsValidName(name.str(), true)) {
      return Problem{
          name.source().begin,
          Cat(display, ": '", name.str(), "' is not a valid label name (use [A-Za-z0-9._/-]+)")};
    }
    const toml::value<std::string>* text = value.as_string();
    if (text == nullptr) {
      return WrongType(Cat(display, ".", name.str()), "a string", value);
    }
    values[std::string(name.str())] = text->get();
  }
  *out = std::move(values);
  return std::nullopt;
}

// { "0" = [1, 3], "2" = [0] }: keys are layer indices written as strings (TOML keys are strings),
// values unique head indices. Stored as a JSON object with the canonical key ("01" -> "1").
Result ConvertHeadMap(const KeyInfo& key, std::string_view display, const toml::node& node,
                      nlohmann::json* out) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return WrongType(display, Expected(key.type), node);
  }
  KeyInfo heads_key = key;
  heads_key.type = ValueType::kIntArray;
  heads_key.min = 0;
  heads_key.unique = true;
  heads_key.non_empty = false;
  nlohmann::json values = nlohmann::json::object();
  for (auto&& [name, value] : *table) {
    std::string_view text = name.str();
    bool digits =
        !text.empty() && text.size() <= 6 &&
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      return Problem{name.source().begin,
                     Cat(display, ": '", text, "' is not a layer index (write \"0\" = [1, 3])")};
    }
    std::string layer = Cat(std::stoi(std::string(text)));
    if (values.contains(layer)) {
      return Problem{name.source().begin, Cat(display, ": layer ", layer, " is listed twice")};
    }
    nlohmann::json heads;
    if (Result problem = ConvertIntArray(heads_key, Cat(display, ".", layer), value, &heads)) {
      return problem;
    }
    values[layer] = std::move(heads);
  }
  *out = std::move(values);
  return std::nullopt;
}

}  // namespace

std::string_view TypeName(toml::node_type type) {
  switch (type) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

static Result ConvertScalarArray(const KeyInfo& key, std::string_view display,
                                 const toml::node& node, nlohmann::json* out) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    return WrongType(display, Expected(key.type), node);
  }
  nlohmann::json values = nlohmann::json::array();
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    if (const auto* v = element.as_integer()) {
      values.push_back(v->get());
    } else if (const auto* f = element.as_floating_point()) {
      if (!std::isfinite(f->get())) {
        return Problem{element.source().begin, Cat(display, "[", i, "]: must be finite")};
      }
      values.push_back(f->get());
    } else if (const auto* b = element.as_boolean()) {
      values.push_back(b->get());
    } else if (const auto* s = element.as_string()) {
      values.push_back(s->get());
    } else {
      return Problem{element.source().begin,
                     Cat(display, "[", i, "]: expected a number, boolean or string, got ",
                         TypeName(element.type()))};
    }
  }
  *out = std::move(values);
  return std::nullopt;
}

static Result ConvertMetricList(const KeyInfo& key, std::string_view display,
                                const toml::node& node, nlohmann::json* out) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    return WrongType(display, Expected(key.type), node);
  }
  nlohmann::json names = nlohmann::json::array();
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const toml::value<std::string>* text = element.as_string();
    if (text == nullptr || text->get().empty() || text->get().size() > 128) {
      return Problem{element.source().begin,
                     Cat(display, "[", i, "]: expected a metric name (1-128 characters)")};
    }
    if (std::find(names.begin(), names.end(), text->get()) != names.end()) {
      return Problem{element.source().begin, Cat(display, ": '", text->get(), "' is listed twice")};
    }
    names.push_back(text->get());
  }
  *out = std::move(names);
  return std::nullopt;
}

// job.metrics.pattern: one RE2 pattern or an array of them, each checked here, at submit.
static Result ConvertPatterns(const KeyInfo& key, std::string_view display, const toml::node& node,
                              nlohmann::json* out) {
  std::vector<const toml::node*> elements;
  if (const toml::array* array = node.as_array()) {
    for (const toml::node& element : *array) {
      elements.push_back(&element);
    }
  } else {
    elements.push_back(&node);
  }
  nlohmann::json patterns = nlohmann::json::array();
  for (size_t i = 0; i < elements.size(); ++i) {
    const toml::value<std::string>* text = elements[i]->as_string();
    const std::string element_display =
        node.is_array() ? Cat(display, "[", i, "]") : std::string(display);
    if (text == nullptr) {
      return WrongType(element_display, Expected(key.type), *elements[i]);
    }
    if (absl::Status ok = metrics::CheckPattern(text->get()); !ok.ok()) {
      return Problem{elements[i]->source().begin,
                     Cat(element_display, ": ", std::string(ok.message()))};
    }
    patterns.push_back(text->get());
  }
  *out = std::move(patterns);
  return std::nullopt;
}

static Result ConvertGoalMap(const KeyInfo& key, std::string_view display, const toml::node& node,
                             nlohmann::json* out) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return WrongType(display, Expected(key.type), node);
  }
  nlohmann::json goals = nlohmann::json::object();
  for (auto&& [name, value] : *table) {
    const toml::value<std::string>* text = value.as_string();
    if (text == nullptr || (text->get() != "min" && text->get() != "max")) {
      const toml::source_position where =
          value.source().begin ? value.source().begin : name.source().begin;
      return Problem{where, Cat(display, ".", name.str(), ": expected \"min\" or \"max\"")};
    }
    goals[std::string(name.str())] = text->get();
  }
  *out = std::move(goals);
  return std::nullopt;
}

// metric -> finite number, for [report] floor and train.seeds.margin (`positive`: > 0).
static Result ConvertNumberMap(const KeyInfo& key, std::string_view display, const toml::node& node,
                               bool positive, nlohmann::json* out) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return WrongType(display, "a table of metric = number", node);
  }
  nlohmann::json numbers = nlohmann::json::object();
  for (auto&& [name, value] : *table) {
    const std::string element_display = Cat(display, ".", name.str());
    double v = 0;
    if (const toml::value<int64_t>* i = value.as_integer()) {
      v = static_cast<double>(i->get());
    } else if (const toml::value<double>* f = value.as_floating_point()) {
      v = f->get();
    } else {
      return WrongType(element_display, "a number", value);
    }
    if (!std::isfinite(v) || (positive && v <= 0)) {
      return Problem{value.source().begin,
                     Cat(element_display, ": ", v, positive ? " must be > 0" : " is not finite")};
    }
    numbers[std::string(name.str())] = v;
  }
  *out = std::move(numbers);
  return std::nullopt;
}

// train.seeds = { min = 3, max = 12, alpha = 0.05, margin = { "eval/acc" = 0.01 } }.
static Result ConvertSeedsTable(const KeyInfo& key, std::string_view display,
                                const toml::table& table, nlohmann::json* out) {
  nlohmann::json seeds = {
      {"min", 3}, {"max", 12}, {"alpha", 0.05}, {"margin", nlohmann::json::object()}};
  KeyInfo count = key;
  count.type = ValueType::kInt;
  count.min = 2;
  count.max = 100;
  KeyInfo alpha = key;
  alpha.type = ValueType::kFloat;
  alpha.min = 0;
  alpha.max = 0.5;
  alpha.min_open = alpha.max_open = true;
  for (auto&& [name, value] : table) {
    const std::string field(name.str());
    const std::string field_display = Cat(display, ".", field);
    nlohmann::json converted;
    Result problem;
    if (field == "min" || field == "max") {
      problem = ConvertInt(count, field_display, value, &converted);
    } else if (field == "alpha") {
      problem = ConvertFloat(alpha, field_display, value, &converted);
    } else if (field == "margin") {
      problem = ConvertNumberMap(key, field_display, value, true, &converted);
    } else {
      return Problem{name.source().begin,
                     Cat(field_display,
                         ": unknown key (train.seeds takes min, max, alpha and "
                         "margin)")};
    }
    if (problem) {
      return problem;
    }
    seeds[field] = std::move(converted);
  }
  if (seeds["max"].get<int64_t>() < seeds["min"].get<int64_t>()) {
    const toml::node* max = table.get("max");
    return Problem{max != nullptr ? max->source().begin : table.source().begin,
                   Cat(display, ".max: ", seeds["max"].get<int64_t>(), " is below min (",
                       seeds["min"].get<int64_t>(), ")")};
  }
  *out = std::move(seeds);
  return std::nullopt;
}

std::optional<Problem> ConvertValue(const KeyInfo& key, std::string_view display,
                                    const toml::node& node, nlohmann::json* out) {
  switch (key.type) {
    case ValueType::kInt:
      return ConvertInt(key, display, node, out);
    case ValueType::kFloat:
      return ConvertFloat(key, display, node, out);
    case ValueType::kBool:
      if (const toml::value<bool>* value = node.as_boolean()) {
        *out = value->get();
        return std::nullopt;
      }
      return WrongType(display, Expected(key.type), node);
    case ValueType::kString:
    case ValueType::kEnum:
    case ValueType::kName:
      return ConvertString(key, display, node, out);
    case ValueType::kIntArray:
    case ValueType::kFloatArray:
      return ConvertIntArray(key, display, node, out);
    case ValueType::kStringMap:
      return ConvertStringMap(key, display, node, out);
    case ValueType::kHeadMap:
      return ConvertHeadMap(key, display, node, out);
    case ValueType::kScalarArray:
      return ConvertScalarArray(key, display, node, out);
    case ValueType::kMetricList:
      return ConvertMetricList(key, display, node, out);
    case ValueType::kBytes:
      return ConvertBytes(key, display, node, out);
    case ValueType::kPatterns:
      return ConvertPatterns(key, display, node, out);
    case ValueType::kGoalMap:
      return ConvertGoalMap(key, display, node, out);
    case ValueType::kFloorMap:
      return ConvertNumberMap(key, display, node, false, out);
    case ValueType::kSeeds:
      if (const toml::table* table = node.as_table()) {
        return ConvertSeedsTable(key, display, *table, out);
      }
      return ConvertIntArray(key, display, node, out);
  }
  return WrongType(display, "a value", node);
}

std::optional<int64_t> ParseByteSize(std::string_view whole) {
  const absl::string_view text =
      absl::StripAsciiWhitespace(absl::string_view(whole.data(), whole.size()));
  size_t number_end = 0;
  while (number_end < text.size() &&
         (absl::ascii_isdigit(static_cast<unsigned char>(text[number_end])) ||
          text[number_end] == '.')) {
    ++number_end;
  }
  double number = 0;
  if (number_end == 0 || !absl::SimpleAtod(text.substr(0, number_end), &number) ||
      !std::isfinite(number) || number < 0) {
    return std::nullopt;
  }
  const std::string unit =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(text.substr(number_end)));
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"b", 1},
                                                          {"kb", 1e3},
                                                          {"mb", 1e6},
                                                          {"gb", 1e9},
                                                          {"tb", 1e12},
                                                          {"kib", 1024.0},
                                                          {"mib", 1048576.0},
                                                          {"gib", 1073741824.0},
                                                          {"tib", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      const double bytes = std::round(number * scale);
      if (bytes >= 9.2e18) {
        return std::nullopt;
      }
      return static_cast<int64_t>(bytes);
    }
  }
  return std::nullopt;
}

}  // namespace tae::spec
