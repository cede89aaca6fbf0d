// The experiments' routes: GET /api/experiments, /api/experiments/ID (with its search savings),
// /api/experiments/ID/runs, /metrics (the names and the default ones) and /report (with each
// metric's goal and the config keys that tell the variants apart); POST
// /api/experiments/ID/cancel|pause|resume|retry. The curves are api_curves.cc's.

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/api/json.h"
#include "common/metrics/names.h"
#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/http/views.h"
#include "server/report/report.h"
#include "server/wire/wire.h"

namespace tae::http {
namespace {

using nlohmann::ordered_json;

}  // namespace

Response Api::Experiments() {
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

Response Api::Experiment(const Request& request, const std::vector<std::string>& p) {
  absl::StatusOr<int64_t> id = query_->ResolveExperiment(p[2]);
  if (!id.ok()) return FromStatus(id.status());
  const std::string what = p.size() == 3 ? "" : p[3];
  if (p.size() > 4) {
    return Response::Error(404, absl::StrCat(request.path, ": no such endpoint"));
  }
  if (what.empty()) {
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
  if (what == "report") {
    return ExperimentReport(request, *id);
  }
  if (what == "runs") {
    absl::StatusOr<std::vector<query::RunView>> runs = query_->ListRuns(absl::StrCat(*id));
    if (!runs.ok()) return FromStatus(runs.status());
    ordered_json list = ordered_json::array();
    for (const query::RunView& run : *runs) {
      tae::v1::Run proto;
      wire::ToProto(run, &proto);
      list.push_back(api::RunJson(proto));
    }
    return Ok({{"runs", list}});
  }
  if (what == "metrics") {
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
  if (what == "curves" || what == "curves.csv" || what == "curves.svg") {
    return Curves(request, *id, what);
  }
  return Response::Error(404, absl::StrCat(request.path, ": no such endpoint"));
}

Response Api::ExperimentReport(const Request& request, int64_t id) {
  std::vector<std::string> metrics =
      absl::StrSplit(request.Param("metrics"), ',', absl::SkipEmpty());
  absl::StatusOr<query::ReportResult> report =
      query_->Report(absl::StrCat(id), metrics, request.Param("baseline"), request.Param("sort"),
                     request.Param("view"));
  if (!report.ok()) return FromStatus(report.status());
  tae::v1::ReportResponse proto;
  wire::ToProto(*report, &proto);
  ordered_json out = api::ReportJson(proto);
  ordered_json goal = ordered_json::object();
  for (const std::string& metric : report->metrics) {
    goal[metric] = report::HigherIsBetter(metric, report->experiment.report.goal) ? "max" : "min";
  }
  out["goal"] = goal;
  absl::StatusOr<std::vector<query::RunView>> runs = query_->ListRuns(absl::StrCat(id));
  if (!runs.ok()) return FromStatus(runs.status());
  out["varying"] = VaryingKeys(*runs);
  return Ok(out);
}

Response Api::ExperimentAction(const Request& request, const std::string& ref,
                               const std::string& action) {
  if (action == "cancel") {
    absl::StatusOr<int> n = controller_->Cancel(ref, "cancelled from the dashboard");
    if (!n.ok()) return FromStatus(n.status());
    return Ok({{"ok", true}, {"cancelled", *n}});
  }
  if (action == "pause" || action == "resume") {
    absl::StatusOr<int64_t> id = controller_->SetPaused(ref, action == "pause");
    if (!id.ok()) return FromStatus(id.status());
    return Ok({{"ok", true}, {"experiment", *id}, {"paused", action == "pause"}});
  }
  if (action == "retry") {
    absl::StatusOr<int> n = controller_->Retry(ref);
    if (!n.ok()) return FromStatus(n.status());
    return Ok({{"ok", true}, {"requeued", *n}});
  }
  return Response::Error(404, absl::StrCat("POST ", request.path, ": no such action"));
}

}  // namespace tae::http
