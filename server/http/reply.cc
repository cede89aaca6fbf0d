#include "server/http/reply.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/http/views.h"

namespace tae::http {
namespace {

int HttpStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

}  // namespace

std::vector<std::string> Parts(const std::string& path) {
  return absl::StrSplit(path, '/', absl::SkipEmpty());
}

absl::StatusOr<int64_t> RunId(const std::string& text) {
  absl::string_view digits = text;
  if (!digits.empty() && (digits[0] == 'r' || digits[0] == 'R')) {
    digits.remove_prefix(1);
  }
  int64_t id = 0;
  if (!absl::SimpleAtoi(digits, &id) || id <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("run: '", text, "' is not a run id (r12)"));
  }
  return id;
}

absl::StatusOr<nlohmann::json> JsonBody(const Request& request) {
  if (request.body.empty()) {
    return nlohmann::json::object();
  }
  nlohmann::json body = nlohmann::json::parse(request.body, nullptr, false);
  if (!body.is_object()) {
    return absl::InvalidArgumentError("body: expected a JSON object");
  }
  return body;
}

absl::StatusOr<int64_t> IntParam(const Request& request, const std::string& name, int64_t fallback,
                                 int64_t lo, int64_t hi) {
  const std::string text = request.Param(name);
  if (text.empty()) {
    return fallback;
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": an integer in ", lo, "..", hi));
  }
  return value;
}

Response FromStatus(const absl::Status& status) {
  return Response::Error(HttpStatus(status), std::string(status.message()));
}

Response Ok(const nlohmann::ordered_json& body) { return Response::Json(200, Dump(body)); }

std::string SafeFilename(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_';
    out.push_back(safe ? c : '_');
  }
  if (out.empty() || out[0] == '.') {
    out.insert(out.begin(), '_');
  }
  return out.substr(0, 120);
}

Response Download(Response response, const std::string& filename, bool attachment) {
  if (attachment) {
    response.headers.push_back({"Content-Disposition", absl::StrCat("attachment; filename=\"",
                                                                    SafeFilename(filename), "\"")});
  }
  return response;
}

}  // namespace tae::http
