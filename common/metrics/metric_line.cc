#include "common/metrics/metric_line.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "proto/tae/v1/artifact.h"

namespace tae::metrics {
namespace {

bool IsStepKey(std::string_view key) { return key == "step" || key == "Step"; }

constexpr char kMetaKey[] = "meta";
constexpr char kCheckpointKey[] = "checkpoint";
constexpr char kProfileKey[] = "profile";

// {"step": N, "time": T}: the job's checkpoint directory holds step N's checkpoint, complete
// since wall time T.
absl::Status ParseCheckpoint(const nlohmann::ordered_json& mark, MetricRecord* record) {
  const auto step = mark.is_object() ? mark.find("step") : mark.end();
  const auto time = mark.is_object() ? mark.find("time") : mark.end();
  if (step == mark.end() || !step->is_number_integer() || step->get<int64_t>() < 0 ||
      time == mark.end() || !time->is_number()) {
    return absl::InvalidArgumentError(
        "metric line: \"checkpoint\" must be {\"step\": an int >= 0, \"time\": seconds since "
        "the epoch}");
  }
  record->checkpoint = CheckpointMark{step->get<int64_t>(), time->get<double>()};
  return absl::OkStatus();
}

// {"id": "p3", "time": T, "step": N|null, "steps": n, "tool": "...", "error": "..."}: the job
// answered profile request `id` (docs/profiles.md).
absl::Status ParseProfile(const nlohmann::ordered_json& mark, MetricRecord* record) {
  const auto field = [&](const char* name) {
    return mark.is_object() ? mark.find(name) : mark.end();
  };
  const auto id = field("id");
  const auto time = field("time");
  const auto step = field("step");
  const auto steps = field("steps");
  const auto tool = field("tool");
  const auto error = field("error");
  const bool id_ok = id != mark.end() && id->is_string() && id->get<std::string>().size() <= 48 &&
                     v1::IsArtifactName("profile-" + id->get<std::string>());
  if (!id_ok || time == mark.end() || !time->is_number() ||
      (step != mark.end() && !step->is_null() &&
       (!step->is_number_integer() || step->get<int64_t>() < 0)) ||
      (steps != mark.end() && !steps->is_number_integer()) ||
      (tool != mark.end() && !tool->is_string()) || (error != mark.end() && !error->is_string())) {
    return absl::InvalidArgumentError(
        "metric line: \"profile\" must be {\"id\": 1-48 of [A-Za-z0-9._-], \"time\": "
        "seconds since the epoch, optional \"step\" (an int >= 0), \"steps\", \"tool\", "
        "\"error\"}");
  }
  ProfileMark profile;
  profile.id = id->get<std::string>();
  profile.time = time->get<double>();
  if (step != mark.end() && !step->is_null()) {
    profile.step = step->get<int64_t>();
  }
  profile.steps = steps != mark.end() ? steps->get<int64_t>() : 0;
  profile.tool = tool != mark.end() ? tool->get<std::string>().substr(0, 64) : "";
  profile.error = error != mark.end() ? error->get<std::string>().substr(0, 2048) : "";
  record->profile = std::move(profile);
  return absl::OkStatus();
}

absl::Status InvalidKey(const char* what, std::string_view key) {
  return absl::InvalidArgumentError(absl::StrCat("metric line: invalid ", what, " '",
                                                 std::string(key.substr(0, kMaxKeyLength)),
                                                 "' (1-128 printable characters, no spaces)"));
}

absl::Status ParseMeta(const nlohmann::ordered_json& meta, MetricRecord* record) {
  if (!meta.is_object()) {
    return absl::InvalidArgumentError("metric line: \"meta\" must be an object of strings");
  }
  if (meta.size() > kMaxMetaEntriesPerLine) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric line: \"meta\" has more than ", kMaxMetaEntriesPerLine, " entries"));
  }
  for (const auto& [key, value] : meta.items()) {
    if (!IsValidMetricKey(key)) {
      return InvalidKey("meta key", key);
    }
    std::string text;
    if (value.is_null()) {
      continue;
    } else if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_number() || value.is_boolean()) {
      text = value.dump();
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("metric line: meta value of '", key, "' is not a string"));
    }
    if (text.size() > kMaxMetaValueLength) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric line: meta value of '", key, "' is longer than ", kMaxMetaValueLength, " bytes"));
    }
    record->meta.emplace_back(key, std::move(text));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> StepFromJson(const nlohmann::ordered_json& value) {
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError("metric line: \"step\" is too large (at most 2^63 - 1)");
  }
  if (value.is_number_integer() || value.is_number_unsigned()) {
    int64_t step = value.get<int64_t>();
    if (step < 0) {
      return absl::InvalidArgumentError("metric line: \"step\" must be >= 0");
    }
    return step;
  }
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (d >= 0 && d == std::floor(d) && d < 9.0e18) {
      return static_cast<int64_t>(d);
    }
  }
  return absl::InvalidArgumentError("metric line: \"step\" must be a non-negative integer");
}

