// Query's report: which metrics, the runs' final values, the table (server/report), and what a
// search saved. Split from query.cc, which reads everything else.

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metrics/names.h"
#include "common/spec/spec.h"
#include "common/status/macros.h"
#include "server/query/query.h"
#include "server/report/scale.h"

namespace tae::query {

absl::Status Query::ExplainNoMetrics(const std::vector<std::string>& present,
                                     const std::vector<model::RunRecord>& runs,
                                     ReportResult* result) {
  // DefaultMetrics names eval/loss and eval/acc when present, else the runs' own metrics.
  const bool reported = !tae::metrics::DefaultMetrics(present, 1).empty();
  const model::RunRecord* sample = nullptr;
  for (const model::RunRecord& run : runs) {  // the last one that started
    if (run.attempt > 0 && run.state != model::RunState::kQueued) {
      sample = &run;
    }
  }
  if (reported || sample == nullptr) {
    return absl::OkStatus();
  }
  result->no_metrics = true;
  result->sample_run = sample->id;
  ASSIGN_OR_RETURN(LogPage page, LogsBefore(sample->id, 0, 40));
  for (const model::LogRecord& line : page.lines) {
    if (line.stream != "agent") {
      result->sample_output.push_back(line.text.substr(0, 300));
    }
  }
  if (result->sample_output.size() > 12) {
    result->sample_output.erase(result->sample_output.begin(), result->sample_output.end() - 12);
  }
  return absl::OkStatus();
}

absl::StatusOr<ReportResult> Query::Report(const std::string& experiment,
                                           std::vector<std::string> metrics, std::string baseline,
                                           std::string sort, std::string view,
                                           const std::string& frontier, const std::string& cost,
                                           bool scale, double scale_at) {
  TAE_CHECK_OWNER(core_);
  std::optional<report::Bar> bar;
  report::CostAxis cost_axis = report::CostAxis::kParams;
  if (!frontier.empty()) {
    ASSIGN_OR_RETURN(bar, report::ParseBar(frontier));
    ASSIGN_OR_RETURN(cost_axis, report::ParseCost(cost));
  } else if (!cost.empty()) {
    return absl::InvalidArgumentError("cost: names the axis of a frontier; give the frontier too");
  }
  if (sort.empty()) {
    sort = "effect";
  }
  if (!view.empty() && view != "tuned" && view != "grid") {
    return absl::InvalidArgumentError(absl::StrCat("view: '", view, "' is not one of tuned, grid"));
  }
  if (baseline.empty()) {
    baseline = "baseline";
  }
  ASSIGN_OR_RETURN(int64_t id, store_->ResolveExperiment(experiment));
  ReportResult result;
  ASSIGN_OR_RETURN(result.experiment, GetExperiment(id));
  // The metrics its runs have (one scan of their summaries, read once).
  ASSIGN_OR_RETURN(const std::vector<std::string> present, MetricNames(id));
  result.metrics_source = "asked";
  if (metrics.empty() && !result.experiment.report.metrics.empty()) {
    metrics = result.experiment.report.metrics;
    result.metrics_source = "spec";
  }
  if (metrics.empty()) {
    metrics = tae::metrics::DefaultMetrics(present);
    result.metrics_source = "runs";
    if (metrics.empty()) {
      metrics = {tae::metrics::kEvalLoss, tae::metrics::kEvalAcc};
      result.metrics_source = "default";
    } else if (metrics.front() == tae::metrics::kEvalLoss) {
      result.metrics_source = "default";  // with the compression columns the runs have
    }
  }
  if (bar) {
    if (std::find(present.begin(), present.end(), bar->metric) == present.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--frontier '", frontier, "': e", id, " has no metric '", bar->metric, "'; ",
          present.empty() ? "its runs have stored no metric yet"
                          : absl::StrCat("its runs have: ", absl::StrJoin(present, ", "))));
    }
    if (std::find(metrics.begin(), metrics.end(), bar->metric) == metrics.end()) {
      metrics.push_back(bar->metric);
    }
  }
  const model::ScaleSettings& ladder = result.experiment.report.scale;
  if (!scale && scale_at != 0) {
    return absl::InvalidArgumentError("scale_at: the size to extrapolate to; ask for the scale fit");
  }
  if (scale && !ladder.declared()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale: e", id, " has no [scale] ladder (its file lists no sizes)"));
  }
  if (scale && !(scale_at >= 0 && std::isfinite(scale_at))) {
    return absl::InvalidArgumentError("scale_at: a size N > 0 (a parameter count)");
  }
  if (scale && report::HigherIsBetter(metrics.front(), result.experiment.report.goal)) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale: the ladder fits a loss (lower is better) and '", metrics.front(),
                     "' is higher-is-better; name a loss first (--metric eval/loss)"));
  }
  if (ladder.declared() && view == "tuned") {
    return absl::InvalidArgumentError(
        "view: the tuned view of a [scale] ladder is not supported yet (it would choose across "
        "rungs); each rung's grid points are in the grid view");
  }
  ASSIGN_OR_RETURN(std::vector<model::RunRecord> runs, store_->ListRunsBrief(id));
  RETURN_IF_ERROR(ExplainNoMetrics(present, runs, &result));
  const std::vector<std::string>& variants = result.experiment.variants;
  const model::SearchSettings& search = result.experiment.report.search;
  const bool grid = std::any_of(variants.begin(), variants.end(), [](const std::string& v) {
    return v.find('[') != std::string::npos;
  });
  result.view = !view.empty()                                        ? view
                : ladder.declared()                                   ? "grid"
                : search.declared || (bar && grid)                    ? "tuned"
                                                                      : "grid";
  const bool tuned = result.view == "tuned";
  if (tuned) {
    result.search_metric = search.declared ? search.metric : metrics.front();
    result.search_goal =
        search.declared
            ? search.goal
            : (report::HigherIsBetter(metrics.front(), result.experiment.report.goal) ? "max"
                                                                                      : "min");
  }
  const bool known = std::any_of(variants.begin(), variants.end(), [&](const std::string& v) {
    return v == baseline || spec::BaselineFor(v, baseline) == v ||       // "baseline[layers=2]"
           (tuned && absl::StartsWith(v, absl::StrCat(baseline, "[")));  // its ablation
  });
  if (!known) {
    return absl::InvalidArgumentError(
        absl::StrCat("baseline: e", id, " has no variant '", baseline,
                     "'; its variants are: ", absl::StrJoin(result.experiment.variants, ", ")));
  }
  std::vector<std::string> wanted = metrics;
  std::vector<std::string> extras = report::ExtraMetrics();
  if (tuned) {
    extras.push_back(result.search_metric);
  }
  if (scale) {
    extras.emplace_back(report::kParamsMetric);  // a command job's own parameter count
  }
  for (const std::string& extra : extras) {
    if (std::find(wanted.begin(), wanted.end(), extra) == wanted.end()) {
      wanted.push_back(extra);
    }
  }
  ASSIGN_OR_RETURN(std::vector<model::FinalValue> values, FinalValues(id, wanted));
  const report::ReportOptions options = report::OptionsOf(result.experiment.report);
  if (tuned) {
    const std::string ablation = baseline.substr(0, baseline.find('['));
    result.rows = report::BuildTunedReport(variants, runs, values, metrics, result.search_metric,
                                           result.search_goal == "max", ablation,
                                           result.experiment.report.goal, options);
    result.search_confirm = options.confirm;
    result.estimates = report::TunedEstimates(options.confirm, result.rows);
  } else {
    result.rows = report::BuildReport(variants, runs, values, metrics, baseline,
                                      result.experiment.report.goal, options);
  }
  ASSIGN_OR_RETURN(result.savings, SearchSavings(result.experiment, &result.decisions));
  if (bar) {
    result.frontier =
        report::BuildFrontier(result.rows, *bar, cost_axis,
                              report::HigherIsBetter(bar->metric, result.experiment.report.goal),
                              !tuned                ? "as run"
                              : options.confirm > 0 ? "confirmed"
                                                    : "optimistic");
  }
  result.banners = report::Banners(result.rows);
  report::ReportOptions family_options = options;
  family_options.selected = tuned && options.confirm <= 0;
  result.correction = report::SummarizeFamily(family_options, result.rows, metrics);
  result.adaptive = options.adaptive;
  if (scale) {
    ASSIGN_OR_RETURN(const std::vector<model::RunRecord> full, store_->ListRuns(id));
    result.scale = report::BuildScale(ladder, result.rows, full, values, metrics.front(),
                                      result.correction, scale_at);
  }
  if (sort == "effect") {
    report::SortByEffect(&result.rows);
  } else if (sort != "spec") {
    return absl::InvalidArgumentError(
        absl::StrCat("sort: '", sort, "' is not one of effect, spec"));
  }
  result.metrics = std::move(metrics);
  result.baseline = std::move(baseline);
  return result;
}

