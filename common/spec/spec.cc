// ParseSpecFile, expansion into runs and the spec hash.
#include "common/spec/spec.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/fs/fs.h"
#include "common/spec/schema.h"

namespace tae::spec {
namespace {

constexpr std::string_view kHashVersion = "tae-spec-v1\n";

// The experiment file; an error starts with its path, as every spec error does.
absl::StatusOr<std::string> ReadSpecFile(const std::string& path) {
  absl::StatusOr<std::string> text = fs::ReadFile(path);
  if (text.ok()) {
    return text;
  }
  const fs::ErrnoParts parts = fs::SplitErrnoStatus(text.status());
  if (parts.verb.empty()) {
    return absl::Status(text.status().code(), absl::StrCat(path, ": ", text.status().message()));
  }
  return absl::Status(text.status().code(),
                      absl::StrCat(path, ": cannot ", parts.verb, ": ", parts.reason));
}

uint64_t Fnv1a64(std::string_view data) {
  constexpr uint64_t kOffsetBasis = 14695981039346656037ULL;
  constexpr uint64_t kPrime = 1099511628211ULL;
  uint64_t hash = kOffsetBasis;
  for (char c : data) {
    hash ^= static_cast<unsigned char>(c);
    hash *= kPrime;
  }
  return hash;
}

}  // namespace

absl::StatusOr<Spec> ParseSpecFile(const std::string& path,
                                   const std::vector<std::string>& overrides) {
  absl::StatusOr<std::string> text = ReadSpecFile(path);
  if (!text.ok()) {
    return text.status();
  }
  return ParseSpec(*text, path, overrides);
}

nlohmann::json ResolveConfig(const Spec& spec, std::string_view variant, int64_t seed,
                             const nlohmann::json& grid) {
  nlohmann::json config = spec.base;
  if (auto rung = grid.find(kRungKey); rung != grid.end() && rung->is_number_integer()) {
    const int64_t r = rung->get<int64_t>();
    if (r >= 0 && r < static_cast<int64_t>(spec.scale.rungs.size())) {
      config.update(spec.scale.rungs[r]);
    }
  }
  config.update(grid);
  if (variant != kBaselineName) {
    auto it = std::find_if(spec.ablations.begin(), spec.ablations.end(),
                           [&](const Variant& v) { return v.name == variant; });
    if (it == spec.ablations.end()) {
      return nullptr;
    }
    config.update(it->overrides);
  }
  config[std::string(kSeedKey)] = seed;
  return config;
}

namespace {

std::string ValueText(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string ShortKey(const std::string& key, const std::vector<GridAxis>& grid) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) {
    return key;
  }
  const std::string tail = key.substr(dot + 1);
  for (const GridAxis& axis : grid) {
    if (axis.key != key && axis.key.size() > tail.size() &&
        axis.key.compare(axis.key.size() - tail.size(), tail.size(), tail) == 0 &&
        axis.key[axis.key.size() - tail.size() - 1] == '.') {
      return key;  // model.x and train.x would both read "x"
    }
  }
  return tail;
}

// Every grid point in order (first axis slowest); one empty point without a grid.
std::vector<nlohmann::json> GridPoints(const std::vector<GridAxis>& grid) {
  std::vector<nlohmann::json> points = {nlohmann::json::object()};
  for (const GridAxis& axis : grid) {
    std::vector<nlohmann::json> next;
    for (const nlohmann::json& point : points) {
      for (const nlohmann::json& value : axis.values) {
        nlohmann::json extended = point;
        extended[axis.key] = value;
        next.push_back(std::move(extended));
      }
    }
    points = std::move(next);
  }
  return points;
}

}  // namespace

std::string GridVariantName(std::string_view ablation, const nlohmann::json& point,
                            const std::vector<GridAxis>& grid) {
  std::string name(ablation);
  if (point.empty()) {
    return name;
  }
  std::vector<std::string> parts;
  for (const GridAxis& axis : grid) {
    auto it = point.find(axis.key);
    if (it != point.end()) {
      parts.push_back(absl::StrCat(ShortKey(axis.key, grid), "=", ValueText(*it)));
    }
  }
  return absl::StrCat(name, "[", absl::StrJoin(parts, ","), "]");
}

int RungOf(std::string_view variant) {
  const size_t bracket = variant.find('[');
  if (bracket == std::string_view::npos) {
    return -1;
  }
  std::string_view point = variant.substr(bracket + 1);
  constexpr std::string_view kRung = "rung=";
  if (point.substr(0, kRung.size()) != kRung) {
    return -1;
  }
  point.remove_prefix(kRung.size());
  int rung = 0;
  size_t digits = 0;
  while (digits < point.size() && digits < 6 && absl::ascii_isdigit(point[digits])) {
    rung = rung * 10 + (point[digits] - '0');
    ++digits;
  }
  const bool ends = digits < point.size() && (point[digits] == ',' || point[digits] == ']');
  const bool canonical = digits == 1 || point[0] != '0';
  return digits > 0 && ends && canonical ? rung : -1;
}

