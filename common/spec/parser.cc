// ParseSpec: TOML -> validated Spec. Walks the whole file collecting problems and reports the
// first in file order, then applies --set overrides, then runs the cross-key checks on the
// baseline and on every ablation's resolved config.
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/metrics/names.h"
#include "common/spec/checks.h"
#include "common/spec/overrides.h"
#include "common/spec/params.h"
#include "common/spec/schema.h"
#include "common/spec/spec.h"
#include "common/spec/text.h"
#include "common/spec/value.h"

namespace tae::spec {
namespace {

constexpr std::string_view kAblationTable = "ablation";
constexpr std::string_view kSeedsKey = "train.seeds";

// The layers a value can come from, weakest first.
enum class Layer { kDefault, kFile, kSet, kGrid, kAblation };

struct Origin {
  Layer layer = Layer::kDefault;
  toml::source_position where{1, 1};
  std::string set_arg;  // kSet: "KEY=VALUE"
};

using Origins = std::map<std::string, Origin, std::less<>>;

struct ParsedAblation {
  std::string name;
  toml::source_position where;  // the [[ablation]] table
  nlohmann::json overrides = nlohmann::json::object();
  Origins origins;
  std::map<std::string, toml::source_position, std::less<>> keys;  // where each override's key is
  bool has_entries = false;  // any key besides name, valid or not
};

struct ParsedAxis {
  std::string key;
  toml::source_position where;                   // the key
  std::vector<nlohmann::json> values;            // converted, file order
  std::vector<toml::source_position> positions;  // of each value
};

// [scale]: the ladder's run keys (each with a value per rung), scale.params and scale.stop_if.
struct ParsedScale {
  toml::source_position where{0, 0};  // the [scale] table; line 0: no [scale]
  std::vector<ParsedAxis> keys;       // in key order
  std::vector<double> params;
  toml::source_position params_where{1, 1};
  ScaleStop stop_if;

  bool declared() const { return where.line > 0 && !keys.empty(); }
  size_t rungs() const { return keys.empty() ? 0 : keys.front().values.size(); }
  // The overrides of rung `r`: each laddered key at its value there.
  nlohmann::json Rung(size_t r) const {
    nlohmann::json rung = nlohmann::json::object();
    for (const ParsedAxis& axis : keys) {
      rung[axis.key] = axis.values[r];
    }
    return rung;
  }
};

// Everything the file (and later --set) says, flat, including name/description/train.seeds.
struct Draft {
  nlohmann::json values = nlohmann::json::object();
  Origins origins;
  std::vector<ParsedAblation> ablations;
  std::vector<ParsedAxis> grid;
  toml::source_position grid_where{1, 1};                                 // the [grid] table
  ParsedScale scale;                                                      // [scale]
  std::shared_ptr<ParamSchema> params = std::make_shared<ParamSchema>();  // [params]
};

absl::Status Error(std::string_view path, const Origin& origin, std::string_view what) {
  if (origin.layer == Layer::kSet) {
    return absl::InvalidArgumentError(Cat("--set ", origin.set_arg, ": ", what));
  }
  return absl::InvalidArgumentError(
      Cat(path, ":", origin.where.line, ":", origin.where.column, ": ", what));
}

bool Before(const toml::source_position& a, const toml::source_position& b) {
  return std::tie(a.line, a.column) < std::tie(b.line, b.column);
}

std::vector<std::string_view> KeyNames(bool run_scope_only) {
  std::vector<std::string_view> names;
  for (const KeyInfo& key : Schema()) {
    if (!run_scope_only || key.scope == KeyScope::kRun) {
      names.push_back(key.name);
    }
  }
  return names;
}

std::vector<std::string_view> TableNames() {
  std::vector<std::string_view> names = Sections();
  names.push_back(kAblationTable);
  names.push_back(kParamsTable);
  return names;
}

// Candidates for an unknown top-level key: a key that belongs in a table ("lr" -> "train.lr")
// or a misspelt table written with dotted keys ("modle.layers = 2" -> "model").
std::vector<std::string_view> TopLevelNames() {
  std::vector<std::string_view> names = TableNames();
  std::vector<std::string_view> keys = KeyNames(false);
  names.insert(names.end(), keys.begin(), keys.end());
  return names;
}

bool IsSection(std::string_view name) {
  const std::vector<std::string_view>& sections = Sections();
  return std::find(sections.begin(), sections.end(), name) != sections.end();
}

// A table of schema keys below a section, e.g. "job.metrics" (of job.metrics.pattern, ...).
bool IsSubtable(std::string_view name) {
  const std::string prefix = Cat(name, ".");
  for (const KeyInfo& key : Schema()) {
    if (key.name.substr(0, prefix.size()) == prefix) {
      return true;
    }
  }
  return false;
}

Problem Unknown(std::string_view full, const toml::key& key, const toml::node& node,
                const std::vector<std::string_view>& candidates) {
  std::string hint = DidYouMean(full, candidates);
  if (hint.empty() && full.substr(0, kParamsTable.size() + 1) == Cat(kParamsTable, ".")) {
    hint = " (declare it in [params] first)";
  }
  if (node.is_table()) {
    return {node.source().begin, Cat("unknown table '", full, "'", hint)};
  }
  return {key.source().begin, Cat("unknown key '", full, "'", hint)};
}

class FileWalker {
 public:
  FileWalker();
  // A schema key or a declared param, or nullptr.
  const KeyInfo* Find(std::string_view name) const;

  void Walk(const toml::table& root);

  // The first problem in file order, if any.
  std::optional<Problem> FirstProblem() const;

  Draft TakeDraft() { return std::move(draft_); }

