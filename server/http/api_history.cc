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

// What a request asks: the metric, the runs named (none: all), the run after which the page
// starts.
struct HistoryAsk {
  std::string metric;
  std::set<int64_t> only;
  int64_t after = 0;
};

absl::StatusOr<HistoryAsk> ParseAsk(const Request& request) {
  HistoryAsk ask;
  ask.metric = request.Param("metric");
  if (ask.metric.empty()) {
    return absl::InvalidArgumentError("metric: required, e.g. metric=train/loss");
  }
  const std::vector<std::string> listed =
      absl::StrSplit(request.Param("runs"), ',', absl::SkipEmpty());
  if (listed.size() > kHistoryMaxRuns) {
    return absl::InvalidArgumentError(absl::StrCat("runs: at most ", kHistoryMaxRuns, " run ids"));
  }
  for (const std::string& text : listed) {
    int64_t run = 0;
    if (!absl::SimpleAtoi(text, &run) || run <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("runs: '", text, "' is not a run id"));
    }
    ask.only.insert(run);
  }
  if (const std::string text = request.Param("after");
      !text.empty() && (!absl::SimpleAtoi(text, &ask.after) || ask.after < 0)) {
    return absl::InvalidArgumentError("after: a whole number >= 0 (a run id)");
  }
  return ask;
}

// One run of a page and its points.
struct HistoryPart {
  const query::RunView* view;
  const query::StoredSeries* series;  // null: no points
  int64_t count;
};

// The runs of the page `ask` asks for, in id order, and what the header says of the rest.
struct HistoryPage {
  std::vector<HistoryPart> parts;
  int64_t next_after = 0;  // 0: the last page
  int64_t remaining = 0;   // this page's points and every later page's
};

HistoryPage ChoosePage(const std::vector<query::RunView>& runs,
                       const std::map<int64_t, query::StoredSeries>& stored,
                       const HistoryAsk& ask) {
  HistoryPage page;
  int64_t points = 0;
  for (const query::RunView& view : runs) {
    const model::RunRecord& run = view.run;
    if (run.id <= ask.after || (!ask.only.empty() && ask.only.count(run.id) == 0)) {
      continue;
    }
    auto it = stored.find(run.id);
    const query::StoredSeries* series = it == stored.end() ? nullptr : &it->second;
    const int64_t count = series == nullptr ? 0 : series->size();
    page.remaining += count;
    if (page.next_after != 0) {
      continue;
    }
    if (points > 0 && points + count > kHistoryPagePoints) {
      page.next_after = page.parts.back().view->run.id;
      continue;
    }
    page.parts.push_back({&view, series, count});
    points += count;
  }
  return page;
}

// The header's entry of each run of the page; tokens per step by variant (the runs are brief,
// a variant's config is its first run's).
ordered_json RunEntries(const std::vector<query::RunView>& runs, const HistoryPage& page) {
  std::map<std::string, double> tokens_of;
  for (const query::RunView& view : runs) {
    if (tokens_of.count(view.run.variant) == 0) {
      absl::StatusOr<XAxis> tokens = XAxisOf("tokens", view.run);
      tokens_of[view.run.variant] = tokens.ok() ? tokens->per_step : 0.0;
    }
  }
  ordered_json entries = ordered_json::array();
  for (const HistoryPart& part : page.parts) {
    const model::RunRecord& run = part.view->run;
    entries.push_back({{"run", run.id},
                       {"count", part.count},
                       {"attempt", run.attempt},
                       {"final", model::IsFinal(run.state)},
                       {"tokens_per_step", tokens_of[run.variant]}});
  }
  return entries;
}

// One run's points into `one`; an error where they are not what was counted.
absl::Status PointsOf(const HistoryPart& part, store::SeriesColumns* one) {
  one->steps.clear();
  one->values.clear();
  one->walls.clear();
  if (part.count > 0) {
    RETURN_IF_ERROR(part.series->Columns(true, true, one));
  }
  const size_t n = one->steps.size();
  if (static_cast<int64_t>(n) != part.count || one->values.size() != n || one->walls.size() != n) {
    return absl::InternalError(absl::StrCat("r", part.view->run.id, ": ", n, " points where ",
                                            part.count, " were counted"));
  }
  return absl::OkStatus();
}

