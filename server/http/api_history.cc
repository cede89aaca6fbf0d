// GET /api/experiments/ID/history?metric=M[&runs=1,2,...][&after=RUN]: every stored point of one
// metric of the experiment's runs, never sampled, in the columnar form of common/api/columns.h
// (what the `tae` Python library reads into pandas without a parse per point). Runs come in id
// order, each run's points in step order; a page holds whole runs and stops once it has
// kHistoryPagePoints points (one run larger than that is a page of its own), "next_after" names
// the last run of the page when more follow (0: the last page), "remaining_points" counts the
// points of this page and every later one (so that a reader can make its arrays once). Each run's
// header entry says whether it is final and at which attempt, so a client can keep an ended run's
// series and never ask for it again. The series come through the dashboard's series cache
// (series_cache.h).

#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/api/columns.h"
#include "common/status/macros.h"
#include "common/thread/parallel.h"
#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/http/views.h"

namespace tae::http {
namespace {

using nlohmann::ordered_json;

// Points per page: about 100 MB of columns, a few hundred ms of the core's time.
constexpr int64_t kHistoryPagePoints = 4'000'000;
// Points a thread writes of a page at a time (common/thread/parallel.h: milliseconds of work).
constexpr size_t kHistorySpanPoints = 500'000;
// Run ids one request may name.
constexpr size_t kHistoryMaxRuns = 10'000;

}  // namespace

Response Api::ExperimentHistory(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> id = ExperimentOf(params);
  if (!id.ok()) return FromStatus(id.status());
  const std::string metric = request.Param("metric");
  if (metric.empty()) {
    return Response::Error(400, "metric: required, e.g. metric=train/loss");
  }
  std::set<int64_t> only;
  const std::vector<std::string> listed =
      absl::StrSplit(request.Param("runs"), ',', absl::SkipEmpty());
  if (listed.size() > kHistoryMaxRuns) {
    return Response::Error(400, absl::StrCat("runs: at most ", kHistoryMaxRuns, " run ids"));
  }
  for (const std::string& text : listed) {
    int64_t run = 0;
    if (!absl::SimpleAtoi(text, &run) || run <= 0) {
      return Response::Error(400, absl::StrCat("runs: '", text, "' is not a run id"));
    }
    only.insert(run);
  }
  int64_t after = 0;
  if (const std::string text = request.Param("after");
      !text.empty() && (!absl::SimpleAtoi(text, &after) || after < 0)) {
    return Response::Error(400, "after: a whole number >= 0 (a run id)");
  }
  absl::StatusOr<std::vector<query::RunView>> runs = query_->CurveRuns(*id, metric);
  if (!runs.ok()) return FromStatus(runs.status());
  absl::StatusOr<const std::map<int64_t, query::StoredSeries>*> stored =
      series_cache_.Get(*id, *runs, metric);
  if (!stored.ok()) return FromStatus(stored.status());

  // Tokens per step by variant: the runs are brief, a variant's config is its first run's.
  std::map<std::string, double> tokens_of;
  for (const query::RunView& view : *runs) {
    if (tokens_of.count(view.run.variant) == 0) {
      absl::StatusOr<XAxis> tokens = XAxisOf("tokens", view.run);
      tokens_of[view.run.variant] = tokens.ok() ? tokens->per_step : 0.0;
    }
  }
  // The page's runs and their counts first, then one body of its size, each run's points
  // unpacked straight into their place in it.
  struct Part {
    const query::RunView* view;
    const query::StoredSeries* series;  // null: no points
    int64_t count;
  };
  std::vector<Part> page;
  int64_t points = 0;
  int64_t next_after = 0;
  int64_t remaining = 0;  // this page's points and every later page's
  for (const query::RunView& view : *runs) {
    const model::RunRecord& run = view.run;
    if (run.id <= after || (!only.empty() && only.count(run.id) == 0)) {
      continue;
    }
    auto it = (*stored)->find(run.id);
    const query::StoredSeries* series = it == (*stored)->end() ? nullptr : &it->second;
    const int64_t count = series == nullptr ? 0 : series->size();
    remaining += count;
    if (next_after != 0) {
      continue;
    }
    if (points > 0 && points + count > kHistoryPagePoints) {
      next_after = page.back().view->run.id;
      continue;
    }
    page.push_back({&view, series, count});
    points += count;
  }
  ordered_json listed_runs = ordered_json::array();
  for (const Part& part : page) {
    const model::RunRecord& run = part.view->run;
    listed_runs.push_back({{"run", run.id},
                           {"count", part.count},
                           {"attempt", run.attempt},
                           {"final", model::IsFinal(run.state)},
                           {"tokens_per_step", tokens_of[run.variant]}});
  }
  // Two passes over the page's runs: the first finds each column's narrowest exact coding (from
  // what CheckPack learnt of a pack, else from the points), the second writes the body of that
  // size (common/api/columns.h), a few spans of runs at once on a large page.
  api::ColumnsEncoder encoder;
  // One run's points into `one`; an error where they are not what was counted.
  auto points_of = [&](const Part& part, store::SeriesColumns* one) -> absl::Status {
    one->steps.clear();
    one->values.clear();
    one->walls.clear();
    if (part.count > 0) {
      RETURN_IF_ERROR(part.series->Columns(true, true, one));
    }
    const size_t n = one->steps.size();
    if (static_cast<int64_t>(n) != part.count || one->values.size() != n ||
        one->walls.size() != n) {
      return absl::InternalError(absl::StrCat("r", part.view->run.id, ": ", n, " points where ",
                                              part.count, " were counted"));
    }
    return absl::OkStatus();
  };
  {
    store::SeriesColumns one;
    for (const Part& part : page) {
      if (part.series != nullptr && !part.series->pack.empty()) {
        const store::PackInfo& info = part.series->packed;  // no unpacking to plan a pack
        encoder.PlanBounds(static_cast<size_t>(part.count), info.step_delta_bound,
                           info.wall_delta_bound, info.values_float);
        continue;
      }
      if (absl::Status s = points_of(part, &one); !s.ok()) return FromStatus(s);
      encoder.Plan(one.steps.data(), one.values.data(), one.walls.data(), one.steps.size());
    }
  }
  encoder.Start({{"experiment", *id},
                 {"metric", metric},
                 {"runs", listed_runs},
                 {"next_after", next_after},
                 {"remaining_points", remaining}});
  // Spans of about kHistorySpanPoints points, in order, each written by one thread.
  std::vector<size_t> spans = {0};
  for (size_t i = 0, in_span = 0; i < page.size(); ++i) {
    in_span += static_cast<size_t>(page[i].count);
    if (in_span >= kHistorySpanPoints && i + 1 < page.size()) {
      spans.push_back(i + 1);
      in_span = 0;
    }
  }
  spans.push_back(page.size());
  const int n_spans = static_cast<int>(spans.size()) - 1;
  std::vector<absl::Status> written(static_cast<size_t>(n_spans));
  thread::ParallelFor(n_spans, n_spans > 1 ? thread::UsefulThreads(4) : 1, [&](int k) {
    store::SeriesColumns one;
    api::ColumnsEncoder::Part writer = encoder.PartAt(spans[k]);
    for (size_t i = spans[k]; i < spans[k + 1]; ++i) {
      if (absl::Status s = points_of(page[i], &one); !s.ok()) {
        written[k] = s;
        return;
      }
      writer.Write(one.steps.data(), one.values.data(), one.walls.data(), one.steps.size());
    }
  });
  for (const absl::Status& s : written) {
    if (!s.ok()) return FromStatus(s);
  }
  std::string body = encoder.Finish();
  if (body.empty()) {
    return Response::Error(500,
                           "the history's columns could not be written (a machine that is "
                           "not little-endian, or a page that changed while written)");
  }
  Response response;
  response.status = 200;
  response.content_type = "application/octet-stream";
  response.body = std::move(body);
  return response;
}

}  // namespace tae::http