// Python's json.dumps writes NaN, Infinity and -Infinity bare, which is not JSON: each such token
// outside a string becomes the string the parser reads as that value. nullopt: none there.
std::optional<std::string> QuoteBareNonFinite(std::string_view line) {
  std::string out;
  bool changed = false;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size()) {
        out += line[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    for (std::string_view token : {"-Infinity", "Infinity", "NaN"}) {
      if (line.substr(i, token.size()) == token) {
        out += token == "NaN" ? "\"nan\"" : token == "Infinity" ? "\"inf\"" : "\"-inf\"";
        i += token.size() - 1;
        replaced = changed = true;
        break;
      }
    }
    if (!replaced) {
      out += c;
    }
  }
  return changed ? std::optional<std::string>(std::move(out)) : std::nullopt;
}

}  // namespace

std::optional<double> NonFiniteWord(std::string_view word) {
  std::string lower;
  for (char c : word) {
    lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (lower == "nan") {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (lower == "inf" || lower == "+inf" || lower == "infinity" || lower == "+infinity") {
    return kInf;
  }
  if (lower == "-inf" || lower == "-infinity") {
    return -kInf;
  }
  return std::nullopt;
}

bool IsValidMetricKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeyLength) {
    return false;
  }
  for (char c : key) {
    if (c <= ' ' || c > '~') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<MetricRecord> ParseJsonLine(std::string_view line) {
  nlohmann::ordered_json doc =
      nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    if (std::optional<std::string> quoted = QuoteBareNonFinite(line)) {
      doc = nlohmann::ordered_json::parse(*quoted, nullptr, /*allow_exceptions=*/false);
    }
  }
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError("metric line: not valid JSON");
  }
  if (!doc.is_object()) {
    return absl::InvalidArgumentError("metric line: expected a JSON object");
  }
  const size_t reserved = (doc.contains("step") ? 1 : 0) + (doc.contains("Step") ? 1 : 0) +
                          (doc.contains("meta") ? 1 : 0) + (doc.contains("checkpoint") ? 1 : 0) +
                          (doc.contains("profile") ? 1 : 0);
  if (doc.size() > kMaxValuesPerLine + reserved) {  // the values, besides "step" and "meta"
    return absl::InvalidArgumentError(
        absl::StrCat("metric line: more than ", kMaxValuesPerLine, " values"));
  }
  MetricRecord record;
  for (const auto& [key, value] : doc.items()) {
    if (IsStepKey(key)) {
      absl::StatusOr<int64_t> step = StepFromJson(value);
      if (!step.ok()) {
        return step.status();
      }
      record.step = *step;
      continue;
    }
    if (key == kMetaKey) {
      if (absl::Status s = ParseMeta(value, &record); !s.ok()) {
        return s;
      }
      continue;
    }
    if (key == kCheckpointKey) {
      if (absl::Status s = ParseCheckpoint(value, &record); !s.ok()) {
        return s;
      }
      continue;
    }
    if (key == kProfileKey) {
      if (absl::Status s = ParseProfile(value, &record); !s.ok()) {
        return s;
      }
      continue;
    }
    if (!IsValidMetricKey(key)) {
      return InvalidKey("key", key);
    }
    if (value.is_null()) {
      continue;
    }
    if (value.is_string()) {
      if (std::optional<double> diverged = NonFiniteWord(value.get<std::string>())) {
        record.values.emplace_back(key, *diverged);
        continue;
      }
    }
    if (!value.is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric line: value of '", key, "' is not a number"));
    }
    record.values.emplace_back(key, value.get<double>());
  }
  return record;
}

std::optional<MetricRecord> ParseKeyValueLine(std::string_view line) {
  MetricRecord record;
  absl::string_view view(line.data(), line.size());  // Debian's absl has its own string_view
  for (absl::string_view token : absl::StrSplit(view, absl::ByAnyChar(" \t,"), absl::SkipEmpty())) {
    size_t eq = token.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      continue;
    }
    std::string_view key(token.data(), eq);
    absl::string_view text = token.substr(eq + 1);
    if (IsStepKey(key)) {
      int64_t step = 0;
      if (absl::SimpleAtoi(text, &step) && step >= 0) {
        record.step = step;
      }
      continue;
    }
    double value = 0;
    if (!IsValidMetricKey(key)) {
      continue;
    }
    if (std::optional<double> diverged =
            NonFiniteWord(std::string_view(text.data(), text.size()))) {
      value = *diverged;
    } else if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
      continue;  // not a number; "1e999" and the like are not a report of divergence
    }
    record.values.emplace_back(std::string(key), value);
  }
  if (record.values.empty()) {
    return std::nullopt;
  }
  return record;
}

}  // namespace tae::metrics
