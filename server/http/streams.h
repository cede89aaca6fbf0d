#pragma once

// The dashboard's Server-Sent Events streams. Each is polled by the HTTP server about every
// 100 ms; it looks at the data version the core last published (Api::data_version, no hop to the
// core) and only when that moved asks the core about its own subject.
//
// - /api/events: `changed` {"version": N} whenever anything was stored.
// - /api/experiments/ID/events: `changed` {"experiment": ID, "version": N} when the experiment's
//   run states, attempts or stored points changed (Query::ExperimentVersion).
// - /api/runs/ID/logs/stream?after=C: `lines` with the next page of the run's log after the
//   cursor (the shape of GET /api/runs/ID/logs), as lines arrive; `end` once the run is final and
//   its last line was sent; `failed` {"error"} when the run cannot be read.

#include <cstdint>
#include <memory>
#include <string>

#include "server/http/server.h"
#include "server/query/query.h"

namespace tae::http {

class Api;

std::shared_ptr<EventSource> MakeGlobalEvents(Api* api);
std::shared_ptr<EventSource> MakeExperimentEvents(Api* api, query::Query* query,
                                                  std::string experiment);
std::shared_ptr<EventSource> MakeLogStream(Api* api, query::Query* query, int64_t run_id,
                                           int64_t after);

// One SSE event: "event: NAME\ndata: DATA\n\n" (data holds no newline: compact JSON).
std::string SseEvent(const std::string& name, const std::string& data);

}  // namespace tae::http
