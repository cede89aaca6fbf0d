#pragma once

// How the dashboard's handlers (api_*.cc) read a request and answer: the path's parts and ids,
// integer query parameters, a status as an HTTP error, a JSON body, a download. Pure; nothing here
// touches the core.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/http/server.h"

namespace tae::http {

// "/api/runs/12/logs" -> {"api", "runs", "12", "logs"}
std::vector<std::string> Parts(const std::string& path);
// "r12", "R12" or "12" -> 12; InvalidArgument naming the text otherwise.
absl::StatusOr<int64_t> RunId(const std::string& text);
// The query parameter `name` as an integer in [lo, hi], `fallback` when it is absent;
// InvalidArgument naming the parameter and its range otherwise.
absl::StatusOr<int64_t> IntParam(const Request& request, const std::string& name, int64_t fallback,
                                 int64_t lo, int64_t hi);

// The status's message with its HTTP code: 400 for InvalidArgument and OutOfRange, 404 NotFound,
// 409 FailedPrecondition and AlreadyExists, 503 Unavailable, 500 otherwise.
Response FromStatus(const absl::Status& status);
// A POST's body: {} when empty, else it must be a JSON object (InvalidArgument "body: ...").
absl::StatusOr<nlohmann::json> JsonBody(const Request& request);
// 200 with `body` as JSON text (Dump: invalid UTF-8 is replaced, never thrown).
Response Ok(const nlohmann::ordered_json& body);

// `name` with every character but [A-Za-z0-9._-] replaced by '_' (not starting with '.', at most
// 120 characters): safe inside a Content-Disposition header and as a file name.
std::string SafeFilename(std::string_view name);
// `response`, as an attachment named `filename` when `attachment`. `filename` passes through
// SafeFilename: a metric name may hold quotes, CR or LF.
Response Download(Response response, const std::string& filename, bool attachment);

}  // namespace tae::http
