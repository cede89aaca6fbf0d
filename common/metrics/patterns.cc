#include "common/metrics/patterns.h"

#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "re2/re2.h"

namespace tae::metrics {
namespace {

constexpr char kStepGroup[] = "step";

// RE2 compiled the way every [job.metrics] pattern is: UTF-8, errors kept quiet (they are
// returned, not logged).
std::unique_ptr<re2::RE2> Compile(std::string_view pattern) {
  re2::RE2::Options options;
  options.set_log_errors(false);
  return std::make_unique<re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
}

absl::Status Check(const re2::RE2& re) {
  if (!re.ok()) {
    return absl::InvalidArgumentError(re.error());
  }
  for (const auto& [name, index] : re.NamedCapturingGroups()) {
    if (name != kStepGroup) {
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      "names no metric: give each value a named group, e.g. (?P<loss>[-+.0-9eE]+)");
}

std::optional<double> Number(std::string_view text) {
  if (std::optional<double> diverged = NonFiniteWord(text)) {
    return diverged;
  }
  double value = 0;
  if (!absl::SimpleAtod(absl::string_view(text.data(), text.size()), &value) ||
      !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

absl::Status CheckPattern(std::string_view pattern) { return Check(*Compile(pattern)); }

LinePatterns::LinePatterns(LinePatterns&&) noexcept = default;
LinePatterns& LinePatterns::operator=(LinePatterns&&) noexcept = default;
LinePatterns::~LinePatterns() = default;

absl::StatusOr<LinePatterns> LinePatterns::Create(const std::vector<std::string>& patterns,
                                                  const std::map<std::string, std::string>& names) {
  LinePatterns out;
  for (size_t i = 0; i < patterns.size(); ++i) {
    Compiled compiled;
    compiled.re = Compile(patterns[i]);
    if (absl::Status ok = Check(*compiled.re); !ok.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job.metrics.pattern[", i, "]: ", ok.message()));
    }
    for (const auto& [group, index] : compiled.re->NamedCapturingGroups()) {
      if (group == kStepGroup) {
        compiled.step_group = index;
        continue;
      }
      auto named = names.find(group);
      const std::string metric = named == names.end() ? group : named->second;
      if (!IsValidMetricKey(metric)) {
        return absl::InvalidArgumentError(absl::StrCat("job.metrics.names: '", metric, "' (group ",
                                                       group, ") is not a metric name"));
      }
      compiled.metrics.emplace_back(index, metric);
    }
    out.patterns_.push_back(std::move(compiled));
  }
  return out;
}

std::optional<MetricRecord> LinePatterns::Match(std::string_view line) {
  MetricRecord record;
  const re2::StringPiece text(line.data(), line.size());
  std::vector<re2::StringPiece> groups;
  for (Compiled& pattern : patterns_) {
    groups.assign(static_cast<size_t>(pattern.re->NumberOfCapturingGroups()) + 1,
                  re2::StringPiece());
    if (!pattern.re->Match(text, 0, text.size(), re2::RE2::UNANCHORED, groups.data(),
                           static_cast<int>(groups.size()))) {
      continue;
    }
    pattern.matched = true;
    if (pattern.step_group > 0 && !record.step.has_value()) {
      const re2::StringPiece step = groups[static_cast<size_t>(pattern.step_group)];
      int64_t value = 0;
      if (step.data() != nullptr &&
          absl::SimpleAtoi(absl::string_view(step.data(), step.size()), &value) && value >= 0) {
        record.step = value;
      }
    }
    for (const auto& [index, metric] : pattern.metrics) {
      const re2::StringPiece group = groups[static_cast<size_t>(index)];
      if (group.data() == nullptr) {
        continue;  // not part of this match
      }
      if (std::optional<double> value = Number(std::string_view(group.data(), group.size()))) {
        record.values.emplace_back(metric, *value);
      }
    }
  }
  if (record.values.empty()) {
    return std::nullopt;
  }
  return record;
}

std::vector<std::string> LinePatterns::Unmatched() const {
  std::vector<std::string> out;
  for (const Compiled& pattern : patterns_) {
    if (!pattern.matched) {
      out.push_back(pattern.re->pattern());
    }
  }
  return out;
}

std::string LinePatterns::MatchedFlags() const {
  std::string out;
  for (const Compiled& pattern : patterns_) {
    out.push_back(pattern.matched ? '1' : '0');
  }
  return out;
}

void LinePatterns::SetMatched(std::string_view flags) {
  for (size_t i = 0; i < flags.size() && i < patterns_.size(); ++i) {
    patterns_[i].matched = patterns_[i].matched || flags[i] == '1';
  }
}

}  // namespace tae::metrics
