#pragma once

// The dashboard's routes (docs/dashboard.md): the page and its embedded files, the JSON
// endpoints, Server-Sent Events streams and the actions. An adapter like the Control service:
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
#include "server/http/auth.h"
#include "server/http/series_cache.h"
#include "server/http/server.h"
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
  void Publish();
  // Dispatch (api.cc): the path picks the resource's handler; each handler file below holds one
  // resource's routes.
  Response Get(const Request& request);
  Response Post(const Request& request);
  std::shared_ptr<EventSource> OpenStream(const Request& request, Response* error);

  // api_experiments.cc: GET /api/experiments[/ID[/runs|metrics|report]]; POST
  // /api/experiments/ID/ACTION (cancel, pause, resume, retry).
  Response Experiments();
  Response Experiment(const Request& request, const std::vector<std::string>& path);
  Response ExperimentReport(const Request& request, int64_t id);
  Response ExperimentAction(const Request& request, const std::string& ref,
                            const std::string& action);
  // api_curves.cc: GET /api/experiments/ID/curves[.csv|.svg] (what: the last path part).
  Response Curves(const Request& request, int64_t id, const std::string& what);
  // api_runs.cc: GET /api/runs/ID[/series]; POST /api/runs/ID/cancel.
  Response Run(const Request& request, const std::vector<std::string>& path);
  Response RunDetail(int64_t run_id);
  Response RunSeries(const Request& request, int64_t run_id);
  Response CancelRun(int64_t run_id);
  // api_logs.cc: GET /api/runs/ID/logs; the whole log as text, and a search of it, a slice per
  // turn of the core.
  Response RunLogs(const Request& request, int64_t run_id);
  void RunLogText(int64_t run_id, std::function<void(Response)> done);
  void SearchLogs(int64_t run_id, const std::string& text, std::function<void(Response)> done);
  // api_fleet.cc: GET /api/fleet; POST /api/agents/ID/drain.
  Response Fleet();
  Response DrainAgent(const std::string& agent, const nlohmann::json& body);

  boost::asio::io_context* core_;
  controller::Controller* controller_;
  query::Query* query_;
  std::atomic<int64_t> version_{0};
  std::atomic<bool> stopped_{false};
  std::unique_ptr<boost::asio::steady_timer> timer_;  // on the core
  SeriesCache series_cache_;                          // core only
  // Curves answers by request, with the data version they were computed at (core only).
  std::map<std::string, std::pair<int64_t, Response>> curve_cache_;
  int64_t curve_cache_bytes_ = 0;  // bodies and keys of curve_cache_
};

}  // namespace tae::http
