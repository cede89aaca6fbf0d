#pragma once

// `taectl compare RUN RUN...`: the config keys and final metrics of 2+ runs side by side, built
// from the runs GetRun returns. Pure: no RPC, no printing (the verb lives in compare.cc too).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tae/v1/types.pb.h"

namespace tae::client {

struct RunComparison {
  struct Header {
    int64_t id = 0;
    std::string variant;
    int64_t seed = 0;
    std::string state;
    int64_t last_step = 0;
  };
  struct ConfigRow {
    std::string key;
    std::vector<nlohmann::json> values;  // one per run; null where the run lacks the key
  };
  struct MetricRow {
    std::string name;
    std::vector<std::optional<double>> values;  // one per run
  };

  std::vector<Header> runs;
  std::vector<ConfigRow> config_diff;  // keys whose values differ, sorted by key
  int64_t identical_keys = 0;          // keys every run has with the same value
  std::vector<MetricRow> metrics;      // --metric order, else every final metric sorted by name
};

// The run ids of `taectl compare`: at least 2, each "r12" or "12", none twice. InvalidArgument
// naming the offending text otherwise.
absl::StatusOr<std::vector<int64_t>> ParseCompareRunIds(const std::vector<std::string>& args);

// Compares runs (in the given order). metrics empty: every metric any run has a final value for.
// A requested metric no run has is InvalidArgument (most likely a typo); a run whose config is
// not a JSON object is FailedPrecondition.
absl::StatusOr<RunComparison> BuildComparison(const std::vector<tae::v1::Run>& runs,
                                              const std::vector<std::string>& metrics);

// The header rows (variant, seed, state, last_step), the config diff table with a line counting
// the identical keys, and the metrics table; with exactly 2 runs the metrics table also has DIFF
// (second minus first) and REL (DIFF / |first|) columns.
std::string RenderComparison(const RunComparison& comparison);

// {"runs": [ids], "config_diff": {key: [v, ...]}, "identical_keys": N,
//  "metrics": {name: [v, ...]}}; null where a run lacks a value.
nlohmann::ordered_json ComparisonJson(const RunComparison& comparison);

}  // namespace tae::client