 private:
  void WalkRoot(const toml::table& root);
  // [params]: declares every key (nested tables group them) with its value as the baseline's.
  void WalkParams(std::string_view prefix, const toml::node& node);
  // Whether a table at `full` holds keys to walk into: a section at the top, or a params group.
  bool IsGroup(std::string_view prefix, std::string_view full) const;
  // Run-scope keys (schema and params), for suggestions.
  std::vector<std::string_view> RunKeyNames() const;
  void WalkSection(std::string_view section, const toml::node& node);
  void WalkAblations(const toml::node& node);
  void WalkAblation(size_t index, const toml::table& table);
  void WalkOverride(std::string_view prefix, const toml::key& key, const toml::node& node,
                    ParsedAblation* ablation);
  void CheckAblationName(const ParsedAblation& ablation, const toml::node& name_node);
  void WalkGrid(const toml::node& node);
  void WalkGridEntry(std::string_view prefix, const toml::key& key, const toml::node& node);
  // An ablation may not override a key that [grid] varies (its grid points would be identical),
  // nor one that [scale] ladders (the ladder applies to every variant alike).
  void CheckAblationsAgainstGrid();
  // [scale]: run keys = [a value per rung], params = [N per rung], stop_if = { rungs, band }.
  void WalkScale(const toml::node& node);
  void WalkScaleEntry(std::string_view prefix, const toml::key& key, const toml::node& node);
  void WalkScaleStop(const toml::node& node);
  void CheckScale();
  // Converts `node` as `key` into values[key.name] with its origin; records a problem if bad.
  void Store(const KeyInfo& key, std::string_view display, const toml::node& node, Layer layer,
             nlohmann::json* values, Origins* origins);
  void Add(std::optional<Problem> problem);

  Draft draft_;
  std::vector<Problem> problems_;
  bool scale_entry_problem_ = false;  // [scale] had a bad entry: it is the one to report
};

FileWalker::FileWalker() {
  for (const KeyInfo& key : Schema()) {
    if (!key.default_json.empty()) {
      draft_.values[std::string(key.name)] = nlohmann::json::parse(key.default_json);
    }
  }
}

const KeyInfo* FileWalker::Find(std::string_view name) const {
  return FindKeyOrParam(name, draft_.params.get());
}

bool FileWalker::IsGroup(std::string_view prefix, std::string_view full) const {
  return (prefix.empty() && IsSection(full)) || IsSubtable(full) || draft_.params->IsGroup(full);
}

std::vector<std::string_view> FileWalker::RunKeyNames() const {
  return WithParams(KeyNames(true), draft_.params.get());
}

void FileWalker::WalkParams(std::string_view prefix, const toml::node& node) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    Add(Problem{node.source().begin,
                Cat(prefix, ": expected a table of params, got ", TypeName(node.type()))});
    return;
  }
  for (auto&& [key, value] : *table) {
    const std::string full = Cat(prefix, ".", key.str());
    if (value.is_table()) {
      WalkParams(full, value);
      continue;
    }
    if (std::optional<Problem> problem = draft_.params->Declare(full, key, value)) {
      Add(std::move(problem));
      continue;
    }
    Store(*draft_.params->Find(full), full, value, Layer::kFile, &draft_.values, &draft_.origins);
  }
}

void FileWalker::Add(std::optional<Problem> problem) {
  if (problem) {
    problems_.push_back(std::move(*problem));
  }
}

std::optional<Problem> FileWalker::FirstProblem() const {
  std::optional<Problem> first;
  for (const Problem& problem : problems_) {
    if (!first || Before(problem.where, first->where)) {
      first = problem;
    }
  }
  return first;
}

void FileWalker::Store(const KeyInfo& key, std::string_view display, const toml::node& node,
                       Layer layer, nlohmann::json* values, Origins* origins) {
  nlohmann::json value;
  if (std::optional<Problem> problem = ConvertValue(key, display, node, &value)) {
    Add(std::move(problem));
    return;
  }
  (*values)[std::string(key.name)] = std::move(value);
  // toml++ gives inline tables no source position; point at the value's first element instead.
  toml::source_position where = node.source().begin;
  if (!where && node.is_table() && !node.as_table()->empty()) {
    where = node.as_table()->cbegin()->first.source().begin;
  }
  (*origins)[std::string(key.name)] = Origin{layer, where, ""};
}

void FileWalker::Walk(const toml::table& root) {
  WalkRoot(root);
  CheckAblationsAgainstGrid();
  CheckScale();
}

void FileWalker::WalkRoot(const toml::table& root) {
  // Declared first: ablations and [grid] (which sort before it) may name them.
  if (const toml::node* params = root.get(kParamsTable)) {
    WalkParams(kParamsTable, *params);
  }
  for (auto&& [key, node] : root) {
    std::string_view name = key.str();
    if (name == kParamsTable) {
      continue;
    }
    const KeyInfo* info = FindKey(name);
    if (info != nullptr) {
      Store(*info, info->name, node, Layer::kFile, &draft_.values, &draft_.origins);
    } else if (IsSection(name)) {
      WalkSection(name, node);
    } else if (name == kAblationTable) {
      WalkAblations(node);
    } else if (name == "grid") {
      WalkGrid(node);
    } else if (name == "scale") {
      WalkScale(node);
    } else {
      Add(Unknown(name, key, node, node.is_table() ? TableNames() : TopLevelNames()));
    }
  }
}