// The page's body in two passes over its runs: the first finds each column's narrowest exact
// coding (from what CheckPack learnt of a pack, else from the points), the second writes the
// body of that size (common/api/columns.h), a few spans of runs at once on a large page.
absl::StatusOr<std::string> WriteColumns(const HistoryPage& page, ordered_json header) {
  const std::vector<HistoryPart>& parts = page.parts;
  api::ColumnsEncoder encoder;
  store::SeriesColumns one;
  for (const HistoryPart& part : parts) {
    if (part.series != nullptr && !part.series->pack.empty()) {
      const store::PackInfo& info = part.series->packed;  // no unpacking to plan a pack
      encoder.PlanBounds(static_cast<size_t>(part.count), info.step_delta_bound,
                         info.wall_delta_bound, info.values_float);
      continue;
    }
    RETURN_IF_ERROR(PointsOf(part, &one));
    encoder.Plan(one.steps.data(), one.values.data(), one.walls.data(), one.steps.size());
  }
  encoder.Start(std::move(header));
  // Spans of about kHistorySpanPoints points, in order, each written by one thread.
  std::vector<size_t> spans = {0};
  for (size_t i = 0, in_span = 0; i < parts.size(); ++i) {
    in_span += static_cast<size_t>(parts[i].count);
    if (in_span >= kHistorySpanPoints && i + 1 < parts.size()) {
      spans.push_back(i + 1);
      in_span = 0;
    }
  }
  spans.push_back(parts.size());
  const int n_spans = static_cast<int>(spans.size()) - 1;
  std::vector<absl::Status> written(static_cast<size_t>(n_spans));
  thread::ParallelFor(n_spans, n_spans > 1 ? thread::UsefulThreads(4) : 1, [&](int k) {
    store::SeriesColumns points;
    api::ColumnsEncoder::Part writer = encoder.PartAt(spans[k]);
    for (size_t i = spans[k]; i < spans[k + 1]; ++i) {
      if (absl::Status s = PointsOf(parts[i], &points); !s.ok()) {
        written[k] = s;
        return;
      }
      writer.Write(points.steps.data(), points.values.data(), points.walls.data(),
                   points.steps.size());
    }
  });
  for (const absl::Status& s : written) {
    RETURN_IF_ERROR(s);
  }
  std::string body = encoder.Finish();
  if (body.empty()) {
    return absl::InternalError(
        "the history's columns could not be written (a machine that is not little-endian, or "
        "a page that changed while written)");
  }
  return body;
}

}  // namespace

Response Api::ExperimentHistory(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> id = ExperimentOf(params);
  if (!id.ok()) return FromStatus(id.status());
  absl::StatusOr<HistoryAsk> ask = ParseAsk(request);
  if (!ask.ok()) return FromStatus(ask.status());
  absl::StatusOr<std::vector<query::RunView>> runs = query_->CurveRuns(*id, ask->metric);
  if (!runs.ok()) return FromStatus(runs.status());
  absl::StatusOr<const std::map<int64_t, query::StoredSeries>*> stored =
      series_cache_.Get(*id, *runs, ask->metric);
  if (!stored.ok()) return FromStatus(stored.status());
  const HistoryPage page = ChoosePage(*runs, **stored, *ask);
  absl::StatusOr<std::string> body = WriteColumns(page, {{"experiment", *id},
                                                         {"metric", ask->metric},
                                                         {"runs", RunEntries(*runs, page)},
                                                         {"next_after", page.next_after},
                                                         {"remaining_points", page.remaining}});
  if (!body.ok()) return FromStatus(body.status());
  Response response;
  response.status = 200;
  response.content_type = "application/octet-stream";
  response.body = *std::move(body);
  return response;
}

}  // namespace tae::http
