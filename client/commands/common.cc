#include "client/commands/common.h"

#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/metrics/names.h"
#include "common/spec/spec.h"

namespace tae::client {

int Fail(const absl::Status& status) {
  std::cerr << "taectl: " << status.message() << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int ParseOrExit(cli::FlagSet& flags, const Args& args, size_t min_positional, size_t max_positional,
                Args* positional) {
  absl::Status parsed = flags.Parse(args, positional);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (parsed.ok() && (positional->size() < min_positional || positional->size() > max_positional)) {
    parsed = absl::InvalidArgumentError(absl::StrCat("wrong number of arguments\n", flags.Help()));
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  return -1;
}

Args WithLongOutput(const Args& args) {
  Args out = args;
  for (std::string& arg : out) {
    if (arg == "-o") {
      arg = "--output";
    }
  }
  return out;
}

absl::StatusOr<int64_t> ParseRunId(const std::string& text) {
  std::string digits = text;
  if (!digits.empty() && (digits[0] == 'r' || digits[0] == 'R')) {
    digits.erase(0, 1);
  }
  int64_t id = 0;
  if (!absl::SimpleAtoi(digits, &id) || id <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a run id (r<ID>)"));
  }
  return id;
}

std::vector<std::string> RunsDefaultMetrics(const tae::v1::ListRunsResponse& runs, size_t limit) {
  std::vector<std::string> present;
  for (const tae::v1::Run& run : runs.runs()) {
    for (const tae::v1::Scalar& scalar : run.final_metrics()) {
      present.push_back(scalar.key());
    }
  }
  return metrics::DefaultMetrics(std::move(present), limit);
}

nlohmann::ordered_json ShownConfig(const tae::v1::Run& run,
                                   const std::vector<std::string>& command_keys, bool all,
                                   int* hidden) {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(run.config_json(), nullptr, false);
  if (hidden != nullptr) {
    *hidden = 0;
  }
  if (!config.is_object() || !config.contains("job.command") ||
      config.value("job.command", std::string()).empty() || all) {
    return config.is_discarded() ? nlohmann::ordered_json() : config;
  }
  nlohmann::ordered_json shown = nlohmann::ordered_json::object();
  for (const auto& [key, value] : config.items()) {
    if (spec::ReachesCommand(key, command_keys)) {
      shown[key] = value;
    } else if (hidden != nullptr) {
      ++*hidden;
    }
  }
  return shown;
}

}  // namespace tae::client