std::string AblationAtRung(std::string_view variant) {
  const size_t bracket = variant.find('[');
  const int rung = RungOf(variant);
  std::string name(variant.substr(0, bracket));
  return rung < 0 ? name : absl::StrCat(name, "[rung=", rung, "]");
}

std::string WithoutRung(std::string_view variant) {
  const int rung = RungOf(variant);
  if (rung < 0) {
    return std::string(variant);
  }
  const size_t bracket = variant.find('[');
  const size_t after = bracket + 1 + std::string_view("rung=").size() + absl::StrCat(rung).size();
  std::string name(variant.substr(0, bracket));
  if (variant[after] == ']') {
    return name;
  }
  return absl::StrCat(name, "[", std::string(variant.substr(after + 1)));
}

std::string BaselineFor(std::string_view variant, std::string_view baseline) {
  const size_t bracket = variant.find('[');
  if (bracket == std::string_view::npos || baseline.find('[') != std::string_view::npos) {
    return std::string(baseline);
  }
  return absl::StrCat(absl::string_view(baseline.data(), baseline.size()),
                      absl::string_view(variant.data() + bracket, variant.size() - bracket));
}

std::vector<size_t> GridOrder(size_t points, int64_t seed) {
  std::vector<size_t> order(points);
  for (size_t i = 0; i < points; ++i) {
    order[i] = i;
  }
  uint64_t state = static_cast<uint64_t>(seed);
  const auto next = [&state] {  // SplitMix64 (Steele, Lea & Flood 2014)
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  for (size_t i = points; i > 1; --i) {
    // Unbiased: reject draws from the incomplete last block of 2^64.
    const uint64_t n = i;
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r = next();
    while (r >= limit) {
      r = next();
    }
    std::swap(order[i - 1], order[r % n]);
  }
  return order;
}

std::vector<RunPlan> ExpandRuns(const Spec& spec) {
  std::vector<std::string_view> variants = {kBaselineName};
  for (const Variant& ablation : spec.ablations) {
    variants.push_back(ablation.name);
  }
  std::vector<nlohmann::json> grid_points = GridPoints(spec.grid);
  if (spec.search.asha() && spec.search.shuffle) {
    std::vector<nlohmann::json> listed = std::move(grid_points);
    grid_points.clear();
    for (size_t i : GridOrder(listed.size(), spec.search.order_seed)) {
      grid_points.push_back(std::move(listed[i]));
    }
  }
  // A ladder's rung is the first axis, slowest: the small rungs' runs come first.
  std::vector<GridAxis> axes = spec.grid;
  std::vector<nlohmann::json> points = grid_points;
  if (spec.scale.declared()) {
    GridAxis rung_axis{kRungKey, {}};
    points.clear();
    for (size_t r = 0; r < spec.scale.rungs.size(); ++r) {
      rung_axis.values.emplace_back(static_cast<int64_t>(r));
      for (const nlohmann::json& grid_point : grid_points) {
        nlohmann::json point = {{kRungKey, static_cast<int64_t>(r)}};
        point.update(grid_point);
        points.push_back(std::move(point));
      }
    }
    axes.insert(axes.begin(), std::move(rung_axis));
  }
  std::vector<RunPlan> runs;
  runs.reserve(points.size() * variants.size() * spec.seeds.size());
  for (const nlohmann::json& point : points) {
    for (std::string_view variant : variants) {
      const std::string name = GridVariantName(variant, point, axes);
      for (int64_t seed : spec.seeds) {
        nlohmann::json config = ResolveConfig(spec, variant, seed, point);
        if (!spec.job_command.empty()) {
          config["job.command"] = ExpandCommand(spec.job_command, config);
        }
        if (!spec.snapshot_id.empty()) {
          config["job.snapshot"] = spec.snapshot_id;
        }
        runs.push_back(RunPlan{name, std::string(variant), point, seed, std::move(config)});
      }
    }
  }
  return runs;
}

nlohmann::json ConfigAtSeed(const nlohmann::json& config, int64_t seed,
                            std::string_view job_command) {
  nlohmann::json out = config;
  // As ExpandRuns builds it: the command sees the config without job.command and job.snapshot.
  out.erase("job.command");
  auto snapshot = config.find("job.snapshot");
  out.erase("job.snapshot");
  out[std::string(kSeedKey)] = seed;
  if (!job_command.empty()) {
    out["job.command"] = ExpandCommand(job_command, out);
  }
  if (snapshot != config.end()) {
    out["job.snapshot"] = *snapshot;
  }
  return out;
}

bool ReachesCommand(std::string_view key, const std::vector<std::string>& command_keys) {
  for (std::string_view prefix : {"params.", "job.", "resources."}) {
    if (key.substr(0, prefix.size()) == prefix) {
      return true;
    }
  }
  if (key == kSeedKey) {
    return true;
  }
  for (const std::string& named : command_keys) {
    // {params:argparse} names every params key (above); {model.x} names model.x.
    if (named == key) {
      return true;
    }
  }
  return false;
}

std::string SpecHash(const Spec& spec) {
  nlohmann::json ablations = nlohmann::json::array();
  for (const Variant& ablation : spec.ablations) {
    ablations.push_back({{"name", ablation.name}, {"overrides", ablation.overrides}});
  }
  // Keys that joined the schema after hashes were stored, left out at their default so that the
  // specs stored before keep their hash (and a resubmit still finds its experiment).
  nlohmann::json base = spec.base;
  for (const auto& [key, default_value] :
       {std::pair<const char*, nlohmann::json>{"resources.keep_checkpoints", 2},
        {"resources.retry_on", "infra"},
        {"resources.max_disk", 0},
        {"train.profile_at", nlohmann::json::array()},
        {"train.profile_steps", 5},
        {"train.log_every", 10},
        {"train.precision", "fp32"},
        {"train.sharding", "none"},
        {"eval.prune_heads_by_importance", nlohmann::json::array()},
        {"eval.quantize", "none"},
        {"job.metrics.pattern", nlohmann::json::array()},
        {"job.metrics.names", nlohmann::json::object()},
        {"job.metrics.stream", "both"},
        {"job.tensorboard", ""},
        {"job.checkpoints", "mark"},
        {"job.wandb", "off"}}) {
    auto it = base.find(key);
    if (it != base.end() && *it == default_value) {
      base.erase(it);
    }
  }
  nlohmann::json canonical = {{"name", spec.name},
                              {"description", spec.description},
                              {"base", base},
                              {"seeds", spec.seeds},
                              {"ablations", ablations}};
  if (spec.seeds_design.adaptive) {  // a list of seeds keeps the hashes stored before
    canonical["seeds"] = {{"min", spec.seeds_design.min},
                          {"max", spec.seeds_design.max},
                          {"alpha", spec.seeds_design.alpha},
                          {"margin", spec.seeds_design.margin}};
  }
  if (!spec.grid.empty()) {  // absent without a grid: the hashes of grid-less specs stay the same
    nlohmann::json grid = nlohmann::json::array();
    for (const GridAxis& axis : spec.grid) {
      grid.push_back({{"key", axis.key}, {"values", axis.values}});
    }
    canonical["grid"] = std::move(grid);
  }
  if (spec.scale.declared()) {  // absent without a ladder: the hashes stored before stay
    canonical["scale"] = {{"rungs", spec.scale.rungs},
                          {"params", spec.scale.params},
                          {"stop_if",
                           {{"rungs", spec.scale.stop_if.rungs}, {"band", spec.scale.stop_if.band}}}};
  }
  if (!spec.job_code.empty() || !spec.job_command.empty() || !spec.snapshot_id.empty()) {
    canonical["job"] = {
        {"code", spec.job_code}, {"command", spec.job_command}, {"snapshot", spec.snapshot_id}};
  }
  if (spec.search.asha()) {  // absent for grid: the hashes of the specs stored before stay
    canonical["search"] = {
        {"method", "asha"},
        {"metric", spec.search.metric},
        {"goal", spec.search.goal},
        {"min_steps", spec.search.min_steps},
        {"reduction", spec.search.reduction},
        {"within", spec.search.within == SearchWithin::kStudy ? "study" : "variant"},
        {"bootstrap", spec.search.bootstrap},
        {"order", spec.search.shuffle ? "shuffled" : "listed"},
        {"order_seed", spec.search.order_seed}};
  }
  if (spec.search.confirm > 0) {  // absent at 0: the hashes of the specs stored before stay
    nlohmann::json& search = canonical["search"];
    if (!spec.search.asha()) {  // which point is confirmed is chosen on the metric and goal
      search = {{"method", "grid"}, {"metric", spec.search.metric}, {"goal", spec.search.goal}};
    }
    search["confirm"] = spec.search.confirm;
  }
  std::string text = std::string(kHashVersion) +
                     canonical.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return absl::StrCat(absl::Hex(Fnv1a64(text), absl::kZeroPad16));
}

absl::StatusOr<std::vector<std::string>> CommandPlaceholders(std::string_view command) {
  std::vector<std::string> keys;
  for (size_t i = 0; i < command.size(); ++i) {
    if (command[i] == '}') {
      if (i + 1 < command.size() && command[i + 1] == '}') {
        ++i;
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrCat("a lone '}' at character ", i + 1, " (write }} for a literal one)"));
    }
    if (command[i] != '{') {
      continue;
    }
    if (i + 1 < command.size() && command[i + 1] == '{') {
      ++i;
      continue;
    }
    size_t close = command.find('}', i + 1);
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the '{' at character ", i + 1, " is never closed (write {{ for a literal one)"));
    }
    std::string key(command.substr(i + 1, close - i - 1));
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("empty placeholder {} at character ", i + 1));
    }
    keys.push_back(std::move(key));
    i = close;
  }
  return keys;
}

