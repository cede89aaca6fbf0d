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
#include "client/commands/common.h"
#include "client/commands/head_grid.h"
#include "client/commands/json.h"
#include "client/output/table.h"
#include "client/rpc/control_client.h"

namespace tae::client {
namespace {

std::string Cell(const tae::v1::ReportCell& cell) {
  if (cell.n() == 0) {
    return "-";
  }
  if (cell.n() == 1) {
    return FormatNumber(cell.mean());
  }
  return absl::StrCat(FormatNumber(cell.mean()), " ± ", FormatNumber(cell.std()));
}

std::string Delta(const tae::v1::ReportCell& cell, bool is_baseline) {
  if (is_baseline || !cell.has_delta()) {
    return "";
  }
  return absl::StrCat(cell.delta() >= 0 ? "+" : "", FormatNumber(cell.delta()));
}

}  // namespace

int Logs(const CommandEnv& env, const Args& args) {
  bool follow = false;
  cli::FlagSet flags(
      "usage: taectl logs RUN [-f]\n\nPrints a run's stdout/stderr lines; -f follows until the "
      "run ends.");
  flags.Bool("follow", &follow, "keep printing new lines until the run is final (also -f)");
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
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl report EXP [--format table|json] [--metric M]... [--baseline V]\n\n"
      "The ablation table: per variant, runs succeeded/total, and for each metric the mean ±\n"
      "standard deviation over seeds of its final value, and the delta against the baseline.");
  flags.String("format", &format, "table or json");
  flags.Bool("json", &json, "same as --format json");
  flags.Repeated("metric", &metrics, "metric to show (repeatable) [eval/loss, eval/acc]");
  flags.String("baseline", &baseline, "variant the deltas are against [baseline]");
  Args rest;
  if (int code = ParseOrExit(flags, args, 1, 1, &rest); code >= 0) {
    return code;
  }
  if (json) {
    format = "json";
  }
  if (format != "table" && format != "json") {
    return Fail(absl::InvalidArgumentError("--format: must be table or json"));
  }
  ControlClient client(env.home);
  tae::v1::ReportRequest request;
  request.set_experiment(rest[0]);
  for (const std::string& m : metrics) {
    request.add_metrics(m);
  }
  request.set_baseline(baseline);
  tae::v1::ReportResponse report;
  absl::Status s =
      client.Check(client.stub()->Report(ControlClient::Context().get(), request, &report));
  if (!s.ok()) {
    return Fail(s);
  }
  if (format == "json") {
    std::printf("%s\n", ReportJson(report).dump(2).c_str());
    return 0;
  }
  const tae::v1::Experiment& exp = report.experiment();
  std::printf("e%ld %s (%s): final values, mean ± std over seeds; Δ vs %s\n\n",
              static_cast<long>(exp.id()), exp.name().c_str(), exp.state().c_str(),
              report.baseline().c_str());
  std::vector<std::string> header = {"VARIANT", "RUNS"};
  for (const std::string& m : report.metrics()) {
    header.push_back(m);
    header.push_back("Δ " + m);
  }
  Table table(header);
  for (const tae::v1::ReportRow& row : report.rows()) {
    std::vector<std::string> cells = {row.variant(),
                                      absl::StrCat(row.runs(), "/", row.runs_total())};
    for (const tae::v1::ReportCell& cell : row.cells()) {
      cells.push_back(Cell(cell));
      cells.push_back(Delta(cell, row.variant() == report.baseline()));
    }
    table.Add(cells);
  }
  std::fputs(table.Render().c_str(), stdout);
  const tae::v1::RunCounts& c = exp.counts();
  int unfinished = c.total() - c.succeeded() - c.failed() - c.cancelled();
  if (c.failed() + c.cancelled() + unfinished > 0) {
    std::printf(
        "\nonly succeeded runs count: %d failed, %d cancelled, %d not finished (see "
        "taectl runs e%ld)\n",
        c.failed(), c.cancelled(), unfinished, static_cast<long>(exp.id()));
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
  absl::StatusOr<HeadGrid> grid = BuildHeadGrid(response.run());
  if (!grid.ok()) {
    return Fail(grid.status());
  }
  if (json) {
    std::printf("%s\n", HeadGridJson(*run_id, *grid).dump(2).c_str());
    return 0;
  }
  const tae::v1::Run& run = response.run();
  std::printf("r%ld %s seed %ld (%s)\n\n", static_cast<long>(run.id()), run.variant().c_str(),
              static_cast<long>(run.seed()), run.state().c_str());
  std::fputs(RenderHeadGrid(*grid).c_str(), stdout);
  return 0;
}

}  // namespace tae::client
