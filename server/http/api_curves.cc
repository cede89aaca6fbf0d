// GET /api/experiments/ID/curves[.csv|.svg]: each variant's band over its seeds for one metric
// (server/curves), as the chart's JSON, CSV or SVG (views.h renders them). Answers are cached by
// request and data version; the series behind them stay in memory between requests
// (series_cache.h).

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/metrics/names.h"
#include "common/spec/spec.h"
#include "server/curves/curves.h"
#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/http/views.h"
#include "server/report/report.h"

namespace tae::http {
namespace {

constexpr size_t kCurveCacheEntries = 64;
// The curve answers kept between requests, in bytes of body; an answer larger than a quarter of
// it is not kept.
constexpr int64_t kCurveCacheBytes = 32 << 20;

}  // namespace

Response Api::Curves(const Request& request, int64_t id, const std::string& what) {
  absl::StatusOr<CurveRequest> parsed = ParseCurveRequest(request);
  if (!parsed.ok()) return FromStatus(parsed.status());
  CurveRequest req = *std::move(parsed);
  absl::StatusOr<model::ExperimentRecord> exp = query_->GetExperiment(id);
  if (!exp.ok()) return FromStatus(exp.status());
  if (req.metric.empty()) {
    std::vector<std::string> defaults = exp->report.metrics;
    if (defaults.empty()) {
      absl::StatusOr<std::vector<std::string>> names = query_->MetricNames(id);
      if (!names.ok()) return FromStatus(names.status());
      defaults = metrics::DefaultMetrics(*names);
    }
    if (defaults.empty()) {
      return Response::Error(404, absl::StrCat("e", id, " has no metrics yet"));
    }
    req.metric = defaults.front();
  }
  const std::string key = absl::StrCat(what, "|", req.Key(id));
  const int64_t version = query_->DataVersion();
  if (auto it = curve_cache_.find(key); it != curve_cache_.end() && it->second.first == version) {
    return it->second.second;
  }
  absl::StatusOr<std::vector<query::RunView>> runs = query_->ListRuns(absl::StrCat(id));
  if (!runs.ok()) return FromStatus(runs.status());
  // From memory where nothing changed; new steps only where runs moved
  // (server/http/series_cache.h).
  absl::StatusOr<const std::map<int64_t, std::vector<model::MetricPoint>>*> points =
      series_cache_.Get(id, *runs, req.metric);
  if (!points.ok()) return FromStatus(points.status());
  std::vector<std::string> variants = req.variants;
  std::set<std::string> wanted(variants.begin(), variants.end());
  if (req.delta) {
    for (const std::string& v : req.variants) {
      wanted.insert(spec::BaselineFor(v, req.baseline));
    }
  }
  std::vector<std::string> order;
  for (const std::string& v : exp->variants) {
    if (wanted.empty() || wanted.count(v) > 0) {
      order.push_back(v);
    }
  }
  std::vector<curves::RunSeries> series;
  for (const query::RunView& view : *runs) {
    if (!wanted.empty() && wanted.count(view.run.variant) == 0) {
      continue;
    }
    auto it = (*points)->find(view.run.id);
    curves::RunSeries s{view.run.id, view.run.variant, {}, {}};
    if (it != (*points)->end()) {
      absl::StatusOr<std::vector<double>> x = XValues(req.x, view.run, it->second);
      if (!x.ok()) return FromStatus(x.status());
      s.x = *std::move(x);
      s.y.reserve(it->second.size());
      for (const model::MetricPoint& point : it->second) {
        s.y.push_back(point.value);
      }
    }
    series.push_back(std::move(s));
  }
  curves::Curves built =
      curves::Build(series, order, {req.width * 2, req.smooth, req.x_min, req.x_max});
  if (req.delta) {
    curves::ToDelta(&built,
                    [&](const std::string& v) { return spec::BaselineFor(v, req.baseline); });
    if (!req.variants.empty()) {
      std::set<std::string> asked(req.variants.begin(), req.variants.end());
      std::vector<curves::Band> kept;
      for (curves::Band& band : built.bands) {
        if (asked.count(band.variant) > 0) {
          kept.push_back(std::move(band));
        }
      }
      built.bands = std::move(kept);
    }
  }
  const std::string goal = report::HigherIsBetter(req.metric, exp->report.goal) ? "max" : "min";
  Response response;
  const bool download = request.Param("download") == "1";
  const std::string stem =
      absl::StrCat("e", id, "-", absl::StrReplaceAll(req.metric, {{"/", "_"}}));
  if (what == "curves.csv") {
    response.content_type = "text/csv; charset=utf-8";
    response.body = CurvesCsv(req, built);
    response = Download(std::move(response), stem + ".csv", true);
  } else if (what == "curves.svg") {
    response.content_type = "image/svg+xml";
    response.body =
        CurvesSvg(absl::StrCat(exp->name, ": ", req.metric,
                               req.smooth > 0 ? absl::StrCat(" (EMA ", req.smooth, ")") : "",
                               ", mean ± 95% CI over seeds"),
                  req, built);
    response = Download(std::move(response), stem + ".svg", download);
  } else {
    response = Response::Json(200, CurvesJson(id, req, goal, built));
    response = Download(std::move(response), stem + ".json", download);
  }
  const int64_t size = static_cast<int64_t>(response.body.size() + key.size());
  if (size <= kCurveCacheBytes / 4) {
    if (curve_cache_.size() >= kCurveCacheEntries || curve_cache_bytes_ + size > kCurveCacheBytes) {
      curve_cache_.clear();
      curve_cache_bytes_ = 0;
    }
    if (auto old = curve_cache_.find(key); old != curve_cache_.end()) {
      curve_cache_bytes_ -= static_cast<int64_t>(old->second.second.body.size() + key.size());
    }
    curve_cache_[key] = {version, response};
    curve_cache_bytes_ += size;
  }
  return response;
}

}  // namespace tae::http
