#pragma once

// The dashboard's routes (docs/dashboard.md): the page and its embedded files, the JSON
// endpoints, Server-Sent Events streams and the actions, in one table (Routes, api_routes.cc),
// the only place a path is matched; each resource's handlers in a file of their own (api_*.cc).
// An adapter like the Control service:
// every read posts one closure to taed's core, asks server/query, converts through server/wire
// into the Control API's messages and prints them with common/api's JSON, the shapes `taectl
// --json` prints; actions go to the controller. Nothing here blocks the HTTP thread.
//
// Live updates: the core publishes its database's change counter every 100 ms (DataVersion); a
// stream whose counter moved asks the core whether its own subject (an experiment's runs and
// metrics, a run's log) changed, and sends what did.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "nlohmann/json.hpp"
#include "server/controller/controller.h"
#include "server/curves/curves.h"
#include "server/http/auth.h"
#include "server/http/routes.h"
#include "server/http/series_cache.h"
#include "server/http/server.h"
#include "server/http/views.h"
#include "server/query/query.h"

namespace tae::http {

class Api final : public Handler {
 public:
  // core: taed's core io_context, where controller and query live; both outlive the Api.
  Api(boost::asio::io_context* core, controller::Controller* controller, query::Query* query);
  ~Api() override;

  // Starts publishing the data version (on the core). Stop() before the core stops.
  void Start();
  void Stop();

  void Handle(Request request, std::function<void(Response)> done) override;

  // What GET /api/experiments/ID/curves[.csv|.svg] answers with (api_curves.cc).
  enum class CurveFormat { kJson, kCsv, kSvg };

  // The last data version the core published (any thread).
  int64_t data_version() const { return version_.load(std::memory_order_acquire); }

  // Runs `work` on the core and hands its Response to `done`.
  void OnCore(std::function<Response()> work, std::function<void(Response)> done);
  // Runs `work` on the core and `then` with its result, also on the core (SSE streams; their
  // emit callbacks hop back to the HTTP thread themselves).
  template <typename Work, typename Then>
  void OnCoreThen(Work work, Then then) {
    boost::asio::post(*core_,
                      [work = std::move(work), then = std::move(then)]() mutable { then(work()); });
  }

 private:
  // One route (the table: Routes, api_routes.cc). Exactly one handler is set: `core` runs on
  // the core (most of them), `async` answers by itself (the page's files at once; a log's
  // download and search a slice per turn of the core), `stream` opens a Server-Sent Events
  // stream on the HTTP thread.
  struct Route {
    const char* method;
    const char* pattern;  // MatchPath (routes.h)
    Response (Api::*core)(const Request&, const PathParams&) = nullptr;
    void (Api::*async)(const Request&, const PathParams&, std::function<void(Response)>) = nullptr;
    std::shared_ptr<EventSource> (Api::*stream)(const Request&, const PathParams&,
                                                Response* error) = nullptr;
  };
  static const std::vector<Route>& Routes();
  void Dispatch(const Route& route, Request request, PathParams params,
                std::function<void(Response)> done);

  void Publish();