void FileWalker::WalkGrid(const toml::node& node) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    Add(Problem{node.source().begin, Cat("grid: expected a table, got ", TypeName(node.type()))});
    return;
  }
  draft_.grid_where = node.source().begin;
  if (table->empty()) {
    Add(Problem{node.source().begin, "[grid] is empty: give it at least one key = [values]"});
  }
  for (auto&& [key, value] : *table) {
    WalkGridEntry("", key, value);
  }
}

void FileWalker::WalkGridEntry(std::string_view prefix, const toml::key& key,
                               const toml::node& node) {
  std::string full = prefix.empty() ? std::string(key.str()) : Cat(prefix, ".", key.str());
  const KeyInfo* info = Find(full);
  if (info == nullptr) {
    if (IsGroup(prefix, full) && node.is_table()) {
      for (auto&& [sub_key, sub_node] : *node.as_table()) {
        WalkGridEntry(full, sub_key, sub_node);
      }
    } else {
      Add(Unknown(full, key, node, RunKeyNames()));
    }
    return;
  }
  if (info->scope != KeyScope::kRun) {
    Add(Problem{key.source().begin,
                Cat(full, " cannot be varied in [grid]",
                    full == kSeedsKey ? " (every variant already runs once per seed)" : "")});
    return;
  }
  for (const ParsedAxis& axis : draft_.grid) {
    if (axis.key == full) {
      Add(Problem{std::max(axis.where, key.source().begin, Before),
                  Cat("duplicate [grid] key '", full, "'")});
      return;
    }
  }
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    Add(Problem{node.source().begin, Cat("[grid] ", full, ": expected an array of values, got ",
                                         TypeName(node.type()), " (write ", full, " = [a, b])")});
    return;
  }
  if (array->empty()) {
    Add(Problem{node.source().begin, Cat("[grid] ", full, ": needs at least one value")});
    return;
  }
  ParsedAxis axis{full, key.source().begin, {}, {}};
  for (const toml::node& element : *array) {
    nlohmann::json value;
    if (std::optional<Problem> problem = ConvertValue(*info, info->name, element, &value)) {
      Add(std::move(problem));
      return;
    }
    if (std::find(axis.values.begin(), axis.values.end(), value) != axis.values.end()) {
      Add(Problem{element.source().begin,
                  Cat("[grid] ", full, ": value ", value.dump(), " is listed twice")});
      return;
    }
    axis.values.push_back(std::move(value));
    axis.positions.push_back(element.source().begin);
  }
  draft_.grid.push_back(std::move(axis));
}

void FileWalker::CheckAblationsAgainstGrid() {
  for (const ParsedAblation& ablation : draft_.ablations) {
    for (const ParsedAxis& axis : draft_.grid) {
      auto it = ablation.keys.find(axis.key);
      if (it != ablation.keys.end()) {
        Add(Problem{it->second, Cat("ablation '", ablation.name, "' sets ", axis.key,
                                    ", which [grid] varies (line ", axis.where.line,
                                    "); drop one of the two")});
      }
    }
    for (const ParsedAxis& axis : draft_.scale.keys) {
      auto it = ablation.keys.find(axis.key);
      if (it != ablation.keys.end()) {
        Add(Problem{it->second, Cat("ablation '", ablation.name, "' sets ", axis.key,
                                    ", which [scale] ladders for every variant alike (line ",
                                    axis.where.line, "); drop one of the two")});
      }
    }
  }
}

void FileWalker::WalkScale(const toml::node& node) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    Add(Problem{node.source().begin, Cat("scale: expected a table, got ", TypeName(node.type()))});
    return;
  }
  draft_.scale.where = node.source().begin;
  if (draft_.scale.where.line == 0) {
    draft_.scale.where = {1, 1};
  }
  const size_t problems_before = problems_.size();
  for (auto&& [key, value] : *table) {
    if (key.str() == "params") {
      draft_.scale.params_where = key.source().begin;
      const toml::array* array = value.as_array();
      bool good = array != nullptr && !array->empty();
      for (size_t i = 0; good && i < array->size(); ++i) {
        std::optional<double> n = array->get(i)->value<double>();
        good = n.has_value() && std::isfinite(*n) && *n >= 1;
        if (good) {
          draft_.scale.params.push_back(*n);
        }
      }
      if (!good) {
        Add(Problem{value.source().begin,
                    "scale.params: expected a list of parameter counts >= 1, one per rung "
                    "(params = [1.2e6, 4.8e6, ...])"});
      }
    } else if (key.str() == "stop_if") {
      WalkScaleStop(value);
    } else {
      WalkScaleEntry("", key, value);
    }
  }
  scale_entry_problem_ = problems_.size() > problems_before;
}

void FileWalker::WalkScaleStop(const toml::node& node) {
  const toml::table* table = node.as_table();
  const std::string usage =
      "scale.stop_if: expected { rungs = K, band = B }: a variant whose multiplier's 95% CI lies "
      "within 1 +- B after the first K rungs skips its larger rungs";
  if (table == nullptr) {
    Add(Problem{node.source().begin, usage});
    return;
  }
  ScaleStop& stop = draft_.scale.stop_if;
  for (auto&& [key, value] : *table) {
    if (key.str() == "rungs" && value.value<int64_t>().has_value()) {
      stop.rungs = static_cast<int>(std::clamp<int64_t>(*value.value<int64_t>(), -1, 1000));
    } else if (key.str() == "band" && value.value<double>().has_value()) {
      stop.band = *value.value<double>();
    } else {
      Add(Problem{key.source().begin, usage});
      return;
    }
  }
  if (stop.rungs < 2 || !(stop.band > 0 && stop.band < 1)) {
    Add(Problem{node.source().begin,
                Cat(usage, "; rungs must be >= 2 (a multiplier needs two sizes) and band in (0, 1)")});
  }
}

