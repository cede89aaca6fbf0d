// taectl compare: config and final-metric differences between runs.

#include "client/commands/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands/common.h"
#include "client/output/table.h"
#include "client/rpc/control_client.h"
#include "proto/tae/v1/states.h"

namespace tae::client {
namespace {

std::string RunName(int64_t id) { return absl::StrCat("r", id); }

// Strings without their quotes; numbers, arrays and objects as compact JSON; "-" when missing.
std::string ConfigText(const nlohmann::json& value) {
  if (value.is_null()) {
    return "-";
  }
  if (value.is_string()) {
    return value.get<std::string>();
  }
  return value.dump();
}

std::string ValueText(const std::optional<double>& value) {
  return value ? FormatNumber(*value) : "-";
}

std::string DiffText(const std::optional<double>& first, const std::optional<double>& second) {
  if (!first || !second) {
    return "-";
  }
  const double diff = *second - *first;
  return absl::StrCat(diff > 0 ? "+" : "", FormatNumber(diff));
}

std::string RelativeText(const std::optional<double>& first, const std::optional<double>& second) {
  if (!first || !second || *first == 0 || !std::isfinite(*first) || !std::isfinite(*second)) {
    return "-";
  }
  return absl::StrFormat("%+.2f%%", 100.0 * (*second - *first) / std::fabs(*first));
}

std::optional<double> FinalMetric(const tae::v1::Run& run, const std::string& name) {
  for (const tae::v1::Scalar& scalar : run.final_metrics()) {
    if (scalar.key() == name) {
      return scalar.value();
    }
  }
  return std::nullopt;
}

// Fills the config diff and the identical-key count from each run's flat config object.
absl::Status DiffConfigs(const std::vector<tae::v1::Run>& runs, RunComparison* out) {
  std::vector<nlohmann::json> configs;
  std::set<std::string> keys;
  for (const tae::v1::Run& run : runs) {
    nlohmann::json config = nlohmann::json::parse(run.config_json(), nullptr, false);
    if (!config.is_object()) {
      return absl::FailedPreconditionError(
          absl::StrCat(RunName(run.id()), " has no config (its config_json is not a JSON object)"));
    }
    for (const auto& item : config.items()) {
      keys.insert(item.key());
    }
    configs.push_back(std::move(config));
  }
  for (const std::string& key : keys) {
    RunComparison::ConfigRow row{key, {}};
    bool differs = false;
    for (const nlohmann::json& config : configs) {
      auto it = config.find(key);
      row.values.push_back(it == config.end() ? nlohmann::json() : *it);
      differs = differs || it == config.end() || row.values.back() != row.values.front();
    }
    if (differs) {
      out->config_diff.push_back(std::move(row));
    } else {
      ++out->identical_keys;
    }
  }
  return absl::OkStatus();
}

absl::Status CollectMetrics(const std::vector<tae::v1::Run>& runs,
                            const std::vector<std::string>& requested, RunComparison* out) {
  std::vector<std::string> names;
  if (requested.empty()) {
    std::set<std::string> all;
    for (const tae::v1::Run& run : runs) {
      for (const tae::v1::Scalar& scalar : run.final_metrics()) {
        all.insert(scalar.key());
      }
    }
    names.assign(all.begin(), all.end());
  } else {
    for (const std::string& name : requested) {
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(name);
      }
    }
  }
  for (const std::string& name : names) {
    RunComparison::MetricRow row{name, {}};
    bool any = false;
    for (const tae::v1::Run& run : runs) {
      row.values.push_back(FinalMetric(run, name));
      any = any || row.values.back().has_value();
    }
    if (!any) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metric: no run has a final value for '", name, "'"));
    }
    out->metrics.push_back(std::move(row));
  }
  return absl::OkStatus();
}

