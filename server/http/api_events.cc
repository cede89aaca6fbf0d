// The dashboard's Server-Sent Events streams (streams.h makes them): GET /api/events (what
// changed anywhere), /api/experiments/ID/events (an experiment's runs and metrics) and
// /api/runs/ID/logs/stream?after=CURSOR (a run's new log lines).

#include <cstdint>

#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/http/streams.h"

namespace tae::http {

std::shared_ptr<EventSource> Api::AllEvents(const Request& request, const PathParams& params,
                                            Response* error) {
  return MakeGlobalEvents(this);
}

std::shared_ptr<EventSource> Api::ExperimentEvents(const Request& request, const PathParams& params,
                                                   Response* error) {
  return MakeExperimentEvents(this, query_, params.at("exp"));
}

std::shared_ptr<EventSource> Api::RunLogStream(const Request& request, const PathParams& params,
                                               Response* error) {
  absl::StatusOr<int64_t> run = RunId(params.at("run"));
  absl::StatusOr<int64_t> after = IntParam(request, "after", 0, 0, INT64_MAX);
  if (!run.ok() || !after.ok()) {
    *error = FromStatus(!run.ok() ? run.status() : after.status());
    return nullptr;
  }
  return MakeLogStream(this, query_, *run, *after);
}

}  // namespace tae::http