absl::StatusOr<std::optional<report::SearchSavings>> Query::SearchSavings(
    const model::ExperimentRecord& experiment) {
  std::vector<model::SearchDecisionRecord> decisions;
  return SearchSavings(experiment, &decisions);
}

absl::StatusOr<std::optional<report::SearchSavings>> Query::SearchSavings(
    const model::ExperimentRecord& experiment,
    std::vector<model::SearchDecisionRecord>* decisions) {
  TAE_CHECK_OWNER(core_);
  if (!experiment.report.search.declared || !experiment.report.search.asha()) {
    return std::nullopt;
  }
  ASSIGN_OR_RETURN(std::vector<model::RunRecord> runs, store_->ListRuns(experiment.id));
  ASSIGN_OR_RETURN(auto summaries, ExperimentSummaries(experiment.id));
  ASSIGN_OR_RETURN(*decisions, store_->SearchDecisions(experiment.id));
  std::vector<report::RunSteps> steps;
  steps.reserve(runs.size());
  for (const model::RunRecord& run : runs) {
    if (run.confirm) {
      continue;  // search.confirm's runs come after the search: not what it saved or spent
    }
    report::RunSteps& s = steps.emplace_back();
    s.config_json = run.config_json;
    if (auto it = summaries.find(run.id); it != summaries.end()) {
      for (const model::MetricSummary& summary : it->second) {
        s.last_step = std::max(s.last_step, summary.last_step);
      }
    }
  }
  return report::SavingsOf(steps, *decisions);
}

}  // namespace tae::query