std::string RenderHeaders(const RunComparison& c) {
  std::vector<std::string> header = {"RUN"};
  std::vector<std::string> variant = {"variant"};
  std::vector<std::string> seed = {"seed"};
  std::vector<std::string> state = {"state"};
  std::vector<std::string> last_step = {"last_step"};
  for (const RunComparison::Header& run : c.runs) {
    header.push_back(RunName(run.id));
    variant.push_back(run.variant);
    seed.push_back(absl::StrCat(run.seed));
    state.push_back(run.state);
    last_step.push_back(absl::StrCat(run.last_step));
  }
  Table table(header);
  table.Add(variant);
  table.Add(seed);
  table.Add(state);
  table.Add(last_step);
  return table.Render();
}

std::string RenderConfig(const RunComparison& c) {
  const std::string identical =
      absl::StrCat(c.identical_keys, c.identical_keys == 1 ? " key" : " keys");
  if (c.config_diff.empty()) {
    return absl::StrCat("config: identical (", identical, ")\n");
  }
  std::vector<std::string> header = {"CONFIG"};
  for (const RunComparison::Header& run : c.runs) {
    header.push_back(RunName(run.id));
  }
  Table table(header);
  for (const RunComparison::ConfigRow& row : c.config_diff) {
    std::vector<std::string> cells = {row.key};
    for (const nlohmann::json& value : row.values) {
      cells.push_back(ConfigText(value));
    }
    table.Add(cells);
  }
  return absl::StrCat(table.Render(), identical, " identical in all runs\n");
}

std::string RenderMetrics(const RunComparison& c) {
  if (c.metrics.empty()) {
    return "metrics: none yet\n";
  }
  const bool pair = c.runs.size() == 2;
  std::vector<std::string> header = {"METRIC"};
  for (const RunComparison::Header& run : c.runs) {
    header.push_back(RunName(run.id));
  }
  if (pair) {
    header.push_back("DIFF");
    header.push_back("REL");
  }
  Table table(header);
  for (const RunComparison::MetricRow& row : c.metrics) {
    std::vector<std::string> cells = {row.name};
    for (const std::optional<double>& value : row.values) {
      cells.push_back(ValueText(value));
    }
    if (pair) {
      cells.push_back(DiffText(row.values[0], row.values[1]));
      cells.push_back(RelativeText(row.values[0], row.values[1]));
    }
    table.Add(cells);
  }
  return table.Render();
}

// Fetches each run in order; a missing one is NotFound naming it. A command job's config keeps
// only the keys that reach it unless `all` (ShownConfig); `hidden` counts the others.
absl::StatusOr<std::vector<tae::v1::Run>> FetchRuns(ControlClient& client,
                                                    const std::vector<int64_t>& ids, bool all,
                                                    int* hidden) {
  *hidden = 0;
  std::vector<tae::v1::Run> runs;
  for (int64_t id : ids) {
    tae::v1::GetRunRequest request;
    request.set_run_id(id);
    tae::v1::GetRunResponse response;
    absl::Status s =
        client.Check(client.stub()->GetRun(ControlClient::Context().get(), request, &response));
    if (absl::IsNotFound(s)) {
      return absl::NotFoundError(absl::StrCat("run ", RunName(id), " does not exist"));
    }
    if (!s.ok()) {
      return s;
    }
    int left_out = 0;
    const nlohmann::ordered_json config = ShownConfig(
        response.run(), {response.command_keys().begin(), response.command_keys().end()}, all,
        &left_out);
    *hidden = std::max(*hidden, left_out);
    runs.push_back(response.run());
    if (left_out > 0) {
      runs.back().set_config_json(config.dump());
    }
  }
  return runs;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ParseCompareRunIds(const std::vector<std::string>& args) {
  if (args.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat("compare needs at least 2 runs, got ",
                                                   args.size(), " (taectl compare r1 r2)"));
  }
  std::vector<int64_t> ids;
  for (const std::string& text : args) {
    absl::StatusOr<int64_t> id = ParseRunId(text);
    if (!id.ok()) {
      return id.status();
    }
    if (std::find(ids.begin(), ids.end(), *id) != ids.end()) {
      return absl::InvalidArgumentError(absl::StrCat(RunName(*id), " is given twice"));
    }
    ids.push_back(*id);
  }
  return ids;
}

