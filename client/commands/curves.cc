// taectl plot / export: the metric series of an experiment as an SVG figure, as CSV or JSON, or
// as TensorBoard event files.

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/commands/bundle.h"
#include "client/commands/commands.h"
#include "client/commands/common.h"
#include "client/output/table.h"
#include "client/rpc/control_client.h"
#include "common/api/frontier_figure.h"
#include "common/api/scale_figure.h"
#include "common/cli/flags.h"
#include "common/metrics/names.h"
#include "common/plot/frontier_svg.h"
#include "common/plot/scale_svg.h"
#include "common/plot/svg_plot.h"
#include "common/tensorboard/tensorboard.h"
#include "nlohmann/json.hpp"

namespace tae::client {
namespace {

absl::StatusOr<tae::v1::QueryMetricsResponse> Query(ControlClient& client,
                                                    const tae::v1::QueryMetricsRequest& request) {
  tae::v1::QueryMetricsResponse response;
  absl::Status s = client.Check(
      client.stub()->QueryMetrics(ControlClient::Context(120000).get(), request, &response));
  if (!s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<tae::v1::ListRunsResponse> ListRuns(ControlClient& client,
                                                   const std::string& experiment) {
  tae::v1::ListRunsRequest request;
  request.set_experiment(experiment);
  tae::v1::ListRunsResponse runs;
  absl::Status s =
      client.Check(client.stub()->ListRuns(ControlClient::Context().get(), request, &runs));
  if (!s.ok()) {
    return s;
  }
  return runs;
}

// The metric names the first run with any points has, for "did you mean" in errors.
std::string KnownKeys(ControlClient& client, const tae::v1::ListRunsResponse& runs) {
  for (const tae::v1::Run& run : runs.runs()) {
    tae::v1::QueryMetricsRequest request;
    request.add_run_ids(run.id());
    request.set_max_points(1);
    absl::StatusOr<tae::v1::QueryMetricsResponse> response = Query(client, request);
    if (response.ok() && response->series_size() > 0) {
      std::vector<std::string> keys;
      for (const tae::v1::MetricSeries& series : response->series()) {
        keys.push_back(series.key());
      }
      return absl::StrCat("; r", run.id(), " has: ", absl::StrJoin(keys, ", "));
    }
  }
  return "; no run has stored any metric yet";
}

// Mean over seeds per step, with the min and max over seeds (of the bucket means when the series
// were downsampled), one Series per variant in the experiment's run order.
std::vector<plot::Series> ByVariant(const tae::v1::QueryMetricsResponse& response) {
  std::vector<std::string> order;
  std::map<std::string, std::map<int64_t, std::vector<double>>> values;
  for (const tae::v1::MetricSeries& series : response.series()) {
    const std::string& variant = series.run().variant();
    if (values.find(variant) == values.end()) {
      order.push_back(variant);
    }
    auto& steps = values[variant];
    for (const tae::v1::MetricPoint& point : series.points()) {
      steps[point.step()].push_back(point.value());
    }
  }
  std::vector<plot::Series> out;
  for (const std::string& variant : order) {
    plot::Series series;
    series.name = variant;
    for (const auto& [step, xs] : values[variant]) {
      double sum = 0;
      double lo = INFINITY;
      double hi = -INFINITY;
      for (double x : xs) {
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      series.x.push_back(static_cast<double>(step));
      series.mean.push_back(sum / static_cast<double>(xs.size()));
      series.lo.push_back(lo);
      series.hi.push_back(hi);
    }
    out.push_back(std::move(series));
  }
  return out;
}

bool WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  return static_cast<bool>(out);
}

std::string Number(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  return buf;
}

// A run's TensorBoard directory name: r<ID>-<variant>-s<seed>, '/' replaced.
std::string RunDirName(const tae::v1::Run& run) {
  return absl::StrReplaceAll(absl::StrCat("r", run.id(), "-", run.variant(), "-s", run.seed()),
                             {{"/", "_"}});
}

// taectl plot --frontier: the report's cost frontier (ReportRequest.frontier) as an SVG.
int PlotFrontier(const CommandEnv& env, const std::string& experiment, const std::string& bar,
                 const std::string& cost, const std::string& view, std::string output,
                 const std::string& title) {
  ControlClient client(env.home);
  tae::v1::ReportRequest request;
  request.set_experiment(experiment);
  request.set_frontier(bar);
  request.set_cost(cost);
  request.set_view(view);
  tae::v1::ReportResponse report;
  absl::Status s =
      client.Check(client.stub()->Report(ControlClient::Context().get(), request, &report));
  if (!s.ok()) {
    return Fail(s);
  }
  plot::FrontierFigure figure = api::FrontierFigureOf(report);
  if (!title.empty()) {
    figure.title = title;
  }
  const tae::v1::ReportFrontier& f = report.frontier();
  if (output.empty()) {
    output = absl::StrCat(report.experiment().name(), "-frontier-",
                          absl::StrReplaceAll(f.metric(), {{"/", "_"}}), ".svg");
  }
  if (!WriteFile(output, plot::RenderFrontierSvg(figure))) {
    return Fail(absl::InternalError(absl::StrCat("cannot write ", output)));
  }
  std::printf("wrote %s: %s against %s, %d variants; %s\n", output.c_str(), f.metric().c_str(),
              f.cost().c_str(), f.points_size(), figure.verdict.c_str());
  return 0;
}

// taectl plot --scale: the report's ladder fit (ReportRequest.scale) as an SVG, one file per grid
// point when the ladder has a [grid] (or the one --point names).
int PlotScale(const CommandEnv& env, const std::string& experiment, const std::string& metric,
              double at, const std::string& point, std::string output, const std::string& title) {
  ControlClient client(env.home);
  tae::v1::ReportRequest request;
  request.set_experiment(experiment);
  if (!metric.empty()) {
    request.add_metrics(metric);
  }
  request.set_scale(true);
  request.set_scale_at(at);
  tae::v1::ReportResponse report;
  absl::Status s =
      client.Check(client.stub()->Report(ControlClient::Context().get(), request, &report));
  if (!s.ok()) {
    return Fail(s);
  }
  std::vector<int> chosen;
  std::vector<std::string> points;
  for (int i = 0; i < report.scale_size(); ++i) {
    points.push_back(report.scale(i).point());
    if (point.empty() || report.scale(i).point() == point) {
      chosen.push_back(i);
    }
  }
  if (chosen.empty()) {
    return Fail(absl::NotFoundError(
        point.empty() ? "the report has no ladder fit"
                      : absl::StrCat("--point ", point, ": not a grid point of the ladder (",
                                     absl::StrJoin(points, ", "), ")")));
  }
  if (chosen.size() > 1 && !output.empty()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("-o names one file but the ladder has ", chosen.size(),
                     " grid points; choose one with --point (", absl::StrJoin(points, ", "), ")")));
  }
  for (int i : chosen) {
    const tae::v1::ScaleFit& fit = report.scale(i);
    plot::ScaleFigure figure = api::ScaleFigureOf(report, i);
    if (!title.empty()) {
      figure.title = title;
    }
    std::string file = output;
    if (file.empty()) {
      file = absl::StrCat(report.experiment().name(), "-scale-",
                          absl::StrReplaceAll(fit.metric(), {{"/", "_"}}),
                          fit.point().empty() ? "" : absl::StrCat("-", fit.point()), ".svg");
      file = absl::StrReplaceAll(file, {{"/", "_"}, {" ", "_"}, {",", "_"}});
    }
    if (!WriteFile(file, plot::RenderScaleSvg(figure))) {
      return Fail(absl::InternalError(absl::StrCat("cannot write ", file)));
    }
    std::printf("wrote %s: %s against N over %d rungs, %d variants; %s\n", file.c_str(),
                fit.metric().c_str(), fit.rungs_size(), fit.variants_size(),
                figure.subtitle.c_str());
  }
  return 0;
}

}  // namespace

int Plot(const CommandEnv& env, const Args& args) {
  std::string metric;  // empty: eval/loss, or the runs' own first metric when they have none
  std::string output;
  std::string title;
  int max_points = 300;
  bool log_y = false;
  bool pruning = false;
  std::string frontier;
  std::string cost;
  bool tuned = false;
  bool at_grid = false;
  bool scale = false;
  double scale_at = 0;
  std::string point;
  cli::FlagSet flags(
      "usage: taectl plot EXP [--metric NAME] [-o FILE.svg] [--log-y] [--max-points N]\n"
      "       taectl plot EXP --pruning [--metric prune/eval/acc]\n"
      "       taectl plot EXP --frontier \"METRIC>=VALUE\" [--cost params|flops|tokens_per_s]\n"
      "                       [--tuned|--at-grid] [-o FILE.svg]\n"
      "       taectl plot EXP --scale [--metric LOSS] [--at N] [--point GRIDPOINT] [-o "
      "FILE.svg]\n\n"
      "Writes the curves of one metric as an SVG figure: one line per variant (the mean over its\n"
      "seeds at each step) with a shaded band from the lowest to the highest seed. Long series\n"
      "are downsampled by taed to about N points per run (mean of each bucket).\n\n"
      "--pruning plots eval loss against the number of heads kept when the least important\n"
      "are masked (eval.prune_heads_by_importance; Michel et al. 2019's figure).\n\n"
      "--frontier plots the metric's mean ± 95% CI of each variant against its cost with the bar,\n"
      "the Pareto front and the cheapest variant whose whole CI clears the bar ringed (taectl\n"
      "report --frontier prints the same as a table).\n\n"
      "--scale (a [scale] ladder) plots the loss against model size N on log-log axes: each\n"
      "variant's mean ± 95% CI at every rung, a band through them, and the fitted law\n"
      "L = E + A·(m·N)^-α with the variant's multiplier m (taectl report --scale prints the fit);\n"
      "--at N extends the curves to N and marks it. One file per grid point with a [grid].");
  flags.Bool("scale", &scale, "a [scale] ladder: the metric against N with the fitted law");
  flags.Double("at", &scale_at, "with --scale: extend the curves to N parameters and mark it");
  flags.String("point", &point, "with --scale and a [grid]: the grid point to plot (lr=0.01)");
  flags.String("frontier", &frontier, "a bar METRIC OP VALUE (>=, >, <=, <): the cost frontier");
  flags.String("cost", &cost, "the frontier's cost: params, flops or tokens_per_s [params]");
  flags.Bool("tuned", &tuned, "with --frontier: each variant at its own best grid point");
  flags.Bool("at-grid", &at_grid, "with --frontier: every grid point");
  flags.Bool("pruning", &pruning, "eval/loss against heads kept (prune/eval/loss)");
  flags.String("metric", &metric,
               "metric to plot; default: eval/loss, or the runs' own first metric without it");
  flags.String("output", &output, "SVG file to write (-o); default: <experiment>-<metric>.svg");
  flags.String("title", &title, "figure title; default: '<experiment>: <metric>'");
  flags.Bool("log-y", &log_y, "logarithmic y axis (for losses and perplexities)");
  flags.Int("max-points", &max_points, "points per run at most (0: every point)");
  Args rest;
  absl::Status parsed = flags.Parse(WithLongOutput(args), &rest);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (parsed.ok() && rest.size() != 1) {
    parsed = absl::InvalidArgumentError("plot takes one experiment (id, e<ID> or name)");
  }
  if (parsed.ok() && max_points < 0) {
    parsed = absl::InvalidArgumentError("--max-points: must be >= 0");
  }
  if (parsed.ok() && tuned && at_grid) {
    parsed = absl::InvalidArgumentError("--tuned and --at-grid: choose one");
  }
  if (parsed.ok() && frontier.empty() && (!cost.empty() || tuned || at_grid)) {
    parsed = absl::InvalidArgumentError("--cost, --tuned and --at-grid go with --frontier");
  }
  if (parsed.ok() && !frontier.empty() && (pruning || !metric.empty())) {
    parsed = absl::InvalidArgumentError("--frontier names its metric in the bar; drop --metric");
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  if (parsed.ok() && !scale && (scale_at != 0 || !point.empty())) {
    parsed = absl::InvalidArgumentError("--at and --point go with --scale");
  }
  if (parsed.ok() && scale && (!frontier.empty() || pruning)) {
    parsed = absl::InvalidArgumentError("--scale: not with --frontier or --pruning");
  }
  if (parsed.ok() && scale && !(scale_at >= 0 && std::isfinite(scale_at))) {
    parsed = absl::InvalidArgumentError("--at: a size N > 0");
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  if (scale) {
    return PlotScale(env, rest[0], metric, scale_at, point, output, title);
  }
  if (!frontier.empty()) {
    return PlotFrontier(env, rest[0], frontier, cost, tuned ? "tuned" : (at_grid ? "grid" : ""),
                        output, title);
  }
  ControlClient client(env.home);
  tae::v1::GetExperimentRequest get;
  get.set_experiment(rest[0]);
  tae::v1::Experiment exp;
  absl::Status s =
      client.Check(client.stub()->GetExperiment(ControlClient::Context().get(), get, &exp));
  if (!s.ok()) {
    return Fail(s);
  }
  if (pruning && metric.empty()) {
    metric = "prune/eval/loss";
  }
  if (pruning && metric.rfind("prune/", 0) != 0) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--metric ", metric, ": with --pruning, prune/eval/loss or prune/eval/acc")));
  }
  const bool chosen = !metric.empty() || exp.report_metrics_size() > 0;
  if (metric.empty()) {
    // The file's [report] metrics first, else eval/loss (or the runs' own, below).
    metric = exp.report_metrics_size() > 0 ? exp.report_metrics(0) : tae::metrics::kEvalLoss;
  }
  tae::v1::QueryMetricsRequest request;
  request.set_experiment(rest[0]);
  request.add_keys(metric);
  request.set_max_points(max_points);
  absl::StatusOr<tae::v1::QueryMetricsResponse> response = Query(client, request);
  if (!response.ok()) {
    return Fail(response.status());
  }
  if (response->series_size() == 0 && !chosen) {
    // No eval/loss: the runs' own metrics (metrics::DefaultMetrics), the first of them.
    absl::StatusOr<tae::v1::ListRunsResponse> runs = ListRuns(client, rest[0]);
    const std::vector<std::string> own =
        runs.ok() ? RunsDefaultMetrics(*runs, 4) : std::vector<std::string>();
    if (!own.empty() && own.front() != tae::metrics::kEvalLoss) {
      metric = own.front();
      request.clear_keys();
      request.add_keys(metric);
      response = Query(client, request);
      if (!response.ok()) {
        return Fail(response.status());
      }
      std::fprintf(stderr,
                   "plot: e%ld has no eval/loss; plotting %s, the first of its runs' own "
                   "metrics (%s; name one with --metric)\n",
                   static_cast<long>(exp.id()), metric.c_str(), absl::StrJoin(own, ", ").c_str());
    }
  }
  if (response->series_size() == 0) {
    absl::StatusOr<tae::v1::ListRunsResponse> runs = ListRuns(client, rest[0]);
    return Fail(absl::NotFoundError(absl::StrCat("e", exp.id(), " has no points of '", metric, "'",
                                                 runs.ok() ? KnownKeys(client, *runs) : "")));
  }
  std::vector<plot::Series> series = ByVariant(*response);
  plot::PlotOptions options;
  options.title = title.empty() ? absl::StrCat(exp.name(), " (e", exp.id(), "): ", metric) : title;
  if (pruning) {
    options.x_label = "heads kept (the least important masked first)";
  }
  options.y_label = metric;
  options.log_y = log_y;
  if (output.empty()) {
    output = absl::StrCat(exp.name(), "-", absl::StrReplaceAll(metric, {{"/", "_"}}), ".svg");
  }
  if (!WriteFile(output, plot::RenderSvg(series, options))) {
    return Fail(absl::InternalError(absl::StrCat("cannot write ", output)));
  }
  std::printf("wrote %s: %s of %zu variants, %d runs\n", output.c_str(), metric.c_str(),
              series.size(), response->series_size());
  return 0;
}

int Export(const CommandEnv& env, const Args& args) {
  std::string format = "csv";
  std::string output;
  std::string tensorboard_dir;
  std::string bundle_dir;
  std::vector<std::string> metrics;
  cli::FlagSet flags(
      "usage: taectl export EXP [--format csv|json] [-o FILE] [--metric NAME]...\n"
      "       taectl export EXP --tensorboard DIR [--metric NAME]...\n"
      "       taectl export EXP --bundle DIR\n\n"
      "Writes every stored point of the experiment's runs (all metrics unless --metric is\n"
      "given). csv: one row per point (run,variant,seed,metric,step,value,wall_time); json: one\n"
      "object per series {run, variant, seed, metric, steps, values, wall_times} in an array.\n"
      "--tensorboard writes TensorBoard event files instead, one sub-directory per run\n"
      "(r<ID>-<variant>-s<seed>); open them with `tensorboard --logdir DIR` "
      "(docs/tensorboard.md). --bundle writes the experiment for a notebook with no taed\n"
      "running: its runs, every point of every metric (columnar), the report as JSON and text,\n"
      "and the curves; open it with tae.open_bundle(DIR) (docs/python.md).");
  flags.String("format", &format, "csv or json");
  flags.String("output", &output, "file to write (-o); default: standard output");
  flags.String("tensorboard", &tensorboard_dir, "write TensorBoard event files under DIR");
  flags.String("bundle", &bundle_dir, "write an offline bundle (tae.open_bundle) into DIR");
  flags.Repeated("metric", &metrics, "only this metric (repeatable)");
  Args rest;
  absl::Status parsed = flags.Parse(WithLongOutput(args), &rest);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (parsed.ok() && rest.size() != 1) {
    parsed = absl::InvalidArgumentError("export takes one experiment (id, e<ID> or name)");
  }
  if (parsed.ok() && format != "csv" && format != "json") {
    parsed = absl::InvalidArgumentError(
        absl::StrCat("--format: '", format, "' is not one of csv, json"));
  }
  if (parsed.ok() && !tensorboard_dir.empty() && !output.empty()) {
    parsed = absl::InvalidArgumentError("--tensorboard writes a directory; drop --output");
  }
  if (parsed.ok() && !bundle_dir.empty() &&
      (!tensorboard_dir.empty() || !output.empty() || !metrics.empty())) {
    parsed = absl::InvalidArgumentError(
        "--bundle holds every metric in a directory of its own: drop --tensorboard, --output "
        "and --metric");
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  if (!bundle_dir.empty()) {
    if (absl::Status s = WriteBundle(env.home, rest[0], bundle_dir, isatty(2) != 0); !s.ok()) {
      return Fail(s);
    }
    std::printf("wrote %s: open it with tae.open_bundle(\"%s\")\n", bundle_dir.c_str(),
                bundle_dir.c_str());
    return 0;
  }
  ControlClient client(env.home);
  absl::StatusOr<tae::v1::ListRunsResponse> runs = ListRuns(client, rest[0]);
  if (!runs.ok()) {
    return Fail(runs.status());
  }
  std::unique_ptr<std::ofstream> file;
  if (tensorboard_dir.empty() && !output.empty()) {
    file = std::make_unique<std::ofstream>(output, std::ios::binary | std::ios::trunc);
    if (!*file) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("cannot write ", output)));
    }
  }
  std::ostream& out = file ? *file : std::cout;
  if (tensorboard_dir.empty()) {
    out << (format == "csv" ? "run,variant,seed,metric,step,value,wall_time\n" : "[");
  }
  int64_t points = 0;
  int series_count = 0;
  bool first_series = true;
  for (const tae::v1::Run& run : runs->runs()) {  // one request per run bounds message sizes
    tae::v1::QueryMetricsRequest request;
    request.add_run_ids(run.id());
    for (const std::string& m : metrics) {
      request.add_keys(m);
    }
    absl::StatusOr<tae::v1::QueryMetricsResponse> response = Query(client, request);
    if (!response.ok()) {
      return Fail(response.status());
    }
    if (!tensorboard_dir.empty()) {
      if (response->series_size() == 0) {
        continue;
      }
      const std::string dir = absl::StrCat(tensorboard_dir, "/", RunDirName(run));
      std::error_code ec;
      if (std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec)) {
        return Fail(absl::FailedPreconditionError(
            absl::StrCat(dir,
                         " is not empty: TensorBoard would show both exports; remove it or "
                         "export to another directory")));
      }
      const tae::v1::MetricSeries& first = response->series(0);
      const double start = first.points_size() > 0 ? first.points(0).wall_time() : run.created_at();
      absl::StatusOr<std::unique_ptr<tensorboard::EventFileWriter>> writer =
          tensorboard::EventFileWriter::Create(dir, start);
      if (!writer.ok()) {
        return Fail(writer.status());
      }
      for (const tae::v1::MetricSeries& series : response->series()) {
        for (const tae::v1::MetricPoint& p : series.points()) {
          absl::Status s = (*writer)->Append({series.key(), p.step(), p.wall_time(), p.value()});
          if (!s.ok()) {
            return Fail(s);
          }
          ++points;
        }
        ++series_count;
      }
      if (absl::Status s = (*writer)->Close(); !s.ok()) {
        return Fail(s);
      }
      continue;
    }
    for (const tae::v1::MetricSeries& series : response->series()) {
      ++series_count;
      if (format == "csv") {
        const std::string prefix = absl::StrCat(run.id(), ",", CsvField(run.variant()), ",",
                                                run.seed(), ",", CsvField(series.key()), ",");
        for (const tae::v1::MetricPoint& p : series.points()) {
          out << prefix << p.step() << "," << Number(p.value()) << "," << Number(p.wall_time())
              << "\n";
          ++points;
        }
        continue;
      }
      nlohmann::json object = {{"run", run.id()},
                               {"variant", run.variant()},
                               {"seed", run.seed()},
                               {"metric", series.key()},
                               {"steps", nlohmann::json::array()},
                               {"values", nlohmann::json::array()},
                               {"wall_times", nlohmann::json::array()}};
      for (const tae::v1::MetricPoint& p : series.points()) {
        object["steps"].push_back(p.step());
        object["values"].push_back(p.value());
        object["wall_times"].push_back(p.wall_time());
        ++points;
      }
      out << (first_series ? "\n" : ",\n") << object.dump();
      first_series = false;
    }
  }
  if (tensorboard_dir.empty() && format == "json") {
    out << "\n]\n";
  }
  out.flush();
  if (!out) {
    return Fail(absl::InternalError(absl::StrCat("cannot write ", output)));
  }
  std::fprintf(stderr, "exported %ld points of %d series from %d runs%s%s\n",
               static_cast<long>(points), series_count, runs->runs_size(),
               tensorboard_dir.empty() && output.empty() ? "" : " to ",
               !tensorboard_dir.empty() ? tensorboard_dir.c_str() : output.c_str());
  return 0;
}

}  // namespace tae::client