void FileWalker::WalkScaleEntry(std::string_view prefix, const toml::key& key,
                                const toml::node& node) {
  std::string full = prefix.empty() ? std::string(key.str()) : Cat(prefix, ".", key.str());
  const KeyInfo* info = Find(full);
  if (info == nullptr) {
    if (IsGroup(prefix, full) && node.is_table()) {
      for (auto&& [sub_key, sub_node] : *node.as_table()) {
        WalkScaleEntry(full, sub_key, sub_node);
      }
    } else {
      std::vector<std::string_view> names = RunKeyNames();
      names.push_back("params");
      names.push_back("stop_if");
      Add(Unknown(full, key, node, names));
    }
    return;
  }
  if (info->scope != KeyScope::kRun || full == "train.seed") {
    Add(Problem{key.source().begin, Cat(full, " cannot be laddered in [scale]")});
    return;
  }
  const toml::array* array = node.as_array();
  if (array == nullptr || array->empty()) {
    Add(Problem{node.source().begin, Cat("[scale] ", full, ": expected an array of values, one per "
                                         "rung (write ", full, " = [small, ..., large])")});
    return;
  }
  ParsedAxis axis{full, key.source().begin, {}, {}};
  for (const toml::node& element : *array) {
    nlohmann::json value;
    if (std::optional<Problem> problem = ConvertValue(*info, info->name, element, &value)) {
      Add(std::move(problem));
      return;
    }
    axis.values.push_back(std::move(value));
    axis.positions.push_back(element.source().begin);
  }
  draft_.scale.keys.push_back(std::move(axis));
}

void FileWalker::CheckScale() {
  ParsedScale& scale = draft_.scale;
  if (scale.where.line == 0 || scale_entry_problem_) {
    return;
  }
  if (scale.keys.empty()) {
    Add(Problem{scale.where,
                "[scale] ladders no run key: give each key the rungs take, e.g. "
                "\"model.d_model\" = [64, 128, 256, 512]"});
    return;
  }
  const size_t rungs = scale.rungs();
  for (const ParsedAxis& axis : scale.keys) {
    if (axis.values.size() != rungs) {
      Add(Problem{axis.where, Cat("[scale] ", axis.key, " has ", axis.values.size(),
                                  " values but ", scale.keys.front().key, " has ", rungs,
                                  ": every laddered key gives one value per rung")});
      return;
    }
    for (const ParsedAxis& grid : draft_.grid) {
      if (grid.key == axis.key) {
        Add(Problem{std::max(axis.where, grid.where, Before),
                    Cat(axis.key, " is both laddered by [scale] and varied by [grid]; drop one")});
        return;
      }
    }
  }
  if (rungs < 2) {
    Add(Problem{scale.where, "[scale] needs at least 2 rungs (4 or more to fit a trend)"});
    return;
  }
  if (!scale.params.empty() && scale.params.size() != rungs) {
    Add(Problem{scale.params_where, Cat("scale.params has ", scale.params.size(),
                                        " values for ", rungs, " rungs")});
    return;
  }
  for (size_t r = 0; r < rungs; ++r) {
    for (size_t q = 0; q < r; ++q) {
      if (scale.Rung(q) == scale.Rung(r)) {
        Add(Problem{scale.keys.front().positions[r],
                    Cat("[scale] rungs ", q, " and ", r, " are the same model: ",
                        scale.Rung(r).dump())});
        return;
      }
    }
    if (!scale.params.empty() && r > 0 && !(scale.params[r] > scale.params[r - 1])) {
      Add(Problem{scale.params_where,
                  "scale.params must grow from rung to rung: list the ladder small to large"});
      return;
    }
  }
  if (scale.stop_if.rungs > 0 && draft_.values.at(std::string(kSeedsKey)).is_object()) {
    Add(Problem{scale.where, Cat("scale.stop_if with adaptive ", kSeedsKey,
                                 " is not supported: give ", kSeedsKey, " as a list")});
    return;
  }
  if (scale.stop_if.rungs >= static_cast<int>(rungs)) {
    Add(Problem{scale.where, Cat("scale.stop_if.rungs = ", scale.stop_if.rungs,
                                 " leaves no larger rung to skip (the ladder has ", rungs, ")")});
  }
}

void FileWalker::WalkSection(std::string_view section, const toml::node& node) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    Add(Problem{node.source().begin,
                Cat(section, ": expected a table, got ", TypeName(node.type()))});
    return;
  }
  for (auto&& [key, value] : *table) {
    std::string full = Cat(section, ".", key.str());
    if (const KeyInfo* info = FindKey(full)) {
      Store(*info, info->name, value, Layer::kFile, &draft_.values, &draft_.origins);
    } else if (IsSubtable(full) && value.is_table()) {
      WalkSection(full, value);  // e.g. [job.metrics]
    } else {
      Add(Unknown(full, key, value, KeyNames(false)));
    }
  }
}

void FileWalker::WalkAblations(const toml::node& node) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    Add(Problem{
        node.source().begin,
        Cat("ablation: expected an array of tables ([[ablation]]), got ", TypeName(node.type()))});
    return;
  }
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    if (const toml::table* table = element.as_table()) {
      WalkAblation(i, *table);
    } else {
      Add(Problem{element.source().begin,
                  Cat("ablation #", i + 1, ": expected a table, got ", TypeName(element.type()))});
    }
  }
}

