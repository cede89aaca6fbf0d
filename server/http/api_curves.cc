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
#include "common/status/macros.h"
#include "common/thread/parallel.h"
#include "server/curves/curves.h"
#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/http/views.h"
#include "server/report/report.h"

namespace tae::http {
namespace {

// The variants whose runs the curves read: those asked for and, for deltas, their baselines; all
// when none was asked for (empty).
std::set<std::string> WantedVariants(const CurveRequest& req) {
  std::set<std::string> wanted(req.variants.begin(), req.variants.end());
  if (req.delta) {
    for (const std::string& v : req.variants) {
      wanted.insert(spec::BaselineFor(v, req.baseline));
    }
  }
  return wanted;
}

// The experiment's variants in its own order, those wanted only.
std::vector<std::string> VariantOrder(const model::ExperimentRecord& exp,
                                      const std::set<std::string>& wanted) {
  std::vector<std::string> order;
  for (const std::string& v : exp.variants) {
    if (wanted.empty() || wanted.count(v) > 0) {
      order.push_back(v);
    }
  }
  return order;
}

// A curve's points past which its runs are banded on more than one thread
// (common/thread/parallel.h).
constexpr int64_t kPointsPerThread = 250'000;
constexpr int kCurveThreads = 4;

// Each wanted run's points as x (`x` kind, XValues) and y into `builder`, one run at a time: its
// x range first (every run's), then its points. A run without points yet is listed in its band.
// Packs are decoded into buffers reused from run to run, so a 10,000-run study's 10 million
// points are never held decoded at once; the variants are banded on a few threads at once where
// there are that many points (nothing the series cache holds changes meanwhile: the core waits).
absl::Status FeedRuns(const std::vector<query::RunView>& runs,
                      const std::map<int64_t, query::StoredSeries>& stored,
                      const std::set<std::string>& wanted, const std::string& x,
                      curves::Builder* builder) {
  // The runs are brief (Query::CurveRuns): a variant's config is its first run's, and so is its
  // x axis (read once, when the variant's first run with points comes).
  std::map<std::string, const query::RunView*> first_of;
  std::map<std::string, std::vector<const query::RunView*>> runs_of;  // wanted, in id order
  for (const query::RunView& view : runs) {
    first_of.emplace(view.run.variant, &view);
    if (wanted.empty() || wanted.count(view.run.variant) > 0) {
      runs_of[view.run.variant].push_back(&view);
    }
  }
  // The range, run by run: from the steps' ends where the axis allows, else every x.
  std::map<std::string, XAxis> axis_of;
  store::SeriesColumns columns;
  std::vector<double> xs;
  int64_t points = 0;
  for (const auto& [variant, views] : runs_of) {
    for (const query::RunView* view : views) {
      auto it = stored.find(view->run.id);
      if (it == stored.end()) {
        continue;
      }
      auto axis = axis_of.find(variant);
      if (axis == axis_of.end()) {
        absl::StatusOr<XAxis> read = XAxisOf(x, first_of.at(variant)->run);
        if (!read.ok()) return read.status();
        axis = axis_of.emplace(variant, *read).first;
      }
      points += it->second.size();
      if (!builder->Zoomed() && it->second.size() > 0) {
        auto [min_step, max_step] = it->second.StepSpan();
        if (std::optional<XAxis::Span> span = axis->second.SpanOfSteps(min_step, max_step)) {
          builder->RangeSpan(span->lo, span->hi, span->whole);
          continue;
        }
      }
      RETURN_IF_ERROR(it->second.Columns(false, axis->second.NeedsWalls(), &columns));
      XValues(axis->second, columns, &xs);
      builder->Range(xs);
    }
  }
  builder->EndRange();
  // The points, a variant per part: no two threads add to one band.
  std::vector<const std::vector<const query::RunView*>*> parts;
  for (const auto& [variant, views] : runs_of) {
    parts.push_back(&views);
  }
  std::vector<absl::Status> fed(parts.size());
  const int threads = points >= kPointsPerThread ? thread::UsefulThreads(kCurveThreads) : 1;
  thread::ParallelFor(static_cast<int>(parts.size()), threads, [&](int part) {
    store::SeriesColumns columns;
    std::vector<double> xs;
    for (const query::RunView* view : *parts[static_cast<size_t>(part)]) {
      auto it = stored.find(view->run.id);
      if (it == stored.end()) {
        builder->Add(view->run.id, view->run.variant, {}, {});
        continue;
      }
      const XAxis& axis = axis_of.at(view->run.variant);
      if (absl::Status read = it->second.Columns(true, axis.NeedsWalls(), &columns); !read.ok()) {
        fed[static_cast<size_t>(part)] = read;
        return;
      }
      XValues(axis, columns, &xs);
      builder->Add(view->run.id, view->run.variant, xs, columns.values);
    }
  });
  for (const absl::Status& status : fed) {
    RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

// Each band as its difference from its baseline's; the baselines read only for that are dropped
// when variants were asked for.
void ToDeltas(const CurveRequest& req, curves::Curves* built) {
  curves::ToDelta(built, [&](const std::string& v) { return spec::BaselineFor(v, req.baseline); });
  if (req.variants.empty()) {
    return;
  }
  std::set<std::string> asked(req.variants.begin(), req.variants.end());
  std::vector<curves::Band> kept;
  for (curves::Band& band : built->bands) {
    if (asked.count(band.variant) > 0) {
      kept.push_back(std::move(band));
    }
  }
  built->bands = std::move(kept);
}

// The curves as the chart's JSON (with the metric's goal), a CSV or an SVG figure; a download
// when asked (CSV always).
Response RenderCurves(const model::ExperimentRecord& exp, const CurveRequest& req,
                      const curves::Curves& built, Api::CurveFormat format, bool download) {
  const std::string stem =
      absl::StrCat("e", exp.id, "-", absl::StrReplaceAll(req.metric, {{"/", "_"}}));
  Response response;
  switch (format) {
    case Api::CurveFormat::kCsv:
      response.content_type = "text/csv; charset=utf-8";
      response.body = CurvesCsv(req, built);
      return Download(std::move(response), stem + ".csv", true);
    case Api::CurveFormat::kSvg:
      response.content_type = "image/svg+xml";
      response.body =
          CurvesSvg(absl::StrCat(exp.name, ": ", req.metric,
                                 req.smooth > 0 ? absl::StrCat(" (EMA ", req.smooth, ")") : "",
                                 ", mean ± 95% CI over seeds"),
                    req, built);
      return Download(std::move(response), stem + ".svg", download);
    case Api::CurveFormat::kJson:
      break;
  }
  const std::string goal = report::HigherIsBetter(req.metric, exp.report.goal) ? "max" : "min";
  response = Response::Json(200, CurvesJson(exp.id, req, goal, built));
  return Download(std::move(response), stem + ".json", download);
}

}  // namespace

Response Api::CurvesAsJson(const Request& request, const PathParams& params) {
  return Curves(request, params, CurveFormat::kJson);
}

Response Api::CurvesAsCsv(const Request& request, const PathParams& params) {
  return Curves(request, params, CurveFormat::kCsv);
}

Response Api::CurvesAsSvg(const Request& request, const PathParams& params) {
  return Curves(request, params, CurveFormat::kSvg);
}

// Asks, in order: the request (ParseCurveRequest) and its experiment; the metric, when none was
// named (DefaultCurveMetric); the cache; else the bands (BuildCurves), drawn in `format`
// (RenderCurves) and kept.
Response Api::Curves(const Request& request, const PathParams& params, CurveFormat format) {
  absl::StatusOr<CurveRequest> parsed = ParseCurveRequest(request);
  if (!parsed.ok()) return FromStatus(parsed.status());
  CurveRequest req = *std::move(parsed);
  absl::StatusOr<int64_t> id = ExperimentOf(params);
  if (!id.ok()) return FromStatus(id.status());
  absl::StatusOr<model::ExperimentRecord> exp = query_->GetExperiment(*id);
  if (!exp.ok()) return FromStatus(exp.status());
  if (req.metric.empty()) {
    absl::StatusOr<std::string> metric = DefaultCurveMetric(*exp);
    if (!metric.ok()) return FromStatus(metric.status());
    req.metric = *metric;
  }
  const std::string key = absl::StrCat("curves|", static_cast<int>(format), "|", req.Key(*id));
  const int64_t version = query_->DataVersion();
  if (std::optional<Response> cached = CachedAnswer(key, version)) {
    return *std::move(cached);
  }
  absl::StatusOr<curves::Curves> built = BuildCurves(*exp, req);
  if (!built.ok()) return FromStatus(built.status());
  Response response = RenderCurves(*exp, req, *built, format, request.Param("download") == "1");
  KeepAnswer(key, version, response);
  return response;
}

absl::StatusOr<std::string> Api::DefaultCurveMetric(const model::ExperimentRecord& exp) {
  std::vector<std::string> defaults = exp.report.metrics;
  if (defaults.empty()) {
    absl::StatusOr<std::vector<std::string>> names = query_->MetricNames(exp.id);
    if (!names.ok()) return names.status();
    defaults = metrics::DefaultMetrics(*names);
  }
  if (defaults.empty()) {
    return absl::NotFoundError(absl::StrCat("e", exp.id, " has no metrics yet"));
  }
  return defaults.front();
}

absl::StatusOr<curves::Curves> Api::BuildCurves(const model::ExperimentRecord& exp,
                                                const CurveRequest& req) {
  absl::StatusOr<std::vector<query::RunView>> runs = query_->CurveRuns(exp.id, req.metric);
  if (!runs.ok()) return runs.status();
  // From memory where nothing changed; new steps only where runs moved
  // (server/http/series_cache.h).
  absl::StatusOr<const std::map<int64_t, query::StoredSeries>*> points =
      series_cache_.Get(exp.id, *runs, req.metric);
  if (!points.ok()) return points.status();
  const std::set<std::string> wanted = WantedVariants(req);
  curves::Builder builder(VariantOrder(exp, wanted),
                          {req.width * 2, req.smooth, req.x_min, req.x_max});
  if (absl::Status fed = FeedRuns(*runs, **points, wanted, req.x, &builder); !fed.ok()) {
    return fed;
  }
  curves::Curves built = builder.Finish();
  if (req.delta) {
    ToDeltas(req, &built);
  }
  return built;
}

}  // namespace tae::http
