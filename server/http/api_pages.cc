// The dashboard's page and its embedded files (assets.h), GET /api/session (the CSRF token a
// signed-in page sends back, and taed's version), and the answers for what no route names.

#include "absl/strings/str_cat.h"
#include "common/version/version.h"
#include "server/http/api.h"
#include "server/http/assets.h"
#include "server/http/reply.h"

namespace tae::http {

void Api::Page(const Request& request, const PathParams& params,
               std::function<void(Response)> done) {
  const Asset* asset = FindAsset(request.path == "/index.html" ? "/" : request.path);
  if (asset == nullptr) {
    done(Response::Error(404, absl::StrCat(request.path, ": no such page")));
    return;
  }
  Response r;
  r.content_type = std::string(asset->content_type);
  r.body = std::string(asset->body);
  r.headers.push_back(
      {"Cache-Control", asset->immutable ? "public, max-age=31536000, immutable" : "no-cache"});
  if (!asset->immutable) {
    r.headers.push_back({"Content-Security-Policy", kContentSecurityPolicy});
  }
  done(std::move(r));
}

Response Api::Session(const Request& request, const PathParams& params) {
  return Ok({{"csrf", request.csrf}, {"version", version::Project()}});
}

Response Api::NoSuchEndpoint(const Request& request, const PathParams& params) {
  return Response::Error(404, absl::StrCat(request.path, ": no such endpoint"));
}

Response Api::NoSuchAction(const Request& request, const PathParams& params) {
  return Response::Error(404, absl::StrCat("POST ", request.path, ": no such action"));
}

}  // namespace tae::http