void FileWalker::WalkAblation(size_t index, const toml::table& table) {
  ParsedAblation ablation;
  ablation.where = table.source().begin;
  const toml::node* name_node = nullptr;
  for (auto&& [key, value] : table) {
    if (key.str() == "name") {
      name_node = &value;
    } else {
      ablation.has_entries = true;
      WalkOverride("", key, value, &ablation);
    }
  }
  if (name_node == nullptr) {
    Add(Problem{ablation.where, Cat("ablation #", index + 1, ": missing required key 'name'")});
  } else {
    nlohmann::json name;
    if (std::optional<Problem> problem =
            ConvertValue(*FindKey("name"), "ablation name", *name_node, &name)) {
      Add(std::move(problem));
    } else {
      ablation.name = name.get<std::string>();
      CheckAblationName(ablation, *name_node);
    }
  }
  if (!ablation.has_entries) {
    std::string label = ablation.name.empty() ? Cat("#", index + 1) : Cat("'", ablation.name, "'");
    Add(Problem{ablation.where,
                Cat("ablation ", label,
                    " has no overrides (add one such as \"model.norm\" = \"rmsnorm\")")});
  }
  draft_.ablations.push_back(std::move(ablation));
}

void FileWalker::CheckAblationName(const ParsedAblation& ablation, const toml::node& name_node) {
  if (ablation.name == kBaselineName) {
    Add(Problem{name_node.source().begin,
                "ablation name 'baseline' is reserved for the implicit baseline variant"});
    return;
  }
  for (const ParsedAblation& other : draft_.ablations) {
    if (other.name == ablation.name) {
      Add(Problem{name_node.source().begin,
                  Cat("duplicate ablation name '", ablation.name, "' (first defined at ",
                      other.where.line, ":", other.where.column, ")")});
      return;
    }
  }
}

void FileWalker::WalkOverride(std::string_view prefix, const toml::key& key, const toml::node& node,
                              ParsedAblation* ablation) {
  std::string full = prefix.empty() ? std::string(key.str()) : Cat(prefix, ".", key.str());
  const KeyInfo* info = Find(full);
  if (info != nullptr && info->scope == KeyScope::kRun) {
    auto [it, inserted] = ablation->keys.emplace(full, key.source().begin);
    if (inserted) {
      Store(*info, info->name, node, Layer::kAblation, &ablation->overrides, &ablation->origins);
    } else {
      // Written twice (quoted "model.x" and nested model.x): report the later one.
      toml::source_position later = std::max(it->second, key.source().begin, Before);
      Add(Problem{later, Cat("duplicate override '", full, "'")});
    }
  } else if (info != nullptr) {
    Add(Problem{key.source().begin,
                Cat(full, " cannot be overridden in an ablation",
                    full == kSeedsKey ? " (every variant runs once per seed)" : "")});
  } else if (IsGroup(prefix, full) && node.is_table()) {
    for (auto&& [sub_key, sub_node] : *node.as_table()) {
      WalkOverride(full, sub_key, sub_node, ablation);
    }
  } else {
    Add(Unknown(full, key, node, RunKeyNames()));
  }
}

void ApplyOverrides(const std::vector<SetOverride>& sets, Draft* draft) {
  for (const SetOverride& set : sets) {
    std::string name(set.key->name);
    draft->values[name] = set.value;
    draft->origins[name] = Origin{Layer::kSet, {1, 1}, set.arg};
  }
}

const Origin* FindOrigin(const Origins* origins, std::string_view key) {
  if (origins == nullptr) {
    return nullptr;
  }
  auto it = origins->find(key);
  return it == origins->end() ? nullptr : &it->second;
}

// Where to report a cross-key problem: at the involved key set by the latest layer (ablation,
// --set, file), the offending key first on ties; 1:1 if only defaults are involved.
Origin Blame(const CrossProblem& problem, const Origins& base, const Origins* ablation) {
  Origin blamed;
  for (std::string_view key : problem.keys) {
    const Origin* origin = FindOrigin(ablation, key);
    if (origin == nullptr) {
      origin = FindOrigin(&base, key);
    }
    if (origin != nullptr && origin->layer > blamed.layer) {
      blamed = *origin;
    }
  }
  return blamed;
}

