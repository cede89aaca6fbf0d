// The runs' handlers (their routes: api_routes.cc): GET /api/runs/ID (the run with its transitions,
// metric summaries and head grid), /api/runs/ID/series?metric=M&width=W (one metric, downsampled to
// 2 x width buckets) and POST /api/runs/ID/cancel. The logs are api_logs.cc's.

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/api/head_grid.h"
#include "common/api/json.h"
#include "common/spec/spec.h"
#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/wire/wire.h"

namespace tae::http {
namespace {

using nlohmann::ordered_json;

}  // namespace

Response Api::RunSeries(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> run = RunId(params.at("run"));
  if (!run.ok()) return FromStatus(run.status());
  const int64_t run_id = *run;
  const std::string metric = request.Param("metric");
  if (metric.empty()) {
    return Response::Error(400, "metric: required, e.g. metric=train/loss");
  }
  absl::StatusOr<int64_t> width = IntParam(request, "width", 600, 50, 8000);
  if (!width.ok()) return FromStatus(width.status());
  absl::StatusOr<std::vector<model::MetricPoint>> points =
      query_->QueryMetric(run_id, metric, *width * 2);
  if (!points.ok()) return FromStatus(points.status());
  ordered_json x = ordered_json::array(), value = ordered_json::array(),
               min = ordered_json::array(), max = ordered_json::array();
  for (const model::MetricPoint& point : *points) {
    x.push_back(point.step);
    value.push_back(std::isfinite(point.value) ? ordered_json(point.value) : ordered_json());
    min.push_back(std::isfinite(point.min) ? ordered_json(point.min) : ordered_json());
    max.push_back(std::isfinite(point.max) ? ordered_json(point.max) : ordered_json());
  }
  return Ok({{"run", run_id},
             {"metric", metric},
             {"x", x},
             {"value", value},
             {"min", min},
             {"max", max}});
}

Response Api::RunDetail(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> run = RunId(params.at("run"));
  if (!run.ok()) return FromStatus(run.status());
  const int64_t run_id = *run;
  absl::StatusOr<query::RunDetail> detail = query_->GetRun(run_id);
  if (!detail.ok()) return FromStatus(detail.status());
  tae::v1::GetRunResponse proto;
  wire::ToProto(*detail, &proto);
  ordered_json out = api::RunJson(proto.run());
  // A command job: the config keys that never reach it (tae-train's), which the page folds away.
  if (!detail->view.run.command.empty() && out["config"].is_object()) {
    ordered_json hidden = ordered_json::array();
    for (const auto& [key, value] : out["config"].items()) {
      if (!spec::ReachesCommand(key, detail->command_keys)) {
        hidden.push_back(key);
      }
    }
    out["hidden_config_keys"] = hidden;
  }
  ordered_json transitions = ordered_json::array();
  for (const model::TransitionRecord& t : detail->transitions) {
    transitions.push_back({{"attempt", t.attempt},
                           {"from", t.from_state},
                           {"to", t.to_state},
                           {"reason", t.reason},
                           {"at", t.at}});
  }
  out["transitions"] = transitions;
  ordered_json summaries = ordered_json::array();
  for (const model::MetricSummary& s : detail->view.summaries) {
    summaries.push_back({{"key", s.key},
                         {"last_step", s.last_step},
                         {"last", s.last_value},
                         {"min", s.min_value},
                         {"max", s.max_value},
                         {"count", s.count}});
  }
  out["summaries"] = summaries;
  absl::StatusOr<api::HeadGrid> grid = api::BuildHeadGrid(proto.run());
  out["heads"] = grid.ok() ? api::HeadGridJson(run_id, *grid) : ordered_json();
  return Ok(out);
}

Response Api::CancelRun(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> run = RunId(params.at("run"));
  if (!run.ok()) return FromStatus(run.status());
  absl::StatusOr<int> n =
      controller_->Cancel(absl::StrCat("r", *run), "cancelled from the dashboard");
  if (!n.ok()) return FromStatus(n.status());
  return Ok({{"ok", true}, {"cancelled", *n}});
}

}  // namespace tae::http