absl::StatusOr<RunComparison> BuildComparison(const std::vector<tae::v1::Run>& runs,
                                              const std::vector<std::string>& metrics) {
  RunComparison out;
  for (const tae::v1::Run& run : runs) {
    out.runs.push_back(
        {run.id(), run.variant(), run.seed(), tae::v1::StateName(run.state()), run.last_step()});
  }
  if (absl::Status s = DiffConfigs(runs, &out); !s.ok()) {
    return s;
  }
  if (absl::Status s = CollectMetrics(runs, metrics, &out); !s.ok()) {
    return s;
  }
  return out;
}

std::string RenderComparison(const RunComparison& comparison) {
  return absl::StrCat(RenderHeaders(comparison), "\n", RenderConfig(comparison), "\n",
                      RenderMetrics(comparison));
}

nlohmann::ordered_json ComparisonJson(const RunComparison& comparison) {
  nlohmann::ordered_json ids = nlohmann::ordered_json::array();
  for (const RunComparison::Header& run : comparison.runs) {
    ids.push_back(run.id);
  }
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  for (const RunComparison::ConfigRow& row : comparison.config_diff) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (const nlohmann::json& value : row.values) {
      values.push_back(nlohmann::ordered_json::parse(value.dump()));
    }
    config[row.key] = values;
  }
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  for (const RunComparison::MetricRow& row : comparison.metrics) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (const std::optional<double>& value : row.values) {
      values.push_back(value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json());
    }
    metrics[row.name] = values;
  }
  return {{"runs", ids},
          {"config_diff", config},
          {"identical_keys", comparison.identical_keys},
          {"metrics", metrics}};
}

int Compare(const CommandEnv& env, const Args& args) {
  bool json = false;
  bool all = false;
  std::vector<std::string> metrics;
  cli::FlagSet flags(
      "usage: taectl compare RUN RUN... [--json] [--metric M]...\n\n"
      "Shows 2 or more runs (r<ID>) side by side: variant, seed, state and last step; the config\n"
      "keys whose values differ (keys equal in every run are only counted); and each metric's\n"
      "final value per run (default: every metric any of the runs has), with the difference\n"
      "(second minus first) and relative difference when there are exactly 2 runs. Command jobs'\n"
      "configs are compared on the keys that reach them (their params, job.*, resources.*, the\n"
      "seed and the keys their commands name); --all compares tae-train's keys too.");
  flags.Bool("json", &json, "print {runs, config_diff, identical_keys, metrics} (docs/cli.md)");
  flags.Bool("all", &all, "compare every config key, also those no command job sees");
  flags.Repeated("metric", &metrics, "metric to show (repeatable) [all]");
  Args rest;
  if (int code = ParseOrExit(flags, args, 0, args.size(), &rest); code >= 0) {
    return code;
  }
  absl::StatusOr<std::vector<int64_t>> ids = ParseCompareRunIds(rest);
  if (!ids.ok()) {
    return Fail(ids.status());
  }
  ControlClient client(env.home);
  int hidden = 0;
  absl::StatusOr<std::vector<tae::v1::Run>> runs = FetchRuns(client, *ids, all, &hidden);
  if (!runs.ok()) {
    return Fail(runs.status());
  }
  absl::StatusOr<RunComparison> comparison = BuildComparison(*runs, metrics);
  if (!comparison.ok()) {
    return Fail(comparison.status());
  }
  if (json) {
    nlohmann::ordered_json out = ComparisonJson(*comparison);
    if (hidden > 0) {
      out["config_hidden"] = hidden;
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::fputs(RenderComparison(*comparison).c_str(), stdout);
    if (hidden > 0) {
      std::printf(
          "(%d config keys, of tae-train, reach no command job here: --all compares them)\n",
          hidden);
    }
  }
  return 0;
}

}  // namespace tae::client