  // api_pages.cc: the page's embedded files; GET /api/session; what no route answers.
  void Page(const Request& request, const PathParams& params, std::function<void(Response)> done);
  Response Session(const Request& request, const PathParams& params);
  Response NoSuchEndpoint(const Request& request, const PathParams& params);
  Response NoSuchAction(const Request& request, const PathParams& params);
  // api_events.cc: the Server-Sent Events streams: GET /api/events,
  // /api/experiments/ID/events, /api/runs/ID/logs/stream.
  std::shared_ptr<EventSource> AllEvents(const Request& request, const PathParams& params,
                                         Response* error);
  std::shared_ptr<EventSource> ExperimentEvents(const Request& request, const PathParams& params,
                                                Response* error);
  std::shared_ptr<EventSource> RunLogStream(const Request& request, const PathParams& params,
                                            Response* error);
  // api_experiments.cc: GET /api/experiments[/ID[/runs|metrics|report|frontier.svg|scale.svg]];
  // POST /api/experiments/ID/cancel|pause|resume|retry.
  Response Experiments(const Request& request, const PathParams& params);
  Response ExperimentDetail(const Request& request, const PathParams& params);
  Response ExperimentRuns(const Request& request, const PathParams& params);
  Response RunsAsColumns(const query::RunsPage& page);
  Response ExperimentMetrics(const Request& request, const PathParams& params);
  Response ExperimentReport(const Request& request, const PathParams& params);
  // ?format=table|md|csv|latex and the report's parameters: `taectl report --format`'s text.
  Response ExperimentReportText(const Request& request, const PathParams& params);
  // api_history.cc: ?metric=M[&runs=1,2][&after=RUN]: every point, columnar (common/api/columns.h).
  Response ExperimentHistory(const Request& request, const PathParams& params);
  // ?frontier=eval/acc>=0.99[&cost=params|flops|tokens_per_s][&view=tuned|grid][&download=1]
  Response FrontierSvg(const Request& request, const PathParams& params);
  Response ScaleSvg(const Request& request, const PathParams& params);
  // The report the request's parameters ask for (metrics, baseline, sort, view, frontier, cost).
  absl::StatusOr<query::ReportResult> ReportOf(const Request& request, const PathParams& params);
  Response CancelExperiment(const Request& request, const PathParams& params);
  Response PauseExperiment(const Request& request, const PathParams& params);
  Response ResumeExperiment(const Request& request, const PathParams& params);
  Response RetryExperiment(const Request& request, const PathParams& params);
  // The experiment params["exp"] names ("e3", "3" or its name).
  absl::StatusOr<int64_t> ExperimentOf(const PathParams& params);
  // api_curves.cc: GET /api/experiments/ID/curves[.csv|.svg].
  Response CurvesAsJson(const Request& request, const PathParams& params);
  Response CurvesAsCsv(const Request& request, const PathParams& params);
  Response CurvesAsSvg(const Request& request, const PathParams& params);
  Response Curves(const Request& request, const PathParams& params, CurveFormat format);
  absl::StatusOr<std::string> DefaultCurveMetric(const model::ExperimentRecord& exp);
  absl::StatusOr<curves::Curves> BuildCurves(const model::ExperimentRecord& exp,
                                             const CurveRequest& req);
  // api_runs.cc: GET /api/runs/ID[/series]; POST /api/runs/ID/cancel.
  Response RunDetail(const Request& request, const PathParams& params);
  Response RunSeries(const Request& request, const PathParams& params);
  Response CancelRun(const Request& request, const PathParams& params);
  // api_logs.cc: GET /api/runs/ID/logs; the whole log as text (logs.txt), and a search of it
  // (logs/search?q=), a slice per turn of the core.
  Response RunLogs(const Request& request, const PathParams& params);
  void RunLogText(const Request& request, const PathParams& params,
                  std::function<void(Response)> done);
  void SearchLogs(const Request& request, const PathParams& params,
                  std::function<void(Response)> done);
  // api_fleet.cc: GET /api/fleet; POST /api/agents/ID/drain.
  Response Fleet(const Request& request, const PathParams& params);
  Response DrainAgent(const Request& request, const PathParams& params);

  boost::asio::io_context* core_;
  controller::Controller* controller_;
  query::Query* query_;
  std::atomic<int64_t> version_{0};
  std::atomic<bool> stopped_{false};
  std::unique_ptr<boost::asio::steady_timer> timer_;  // on the core
  SeriesCache series_cache_;                          // core only
  // Answers (curves, runs pages) by request, with the data version they were computed at: one
  // asked again while nothing was stored is answered from here (core only; api.cc).
  std::map<std::string, std::pair<int64_t, Response>> answer_cache_;
  int64_t answer_cache_bytes_ = 0;  // bodies and keys of answer_cache_
  // The cached answer to `key` at data version `version`, if any; Keep stores one.
  std::optional<Response> CachedAnswer(const std::string& key, int64_t version) const;
  void KeepAnswer(const std::string& key, int64_t version, const Response& response);
};

}  // namespace tae::http