std::string ShellQuote(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_./:=+,@%-").find(c) != std::string_view::npos;
  });
  if (plain) {
    return std::string(text);
  }
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::string ExpandCommand(std::string_view command, const nlohmann::json& config) {
  std::string out;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if ((c == '{' || c == '}') && i + 1 < command.size() && command[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    size_t close = c == '{' ? command.find('}', i + 1) : std::string_view::npos;
    if (close == std::string_view::npos) {
      out += c;
      continue;
    }
    const std::string key(command.substr(i + 1, close - i - 1));
    if (absl::StartsWith(key, "params:")) {
      out += RenderParams(std::string_view(key).substr(7), config);
    } else if (absl::StartsWith(key, kResumePrefix)) {
      out += absl::StrCat("{", key, "}");  // the agent's, at each attempt (agent/runner/resume.h)
    } else if (auto it = config.find(key); it != config.end()) {
      out += ShellQuote(ValueText(*it));
    }
    i = close;
  }
  return out;
}

const std::vector<std::string_view>& ParamRenderers() {
  static const std::vector<std::string_view> kStyles = {"argparse", "ml_collections", "hydra",
                                                        "python"};
  return kStyles;
}

namespace {

// A value as Python source (ml_collections' flags parse literals): True/False, repr-like strings
// inside lists, numbers as JSON writes them.
std::string PythonText(const nlohmann::json& value, bool nested) {
  if (value.is_boolean()) {
    return value.get<bool>() ? "True" : "False";
  }
  if (value.is_string()) {
    return nested ? nlohmann::json(value).dump() : value.get<std::string>();
  }
  if (value.is_array()) {
    std::vector<std::string> parts;
    for (const nlohmann::json& element : value) {
      parts.push_back(PythonText(element, true));
    }
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  return value.dump();
}

// A string as Python's repr writes it: single quotes unless the text has one and no double
// quote, backslash escapes for the quote, backslashes and control characters.
std::string PythonRepr(const std::string& text) {
  const char quote =
      text.find('\'') != std::string::npos && text.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : text) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

// A value as a Python literal (configurator scripts read --key=value with ast.literal_eval):
// True/False, None, repr strings, numbers, lists of those.
std::string PythonLiteral(const nlohmann::json& value) {
  if (value.is_null()) {
    return "None";
  }
  if (value.is_boolean()) {
    return value.get<bool>() ? "True" : "False";
  }
  if (value.is_string()) {
    return PythonRepr(value.get<std::string>());
  }
  if (value.is_array()) {
    std::vector<std::string> parts;
    for (const nlohmann::json& element : value) {
      parts.push_back(PythonLiteral(element));
    }
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  return value.dump();
}

}  // namespace

std::string RenderParams(std::string_view style, const nlohmann::json& config) {
  constexpr absl::string_view kPrefix = "params.";
  std::vector<std::string> words;
  for (const auto& [key, value] : config.items()) {
    if (!absl::StartsWith(key, kPrefix)) {
      continue;
    }
    const std::string name = key.substr(kPrefix.size());
    if (style == "argparse") {
      words.push_back(ShellQuote(absl::StrCat("--", name)));
      words.push_back(ShellQuote(ValueText(value)));
    } else if (style == "ml_collections") {
      words.push_back(ShellQuote(absl::StrCat("--config.", name, "=", PythonText(value, false))));
    } else if (style == "hydra") {
      words.push_back(ShellQuote(absl::StrCat(name, "=", ValueText(value))));
    } else if (style == "python") {
      words.push_back(ShellQuote(absl::StrCat("--", name, "=", PythonLiteral(value))));
    } else {
      return "";
    }
  }
  return absl::StrJoin(words, " ");
}

std::vector<std::string> KnownKeys() {
  std::vector<std::string> keys;
  for (const KeyInfo& key : Schema()) {
    keys.emplace_back(key.name);
  }
  return keys;
}

}  // namespace tae::spec
