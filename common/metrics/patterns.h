#pragma once

// Metrics from the lines a command job already prints (docs/metrics.md, [job.metrics]): regular
// expressions (RE2) whose named groups are metric values, and the group `step` the step, e.g.
//
//   pattern = 'iter (?P<step>\d+): train loss (?P<train_loss>[-+.\deE]+)'
//   names = { train_loss = "train/loss" }
//
// turns "iter 190: train loss 2.53215" into train/loss = 2.53215 at step 190. Values are read as
// numbers the way key=value lines are (nan, inf and -inf too: a diverged value); a group that did
// not take part in the match, or whose text is not a number, gives nothing.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics/metric_line.h"

namespace re2 {
class RE2;
}

namespace tae::metrics {

// OK when `pattern` compiles (RE2) and names at least one group other than `step`; otherwise
// InvalidArgument with RE2's message or what is missing.
absl::Status CheckPattern(std::string_view pattern);

class LinePatterns {
 public:
  // Compiles `patterns` (each CheckPattern'ed; an error names the pattern's index). `names` maps a
  // group to the metric it is stored as; each resulting name must be a valid metric key.
  static absl::StatusOr<LinePatterns> Create(const std::vector<std::string>& patterns,
                                             const std::map<std::string, std::string>& names);

  LinePatterns(LinePatterns&&) noexcept;
  LinePatterns& operator=(LinePatterns&&) noexcept;
  ~LinePatterns();

  bool empty() const { return patterns_.empty(); }
  // The values of every pattern that matches (a search, not a whole-line match), in pattern
  // order, with the step of the first that has one; nullopt when none gave a value.
  std::optional<MetricRecord> Match(std::string_view line);
  // The patterns (as written) that have matched no line yet.
  std::vector<std::string> Unmatched() const;
  // Which patterns have matched, one '0' or '1' each (kept across a restart of the reader);
  // SetMatched takes such a string back.
  std::string MatchedFlags() const;
  void SetMatched(std::string_view flags);

 private:
  struct Compiled {
    std::unique_ptr<re2::RE2> re;
    std::vector<std::pair<int, std::string>> metrics;  // group index -> metric name
    int step_group = 0;                                // 0: none
    bool matched = false;
  };
  LinePatterns() = default;
  std::vector<Compiled> patterns_;
};

}  // namespace tae::metrics
