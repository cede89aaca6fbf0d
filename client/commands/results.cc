// taectl logs / report / cancel / heads.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands/common.h"
#include "client/commands/head_text.h"
#include "common/report_text/report_text.h"
#include "client/output/table.h"
#include "client/rpc/control_client.h"
#include "common/api/head_grid.h"
#include "common/api/json.h"
#include "common/metrics/names.h"
#include "nlohmann/json.hpp"
#include "proto/tae/v1/states.h"

namespace tae::client {

using report_text::BuildPivot;
using report_text::NoMetricsText;
using report_text::Pivot;
using report_text::RenderFrontier;
using report_text::RenderPivot;
using report_text::RenderReport;
using report_text::RenderScale;
namespace {}  // namespace

int Logs(const CommandEnv& env, const Args& args) {
  bool follow = false;
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl logs RUN [-f] [--json]\n\nPrints a run's stdout/stderr lines (every "
      "attempt's, "
      "in order); -f follows until the run ends. --json prints every stored line as "
      "{cursor, attempt, stream, text, wall_time}.");
  flags.Bool("follow", &follow, "keep printing new lines until the run is final (also -f)");
  flags.Bool("json", &json, "print the stored lines as a JSON array (no -f)");
  Args rest;
  Args expanded;
  for (const std::string& a : args) {
    expanded.push_back(a == "-f" ? "--follow" : a);
  }
  if (int code = ParseOrExit(flags, expanded, 1, 1, &rest); code >= 0) {
    return code;
  }
  absl::StatusOr<int64_t> run_id = ParseRunId(rest[0]);
  if (!run_id.ok()) {
    return Fail(run_id.status());
  }
  ControlClient client(env.home);
  int64_t cursor = 0;
  bool told = false;
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    while (true) {
      tae::v1::LogsRequest request;
      request.set_run_id(*run_id);
      request.set_after(cursor);
      request.set_limit(10000);
      tae::v1::LogsResponse response;
      absl::Status s =
          client.Check(client.stub()->Logs(ControlClient::Context().get(), request, &response));
      if (!s.ok()) {
        return Fail(s);
      }
      for (const tae::v1::LogEntry& line : response.lines()) {
        out.push_back({{"cursor", line.cursor()},
                       {"attempt", line.attempt()},
                       {"stream", line.stream()},
                       {"text", line.text()},
                       {"wall_time", line.wall_time()}});
      }
      cursor = std::max(cursor, response.next());
      if (response.lines_size() == 0) {
        break;
      }
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  while (true) {
    tae::v1::LogsRequest request;
    request.set_run_id(*run_id);
    request.set_after(cursor);
    tae::v1::LogsResponse response;
    absl::Status s =
        client.Check(client.stub()->Logs(ControlClient::Context().get(), request, &response));
    if (!s.ok()) {
      return Fail(s);
    }
    for (const tae::v1::LogEntry& line : response.lines()) {
      std::FILE* out = line.stream() == "stdout" ? stdout : stderr;
      if (line.stream() == "agent") {
        std::fprintf(out, "[agent] %s\n", line.text().c_str());
      } else {
        std::fprintf(out, "%s\n", line.text().c_str());
      }
    }
    std::fflush(stdout);
    if (cursor == 0 && response.lines_size() == 0 && !response.run_finished() && !told) {
      std::fprintf(stderr, "(no output yet from r%ld)\n", static_cast<long>(*run_id));
      told = true;
    }
    cursor = std::max(cursor, response.next());
    if (response.lines_size() > 0) {
      continue;  // page through what is stored before waiting
    }
    if (!follow || response.run_finished()) {
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int Report(const CommandEnv& env, const Args& args) {
  std::string format = "table";
  std::vector<std::string> metrics;
  std::string baseline;
  std::string sort = "effect";
  std::string pivot;
  bool json = false;
  bool tuned = false;
  bool at_grid = false;
  std::string frontier;
  std::string cost;
  bool scale = false;
  double scale_at = 0;
  cli::FlagSet flags(
      "usage: taectl report EXP [--metric M]... [--baseline V] [--sort effect|spec]\n"
      "                         [--tuned|--at-grid] [--format table|md|csv|latex|json]\n"
      "                         [--pivot A×B]\n"
      "       taectl report EXP --frontier \"METRIC>=VALUE\" [--cost params|flops|tokens_per_s]\n"
      "                         [--tuned|--at-grid] [--json]\n"
      "       taectl report EXP --scale [--at N] [--metric LOSS] [--json]\n\n"
      "The ablation table. Per variant: runs succeeded/total; per metric the mean over seeds of\n"
      "each run's final value ± the 95% confidence interval (t distribution), the mean of each\n"
      "run's best value, and the delta against the baseline at the same grid point, absolute,\n"
      "relative and marked by Welch's t-test (* p<0.05, ** p<0.01, *** p<0.001); then\n"
      "parameters, FLOPs per token and tokens/s. Rows are sorted by the size of the first\n"
      "metric's relative delta (--sort spec: the spec's order).\n\n"
      "--tuned (the default when the file has a [search]) shows each variant at its own best\n"
      "grid point on the search metric (else the first metric), with the chosen value of each\n"
      "grid key, compared with the baseline at its own best point; --at-grid shows every grid\n"
      "point, each compared with the baseline at the same point. An asha [search] adds the\n"
      "steps run against the full grid's and the points pruned per rung.\n\n"
      "--pivot A×B tabulates the first metric over two keys instead: rows by A, columns by B,\n"
      "each 'variant' (the ablation, without the grid point) or a spec key such as train.task or\n"
      "model.layers, e.g. --pivot variant×train.task.\n\n"
      "--frontier \"eval/acc>=0.99\" (operators >=, >, <=, <) lists the variants cheapest first\n"
      "with the metric's mean ± 95% CI, marks the Pareto front of cost against the metric, and\n"
      "names the cheapest variant whose whole CI clears the bar (a mean that clears with a CI\n"
      "that straddles the bar does not count), or says none does. --cost: params (default) or\n"
      "flops, lower is cheaper; tokens_per_s, higher is cheaper (faster). A variant whose runs\n"
      "report no cost is listed as unknown, never ranked. With a [grid], each variant is at its\n"
      "tuned point unless --at-grid.\n\n"
      "--scale (a study with a [scale] ladder of model sizes) shows each variant's effect at\n"
      "every rung, then fits L = E + A*(m*N)^-alpha to the first metric (a loss) with alpha\n"
      "and E shared and m each variant's effective-parameter multiplier: the exponent and\n"
      "each m with 95% intervals from a bootstrap over seeds, and each m's trend with size\n"
      "(grows, shrinks, none, or reverses near some N). --at N extrapolates each effect to N\n"
      "parameters (refused beyond 10x the ladder's ends).");
  flags.String("format", &format, "table, md, csv, latex or json");
  flags.Bool("json", &json, "same as --format json");
  flags.Repeated("metric", &metrics, "metric to show (repeatable) [eval/loss, eval/acc]");
  flags.String("baseline", &baseline, "variant the deltas are against [baseline]");
  flags.String("sort", &sort, "effect or spec");
  flags.String("pivot", &pivot, "two keys A×B (or A,B): one metric over both");
  flags.Bool("tuned", &tuned, "each variant at its own best grid point");
  flags.Bool("at-grid", &at_grid, "every grid point");
  flags.String("frontier", &frontier, "a bar METRIC OP VALUE: the cheapest variant clearing it");
  flags.String("cost", &cost, "the frontier's cost: params, flops or tokens_per_s [params]");
  flags.Bool("scale", &scale, "a [scale] ladder: the effects across sizes and their fit");
  flags.Double("at", &scale_at, "with --scale: extrapolate each effect to N parameters");
  Args rest;
  if (int code = ParseOrExit(flags, args, 1, 1, &rest); code >= 0) {
    return code;
  }
  if (json) {
    format = "json";
  }
  if (tuned && at_grid) {
    return Fail(absl::InvalidArgumentError("--tuned and --at-grid: choose one"));
  }
  const std::vector<std::string> formats = {"table", "md", "csv", "latex", "json"};
  if (std::find(formats.begin(), formats.end(), format) == formats.end()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--format: '", format, "' is not one of table, md, csv, latex, json")));
  }
  if (!frontier.empty() && !pivot.empty()) {
    return Fail(absl::InvalidArgumentError("--frontier and --pivot: choose one"));
  }
  if (!frontier.empty() && format != "table" && format != "json") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--frontier prints a table or --json, not --format ", format)));
  }
  if (frontier.empty() && !cost.empty()) {
    return Fail(absl::InvalidArgumentError("--cost is the axis of --frontier; give --frontier"));
  }
  if (scale_at != 0 && !scale) {
    return Fail(absl::InvalidArgumentError("--at is the size --scale extrapolates to; give --scale"));
  }
  if (scale && (!frontier.empty() || !pivot.empty() || tuned)) {
    return Fail(absl::InvalidArgumentError("--scale: not with --frontier, --pivot or --tuned"));
  }
  if (scale && format != "table" && format != "json") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--scale prints a table or --json, not --format ", format)));
  }
  if (scale && !(scale_at >= 0 && std::isfinite(scale_at))) {
    return Fail(absl::InvalidArgumentError("--at: a size N > 0 (a parameter count, e.g. 1e9)"));
  }
  ControlClient client(env.home);
  if (!pivot.empty()) {
    tae::v1::ListRunsRequest request;
    request.set_experiment(rest[0]);
    tae::v1::ListRunsResponse runs;
    absl::Status s =
        client.Check(client.stub()->ListRuns(ControlClient::Context().get(), request, &runs));
    if (!s.ok()) {
      return Fail(s);
    }
    const std::string metric = metrics.empty() ? std::string(tae::metrics::kEvalLoss) : metrics[0];
    absl::StatusOr<Pivot> table =
        BuildPivot({runs.runs().begin(), runs.runs().end()}, pivot, metric);
    if (!table.ok()) {
      return Fail(table.status());
    }
    if (format == "json") {
      nlohmann::ordered_json out = {{"metric", table->metric},    {"rows_key", table->row_key},
                                    {"cols_key", table->col_key}, {"rows", table->rows},
                                    {"cols", table->cols},        {"cells", table->cells}};
      std::printf("%s\n", out.dump(2).c_str());
      return 0;
    }
    std::fputs(RenderPivot(*table, format).c_str(), stdout);
    return 0;
  }
  tae::v1::ReportRequest request;
  request.set_experiment(rest[0]);
  for (const std::string& m : metrics) {
    request.add_metrics(m);
  }
  request.set_baseline(baseline);
  request.set_sort(sort);
  request.set_view(tuned ? "tuned" : (at_grid ? "grid" : ""));
  request.set_frontier(frontier);
  request.set_cost(cost);
  request.set_scale(scale);
  request.set_scale_at(scale_at);
  tae::v1::ReportResponse report;
  absl::Status s =
      client.Check(client.stub()->Report(ControlClient::Context().get(), request, &report));
  if (!s.ok()) {
    return Fail(s);
  }
  if (!frontier.empty()) {
    if (format == "json") {
      nlohmann::ordered_json out = {{"experiment", report.experiment().id()},
                                    {"name", report.experiment().name()},
                                    {"view", report.view()}};
      if (report.view() == "tuned") {
        out["search"] = {{"metric", report.search_metric()}, {"goal", report.search_goal()}};
      }
      out.update(api::FrontierJson(report.frontier()));
      std::printf("%s\n", out.dump(2).c_str());
      return 0;
    }
    std::fputs(RenderFrontier(report).c_str(), stdout);
    return 0;
  }
  if (format == "json") {
    std::printf("%s\n", api::ReportJson(report).dump(2).c_str());
    return 0;
  }
  if (scale) {
    std::fputs(RenderScale(report).c_str(), stdout);
    return 0;
  }
  absl::StatusOr<std::string> text = RenderReport(report, format);
  if (!text.ok()) {
    return Fail(text.status());
  }
  std::fputs(text->c_str(), stdout);
  // Said on stderr: the table on stdout keeps its shape for scripts.
  std::fputs(NoMetricsText(report).c_str(), stderr);
  if (report.metrics_source() == "runs") {
    // Said on stderr: the table on stdout keeps its shape for scripts.
    std::fprintf(stderr,
                 "report: e%ld has no eval/loss or eval/acc; these are its runs' own metrics: %s "
                 "(name others with --metric)\n",
                 static_cast<long>(report.experiment().id()),
                 absl::StrJoin(report.metrics(), ", ").c_str());
  }
  return 0;
}

int Cancel(const CommandEnv& env, const Args& args) {
  std::string reason;
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl cancel ID [--reason TEXT] [--json]\n\n"
      "Cancels a run (r<ID>) or every unfinished run of an experiment (e<ID>, id or name).\n"
      "Running jobs get SIGTERM, then SIGKILL; their whole process group is stopped.");
  flags.String("reason", &reason, "recorded with the transition");
  flags.Bool("json", &json, "print {\"cancelled\": N}");
  Args rest;
  if (int code = ParseOrExit(flags, args, 1, 1, &rest); code >= 0) {
    return code;
  }
  ControlClient client(env.home);
  tae::v1::CancelRequest request;
  request.set_target(rest[0]);
  request.set_reason(reason);
  tae::v1::CancelResponse response;
  absl::Status s =
      client.Check(client.stub()->Cancel(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    std::printf("{\"cancelled\": %d}\n", response.cancelled());
  } else if (response.cancelled() == 0) {
    std::printf("nothing to cancel: every run of %s has already finished\n", rest[0].c_str());
  } else {
    std::printf("cancelling %d run(s)\n", response.cancelled());
  }
  return 0;
}

int Heads(const CommandEnv& env, const Args& args) {
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl heads RUN [--json]\n\n"
      "Head importance of a finished tae-train run (train.head_importance = true) as two\n"
      "layer x head grids: the eval/loss increase when each head alone is masked at evaluation,\n"
      "and Michel et al.'s gradient score normalised per layer. Heads removed by\n"
      "model.prune_heads show as 'pruned', layers without attention as 'removed'.");
  flags.Bool("json", &json, "print {run, layers, heads, masked: [[...]], gradient: [[...]]}");
  Args rest;
  if (int code = ParseOrExit(flags, args, 1, 1, &rest); code >= 0) {
    return code;
  }
  absl::StatusOr<int64_t> run_id = ParseRunId(rest[0]);
  if (!run_id.ok()) {
    return Fail(run_id.status());
  }
  ControlClient client(env.home);
  tae::v1::GetRunRequest request;
  request.set_run_id(*run_id);
  tae::v1::GetRunResponse response;
  absl::Status s =
      client.Check(client.stub()->GetRun(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<api::HeadGrid> grid = api::BuildHeadGrid(response.run());
  if (!grid.ok()) {
    return Fail(grid.status());
  }
  if (json) {
    std::printf("%s\n", api::HeadGridJson(*run_id, *grid).dump(2).c_str());
    return 0;
  }
  const tae::v1::Run& run = response.run();
  std::printf("r%ld %s seed %ld (%s)\n\n", static_cast<long>(run.id()), run.variant().c_str(),
              static_cast<long>(run.seed()), tae::v1::StateName(run.state()));
  std::fputs(RenderHeadGrid(*grid).c_str(), stdout);
  return 0;
}

}  // namespace tae::client
