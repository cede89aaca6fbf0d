// The experiments' handlers (their routes: api_routes.cc): GET /api/experiments,
// /api/experiments/ID (with its search savings), /api/experiments/ID/runs, /metrics (the names and
// the default ones), /report (with each metric's goal and the config keys that tell the variants
// apart; ?frontier= adds the cost frontier) and /frontier.svg (its figure); POST
// /api/experiments/ID/cancel|pause|resume|retry. The curves are api_curves.cc's.

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/api/frontier_figure.h"
#include "common/api/json.h"
#include "common/report_text/report_text.h"
#include "common/metrics/names.h"
#include "common/status/macros.h"
#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/http/views.h"
#include "server/report/report.h"
#include "server/wire/wire.h"

namespace tae::http {
namespace {

using nlohmann::ordered_json;

}  // namespace

absl::StatusOr<int64_t> Api::ExperimentOf(const PathParams& params) {
  return query_->ResolveExperiment(params.at("exp"));
}

Response Api::Experiments(const Request& request, const PathParams& params) {
  absl::StatusOr<std::vector<model::ExperimentRecord>> exps = query_->ListExperiments(0);
  if (!exps.ok()) return FromStatus(exps.status());
  ordered_json list = ordered_json::array();
  for (const model::ExperimentRecord& exp : *exps) {
    tae::v1::Experiment proto;
    wire::ToProto(exp, &proto);
    list.push_back(api::ExperimentJson(proto));
  }
  return Ok({{"experiments", list}});
}

Response Api::ExperimentDetail(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> id = ExperimentOf(params);
  if (!id.ok()) return FromStatus(id.status());
  absl::StatusOr<model::ExperimentRecord> exp = query_->GetExperiment(*id);
  if (!exp.ok()) return FromStatus(exp.status());
  tae::v1::Experiment proto;
  wire::ToProto(*exp, &proto);
  absl::StatusOr<std::optional<report::SearchSavings>> savings = query_->SearchSavings(*exp);
  if (!savings.ok()) return FromStatus(savings.status());
  if (*savings) {
    wire::ToProto(**savings, proto.mutable_search_savings());
  }
  return Ok(api::ExperimentJson(proto));
}

Response Api::ExperimentRuns(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> id = ExperimentOf(params);
  if (!id.ok()) return FromStatus(id.status());
  // ?limit=N&after=RUN: a page (the dashboard's runs list: the first at once, more on demand).
  int64_t limit = 0;
  int64_t after = 0;
  for (const auto& [name, value] : {std::pair{"limit", &limit}, std::pair{"after", &after}}) {
    const std::string text = request.Param(name);
    if (!text.empty() && (!absl::SimpleAtoi(text, value) || *value < 0)) {
      return Response::Error(400, absl::StrCat(name, ": a whole number >= 0"));
    }
  }
  absl::StatusOr<query::RunsPage> page = query_->ListRunsPage(absl::StrCat(*id), after, limit);
  if (!page.ok()) return FromStatus(page.status());
  ordered_json list = ordered_json::array();
  for (const query::RunView& run : page->runs) {
    tae::v1::Run proto;
    wire::ToProto(run, &proto);
    list.push_back(api::RunJson(proto));
  }
  return Ok({{"runs", list}, {"total", page->total}, {"next_after", page->next_after}});
}

Response Api::ExperimentMetrics(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> id = ExperimentOf(params);
  if (!id.ok()) return FromStatus(id.status());
  absl::StatusOr<std::vector<std::string>> names = query_->MetricNames(*id);
  if (!names.ok()) return FromStatus(names.status());
  absl::StatusOr<model::ExperimentRecord> exp = query_->GetExperiment(*id);
  if (!exp.ok()) return FromStatus(exp.status());
  std::vector<std::string> defaults = exp->report.metrics;
  if (defaults.empty()) {
    defaults = metrics::DefaultMetrics(*names);
  }
  return Ok({{"metrics", *names}, {"default", defaults}});
}

absl::StatusOr<query::ReportResult> Api::ReportOf(const Request& request,
                                                  const PathParams& params) {
  ASSIGN_OR_RETURN(int64_t id, ExperimentOf(params));
  std::vector<std::string> metrics =
      absl::StrSplit(request.Param("metrics"), ',', absl::SkipEmpty());
  return query_->Report(absl::StrCat(id), metrics, request.Param("baseline"), request.Param("sort"),
                        request.Param("view"), request.Param("frontier"), request.Param("cost"));
}

Response Api::ExperimentReport(const Request& request, const PathParams& params) {
  absl::StatusOr<query::ReportResult> report = ReportOf(request, params);
  if (!report.ok()) return FromStatus(report.status());
  tae::v1::ReportResponse proto;
  wire::ToProto(*report, &proto);
  ordered_json out = api::ReportJson(proto);
  ordered_json goal = ordered_json::object();
  for (const std::string& metric : report->metrics) {
    goal[metric] = report::HigherIsBetter(metric, report->experiment.report.goal) ? "max" : "min";
  }
  out["goal"] = goal;
  absl::StatusOr<std::vector<query::RunView>> runs =
      query_->ListRuns(absl::StrCat(report->experiment.id));
  if (!runs.ok()) return FromStatus(runs.status());
  out["varying"] = VaryingKeys(*runs);
  return Ok(out);
}

Response Api::ExperimentReportText(const Request& request, const PathParams& params) {
  const std::string format = request.Param("format", "table");
  absl::StatusOr<query::ReportResult> report = ReportOf(request, params);
  if (!report.ok()) return FromStatus(report.status());
  tae::v1::ReportResponse proto;
  wire::ToProto(*report, &proto);
  // What `taectl report [--frontier BAR] --format F` prints on stdout, from the same code.
  absl::StatusOr<std::string> text = !request.Param("frontier").empty() && format == "table"
                                         ? report_text::RenderFrontier(proto)
                                         : report_text::RenderReport(proto, format);
  if (!text.ok()) return FromStatus(text.status());
  Response response;
  response.status = 200;
  response.content_type = "text/plain; charset=utf-8";
  response.body = *std::move(text);
  return response;
}

Response Api::FrontierSvg(const Request& request, const PathParams& params) {
  if (request.Param("frontier").empty()) {
    return FromStatus(absl::InvalidArgumentError(
        absl::StrCat("frontier: a bar such as eval/acc>=0.99 is required (operators ",
                     report::kBarOperators, ")")));
  }
  absl::StatusOr<query::ReportResult> report = ReportOf(request, params);
  if (!report.ok()) return FromStatus(report.status());
  tae::v1::ReportResponse proto;
  wire::ToProto(*report, &proto);
  Response response;
  response.content_type = "image/svg+xml";
  response.body = plot::RenderFrontierSvg(api::FrontierFigureOf(proto));
  return Download(
      std::move(response),
      absl::StrCat("e", report->experiment.id, "-frontier-",
                   absl::StrReplaceAll(proto.frontier().metric(), {{"/", "_"}}), ".svg"),
      request.Param("download") == "1");
}

Response Api::CancelExperiment(const Request& request, const PathParams& params) {
  absl::StatusOr<int> n = controller_->Cancel(params.at("exp"), "cancelled from the dashboard");
  if (!n.ok()) return FromStatus(n.status());
  return Ok({{"ok", true}, {"cancelled", *n}});
}

namespace {

Response Paused(const absl::StatusOr<int64_t>& id, bool paused) {
  if (!id.ok()) return FromStatus(id.status());
  return Ok({{"ok", true}, {"experiment", *id}, {"paused", paused}});
}

}  // namespace

Response Api::PauseExperiment(const Request& request, const PathParams& params) {
  return Paused(controller_->SetPaused(params.at("exp"), true), true);
}

Response Api::ResumeExperiment(const Request& request, const PathParams& params) {
  return Paused(controller_->SetPaused(params.at("exp"), false), false);
}

Response Api::RetryExperiment(const Request& request, const PathParams& params) {
  absl::StatusOr<int> n = controller_->Retry(params.at("exp"));
  if (!n.ok()) return FromStatus(n.status());
  return Ok({{"ok", true}, {"requeued", *n}});
}

}  // namespace tae::http