// A --set of a key that [grid] varies would be silently replaced by the grid's values.
absl::Status CheckSetsAgainstGrid(std::string_view path, const Draft& draft) {
  std::vector<ParsedAxis> varied = draft.grid;
  varied.insert(varied.end(), draft.scale.keys.begin(), draft.scale.keys.end());
  for (const ParsedAxis& axis : varied) {
    const Origin* origin = FindOrigin(&draft.origins, axis.key);
    if (origin != nullptr && origin->layer == Layer::kSet) {
      return Error(path, *origin,
                   Cat("[grid] varies ", axis.key, " (line ", axis.where.line,
                       "), so it cannot also be set; use --set on the [grid] key's values in the "
                       "file instead"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRunCount(std::string_view path, const Draft& draft) {
  double points = 1;  // a double: a large grid must not overflow before it is refused
  for (const ParsedAxis& axis : draft.grid) {
    points *= static_cast<double>(axis.values.size());
  }
  const auto variants = static_cast<double>(1 + draft.ablations.size());
  const nlohmann::json& seeds_value = draft.values.at(std::string(kSeedsKey));
  // Adaptive seeds: as many runs as max seeds could make.
  const auto seeds = static_cast<double>(
      seeds_value.is_object() ? seeds_value.at("max").get<int64_t>() : seeds_value.size());
  const double rungs = draft.scale.declared() ? static_cast<double>(draft.scale.rungs()) : 1;
  const double runs = rungs * points * variants * seeds;
  if (runs > static_cast<double>(kMaxRuns)) {
    return Error(path, Origin{Layer::kFile, draft.grid_where, ""},
                 absl::StrFormat("the experiment expands to %.0f runs (%s%.0f grid points x %.0f "
                                 "variants x %.0f seeds); at most %d are allowed, split it into "
                                 "several experiments",
                                 runs, rungs > 1 ? absl::StrFormat("%.0f rungs x ", rungs) : "",
                                 points, variants, seeds, kMaxRuns));
  }
  return absl::OkStatus();
}

// The configs of every grid point with their origins: the grid's values are blamed at the value.
std::vector<std::pair<nlohmann::json, Origins>> GridConfigs(const Draft& draft) {
  std::vector<std::pair<nlohmann::json, Origins>> configs = {{draft.values, draft.origins}};
  if (draft.scale.declared()) {  // each rung of the ladder, its values blamed where they are
    configs.clear();
    for (size_t r = 0; r < draft.scale.rungs(); ++r) {
      auto rung = std::make_pair(draft.values, draft.origins);
      for (const ParsedAxis& axis : draft.scale.keys) {
        rung.first[axis.key] = axis.values[r];
        rung.second[axis.key] = Origin{Layer::kGrid, axis.positions[r], ""};
      }
      configs.push_back(std::move(rung));
    }
  }
  for (const ParsedAxis& axis : draft.grid) {
    std::vector<std::pair<nlohmann::json, Origins>> next;
    for (const auto& [config, origins] : configs) {
      for (size_t i = 0; i < axis.values.size(); ++i) {
        auto extended = std::make_pair(config, origins);
        extended.first[axis.key] = axis.values[i];
        extended.second[axis.key] = Origin{Layer::kGrid, axis.positions[i], ""};
        next.push_back(std::move(extended));
      }
    }
    configs = std::move(next);
  }
  return configs;
}

absl::Status CheckCrossKeys(std::string_view path, const Draft& draft) {
  for (const auto& [base, origins] : GridConfigs(draft)) {
    if (std::optional<CrossProblem> problem = CheckConfig(base)) {
      return Error(path, Blame(*problem, origins, nullptr), problem->what);
    }
    for (const ParsedAblation& ablation : draft.ablations) {
      nlohmann::json config = base;
      config.update(ablation.overrides);
      if (std::optional<CrossProblem> problem = CheckConfig(config)) {
        return Error(path, Blame(*problem, origins, &ablation.origins), problem->what);
      }
    }
  }
  return absl::OkStatus();
}

// [job]: the command's placeholders name keys a run has; code is a relative or absolute path.
absl::Status CheckJob(std::string_view path, const Draft& draft) {
  const std::string command = draft.values.at("job.command").get<std::string>();
  const Origin* origin = FindOrigin(&draft.origins, "job.command");
  const Origin where = origin != nullptr ? *origin : Origin{};
  absl::StatusOr<std::vector<std::string>> keys = CommandPlaceholders(command);
  if (!keys.ok()) {
    return Error(path, where, Cat("job.command: ", std::string(keys.status().message())));
  }
  if (command.find(Cat("{{", kResumePrefix)) != std::string::npos) {
    return Error(path, where,
                 Cat("job.command: a literal \"{", kResumePrefix,
                     "\" cannot be written: the agent reads it as the {resume:TEXT} placeholder"));
  }
  for (const std::string& key : *keys) {
    if (absl::StartsWith(key, kResumePrefix)) {
      // {resume:TEXT}: TEXT on an attempt that resumes from a checkpoint (the agent's).
      const std::string text = key.substr(std::string_view(kResumePrefix).size());
      if (text.find('{') != std::string::npos) {
        return Error(path, where,
                     Cat("job.command: {", key,
                         "}: the text of {resume:TEXT} is shell text, without placeholders"));
      }
      continue;
    }
    if (absl::StartsWith(key, Cat(kParamsTable, ":"))) {
      // {params:STYLE}: every param at once, in a launcher's convention.
      const std::string style = key.substr(kParamsTable.size() + 1);
      const std::vector<std::string_view>& styles = ParamRenderers();
      if (std::find(styles.begin(), styles.end(), style) == styles.end()) {
        return Error(path, where,
                     Cat("job.command: unknown renderer {", key, "}", DidYouMean(style, styles),
                         "; the renderers are {params:argparse}, {params:ml_collections}, "
                         "{params:hydra} and {params:python}"));
      }
      continue;
    }
    const KeyInfo* info = FindKeyOrParam(key, draft.params.get());
    if (key != "train.seed" && (info == nullptr || info->scope != KeyScope::kRun)) {
      return Error(path, where,
                   Cat("job.command: unknown placeholder {", key, "}",
                       DidYouMean(key, WithParams(KeyNames(true), draft.params.get())),
                       "; placeholders name run keys such as {train.lr} or {train.seed}"));
    }
  }
  const std::string code = draft.values.at("job.code").get<std::string>();
  if (code.find('\0') != std::string::npos || code.find('\n') != std::string::npos) {
    const Origin* code_origin = FindOrigin(&draft.origins, "job.code");
    return Error(path, code_origin != nullptr ? *code_origin : Origin{},
                 "job.code: not a usable directory path");
  }
  // job.tensorboard: a directory inside the run directory (the agent reads nothing outside it).
  const std::string events = draft.values.at("job.tensorboard").get<std::string>();
  if (!events.empty() &&
      (events[0] == '/' || events.find('\0') != std::string::npos ||
       std::filesystem::path(events).lexically_normal().string().rfind("..", 0) == 0)) {
    const Origin* origin = FindOrigin(&draft.origins, "job.tensorboard");
    return Error(path, origin != nullptr ? *origin : Origin{},
                 Cat("job.tensorboard: '", events,
                     "' is not a directory inside the run directory (give a relative path "
                     "without .., or \".\" for the whole of it)"));
  }
  return absl::OkStatus();
}

// The [search] of the draft, its metric and goal resolved (SearchPlan).
SearchPlan SearchOf(const Draft& draft) {
  const nlohmann::json& values = draft.values;
  SearchPlan plan;
  for (const KeyInfo& key : Schema()) {
    if (key.name.substr(0, 7) == "search." && FindOrigin(&draft.origins, key.name) != nullptr) {
      plan.declared = true;
    }
  }
  plan.method = values.at("search.method") == "asha" ? SearchMethod::kAsha : SearchMethod::kGrid;
  plan.within =
      values.at("search.within") == "study" ? SearchWithin::kStudy : SearchWithin::kVariant;
  plan.min_steps = values.at("search.min_steps").get<int64_t>();
  plan.reduction = values.at("search.reduction").get<int64_t>();
  plan.bootstrap = values.at("search.bootstrap").get<int64_t>();
  plan.shuffle = values.at("search.order") != "listed";
  plan.order_seed = values.at("search.order_seed").get<int64_t>();
  plan.confirm = values.at("search.confirm").get<int64_t>();
  const auto metric = values.at("search.metric").get<std::string>();
  const auto report_metrics = values.at("report.metrics").get<std::vector<std::string>>();
  if (!metric.empty()) {
    plan.metric = metric;
  } else if (!report_metrics.empty()) {
    plan.metric = report_metrics.front();
  }
  const auto goal = values.at("search.goal").get<std::string>();
  const auto report_goal = values.at("report.goal").get<std::map<std::string, std::string>>();
  if (!goal.empty()) {
    plan.goal = goal;
  } else if (auto it = report_goal.find(plan.metric); it != report_goal.end()) {
    plan.goal = it->second;
  } else {
    plan.goal = metrics::LargerIsBetterByDefault(plan.metric) ? "max" : "min";
  }
  return plan;
}

// The smallest train.steps over every run, and the ablation that sets it ("" : the baseline, a
// grid point or the defaults).
std::pair<int64_t, std::string> FewestSteps(const Draft& draft) {
  std::pair<int64_t, std::string> fewest = {std::numeric_limits<int64_t>::max(), ""};
  for (const auto& [base, origins] : GridConfigs(draft)) {
    fewest = std::min(fewest, {base.at("train.steps").get<int64_t>(), ""});
    for (const ParsedAblation& ablation : draft.ablations) {
      if (auto it = ablation.overrides.find("train.steps"); it != ablation.overrides.end()) {
        fewest = std::min(fewest, {it->get<int64_t>(), ablation.name});
      }
    }
  }
  return fewest;
}

// An asha [search]: it needs a [grid] (its points are what it prunes), a list of seeds (a point's
// seeds are fixed), a first rung before any run ends, and, for tae-train, a metric tae-train
// reports while training. A command job may report any metric; its step budget is only known
// when its command passes {train.steps}, and only then is min_steps checked against it.
absl::Status CheckSearch(std::string_view path, const Draft& draft) {
  const SearchPlan plan = SearchOf(draft);
  if (!plan.asha()) {
    return absl::OkStatus();
  }
  auto where = [&](std::string_view key) {
    const Origin* origin = FindOrigin(&draft.origins, key);
    return origin != nullptr ? *origin : Origin{};
  };
  if (draft.grid.empty()) {
    return Error(path, where("search.method"),
                 "search.method = \"asha\" needs a [grid]: it stops grid points that fall "
                 "behind, and without a [grid] there is one point per variant");
  }
  if (draft.values.at(std::string(kSeedsKey)).is_object()) {
    return Error(path, where("search.method"),
                 Cat("search.method = \"asha\" with adaptive ", kSeedsKey,
                     " is not supported: a point is judged on all its seeds, so give ", kSeedsKey,
                     " as a list"));
  }
  if (plan.min_steps < 1) {
    return Error(path, where("search.method"),
                 "search.method = \"asha\" needs search.min_steps, the step of the first rung");
  }
  const std::string command = draft.values.at("job.command").get<std::string>();
  absl::StatusOr<std::vector<std::string>> placeholders = CommandPlaceholders(command);
  const bool knows_steps =
      command.empty() || (placeholders.ok() && std::find(placeholders->begin(), placeholders->end(),
                                                         "train.steps") != placeholders->end());
  if (knows_steps) {
    const auto [steps, ablation] = FewestSteps(draft);
    if (plan.min_steps >= steps) {
      return Error(path, where("search.min_steps"),
                   Cat("search.min_steps: ", plan.min_steps, " is not below train.steps (", steps,
                       ablation.empty() ? "" : Cat(" in ablation '", ablation, "'"),
                       "): the first rung must come before the runs end"));
    }
  }
  const std::vector<std::string>& known = metrics::TrainingMetrics();
  if (command.empty() && std::find(known.begin(), known.end(), plan.metric) == known.end()) {
    const bool own = !draft.values.at("search.metric").get<std::string>().empty();
    std::vector<std::string_view> candidates(known.begin(), known.end());
    return Error(path, where(own ? "search.metric" : "report.metrics"),
                 Cat(own ? "search.metric" : "search.metric (from report.metrics)",
                     ": tae-train "
                     "does not report '",
                     plan.metric, "' while training", DidYouMean(plan.metric, candidates),
                     "; it reports ", absl::StrJoin(known, ", ")));
  }
  return absl::OkStatus();
}

// search.confirm: fresh seeds at each variant's chosen [grid] point once the search is over. It
// needs a [grid] (without one nothing is chosen, so nothing is biased by a choice) and a list of
// seeds (adaptive seeds keep adding seeds to the points, so the search has no end to confirm
// after).
absl::Status CheckConfirm(std::string_view path, const Draft& draft) {
  const int64_t confirm = draft.values.at("search.confirm").get<int64_t>();
  if (confirm == 0) {
    return absl::OkStatus();
  }
  const Origin* origin = FindOrigin(&draft.origins, "search.confirm");
  const Origin where = origin != nullptr ? *origin : Origin{};
  if (draft.scale.declared()) {
    return Error(path, where,
                 "search.confirm with a [scale] ladder is not supported yet: confirm each rung "
                 "as an experiment of its own");
  }
  if (draft.grid.empty()) {
    return Error(path, where,
                 "search.confirm needs a [grid]: it re-runs each variant's chosen grid point on "
                 "fresh seeds, and without a [grid] there is one point per variant and no choice "
                 "to confirm (add seeds to train.seeds instead)");
  }
  if (draft.values.at(std::string(kSeedsKey)).is_object()) {
    return Error(path, where,
                 Cat("search.confirm with adaptive ", kSeedsKey,
                     " is not supported: adaptive seeds keep adding seeds to the grid points, so "
                     "the search has no end after which to confirm; give ",
                     kSeedsKey, " as a list"));
  }
  double points = 1;
  for (const ParsedAxis& axis : draft.grid) {
    points *= static_cast<double>(axis.values.size());
  }
  const auto variants = static_cast<double>(1 + draft.ablations.size());
  const auto seeds = static_cast<double>(draft.values.at(std::string(kSeedsKey)).size());
  const double runs = variants * (points * seeds + static_cast<double>(confirm));
  if (runs > static_cast<double>(kMaxRuns)) {
    return Error(path, where,
                 absl::StrFormat("search.confirm: with %d confirmation runs per variant the "
                                 "experiment grows to %.0f runs; at most %d are allowed",
                                 confirm, runs, kMaxRuns));
  }
  return absl::OkStatus();
}

Spec BuildSpec(Draft draft) {
  Spec spec;
  nlohmann::json& values = draft.values;
  spec.name = values.at("name").get<std::string>();
  spec.description = values.at("description").get<std::string>();
  const nlohmann::json& seeds = values.at(std::string(kSeedsKey));
  if (seeds.is_object()) {
    spec.seeds_design.adaptive = true;
    spec.seeds_design.min = seeds.at("min").get<int>();
    spec.seeds_design.max = seeds.at("max").get<int>();
    spec.seeds_design.alpha = seeds.at("alpha").get<double>();
    spec.seeds_design.margin = seeds.at("margin").get<std::map<std::string, double>>();
    for (int seed = 0; seed < spec.seeds_design.min; ++seed) {
      spec.seeds.push_back(seed);
    }
  } else {
    spec.seeds = seeds.get<std::vector<int64_t>>();
  }
  spec.report_floor = values.at("report.floor").get<std::map<std::string, double>>();
  spec.report_correction = values.at("report.correction").get<std::string>();
  spec.report_pairing = values.at("report.pairing").get<std::string>();
  spec.job_code = values.at("job.code").get<std::string>();
  spec.job_command = values.at("job.command").get<std::string>();
  spec.report_metrics = values.at("report.metrics").get<std::vector<std::string>>();
  spec.report_goal = values.at("report.goal").get<std::map<std::string, std::string>>();
  spec.search = SearchOf(draft);
  for (const KeyInfo& key : Schema()) {
    if (key.scope == KeyScope::kExperiment) {
      values.erase(std::string(key.name));
    }
  }
  spec.base = std::move(values);
  for (ParsedAblation& ablation : draft.ablations) {
    spec.ablations.push_back(Variant{std::move(ablation.name), std::move(ablation.overrides)});
  }
  for (ParsedAxis& axis : draft.grid) {
    spec.grid.push_back(GridAxis{std::move(axis.key), std::move(axis.values)});
  }
  if (draft.scale.declared()) {
    for (size_t r = 0; r < draft.scale.rungs(); ++r) {
      spec.scale.rungs.push_back(draft.scale.Rung(r));
    }
    for (const ParsedAxis& axis : draft.scale.keys) {
      spec.scale.keys.push_back(axis.key);
    }
    spec.scale.params = draft.scale.params;
    spec.scale.stop_if = draft.scale.stop_if;
  }
  return spec;
}

}  // namespace

absl::StatusOr<Spec> ParseSpec(std::string_view text, std::string_view path,
                               const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    return Error(path, Origin{Layer::kFile, error.source().begin, ""}, error.description());
  }
  FileWalker walker;
  walker.Walk(root);
  if (std::optional<Problem> problem = walker.FirstProblem()) {
    return Error(path, Origin{Layer::kFile, problem->where, ""}, problem->what);
  }
  Draft draft = walker.TakeDraft();
  absl::StatusOr<std::vector<SetOverride>> sets = ParseOverrides(overrides, draft.params.get());
  if (!sets.ok()) {
    return sets.status();
  }
  ApplyOverrides(*sets, &draft);
  if (!draft.values.contains("name")) {
    return Error(path, Origin{}, "missing required key 'name'");
  }
  if (absl::Status status = CheckSetsAgainstGrid(path, draft); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckRunCount(path, draft); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckCrossKeys(path, draft); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckJob(path, draft); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckSearch(path, draft); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckConfirm(path, draft); !status.ok()) {
    return status;
  }
  return BuildSpec(std::move(draft));
}

}  // namespace tae::spec
