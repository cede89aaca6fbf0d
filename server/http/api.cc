#include "server/http/api.h"

#include <chrono>
#include <future>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "common/version/version.h"
#include "server/http/assets.h"
#include "server/http/reply.h"
#include "server/http/streams.h"
#include "spdlog/spdlog.h"

namespace tae::http {
namespace {

constexpr auto kPublishEvery = std::chrono::milliseconds(100);
// The series the curves keep in memory between requests (server/http/series_cache.h).
constexpr int64_t kSeriesCacheBytes = 128 << 20;

}  // namespace

Api::Api(boost::asio::io_context* core, controller::Controller* controller, query::Query* query)
    : core_(core),
      controller_(controller),
      query_(query),
      series_cache_(query, kSeriesCacheBytes) {}

Api::~Api() = default;

void Api::Start() {
  boost::asio::post(*core_, [this] {
    timer_ = std::make_unique<boost::asio::steady_timer>(*core_);
    Publish();
  });
}

void Api::Publish() {
  version_.store(query_->DataVersion(), std::memory_order_release);
  timer_->expires_after(kPublishEvery);
  timer_->async_wait([this](const boost::system::error_code& error) {
    if (!error && !stopped_.load()) {
      Publish();
    }
  });
}

void Api::Stop() {
  stopped_.store(true);
  std::promise<void> done;
  boost::asio::post(*core_, [this, &done] {
    if (timer_ != nullptr) {
      timer_->cancel();
    }
    done.set_value();
  });
  done.get_future().wait();
}

void Api::OnCore(std::function<Response()> work, std::function<void(Response)> done) {
  if (stopped_.load()) {
    done(Response::Error(503, "taed is stopping"));
    return;
  }
  boost::asio::post(*core_, [work = std::move(work), done = std::move(done)] {
    Response response;
    try {
      response = work();
    } catch (const std::exception& e) {  // a JSON or conversion error is one failed request
      spdlog::warn("dashboard request failed: {}", e.what());
      response = Response::Error(500, e.what());
    }
    done(std::move(response));
  });
}

void Api::Handle(Request request, std::function<void(Response)> done) {
  if (request.method == "GET" && !absl::StartsWith(request.path, "/api/")) {
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
    return;
  }
  if (request.method == "GET") {
    Response error;
    if (std::shared_ptr<EventSource> stream = OpenStream(request, &error); stream != nullptr) {
      Response r;
      r.stream = std::move(stream);
      done(std::move(r));
      return;
    }
    if (error.status != 200) {
      done(std::move(error));
      return;
    }
    const std::vector<std::string> p = Parts(request.path);
    if (p.size() == 4 && p[1] == "runs" && p[3] == "logs.txt") {
      absl::StatusOr<int64_t> run = RunId(p[2]);
      if (!run.ok()) {
        done(FromStatus(run.status()));
        return;
      }
      RunLogText(*run, std::move(done));
      return;
    }
    if (p.size() == 5 && p[1] == "runs" && p[3] == "logs" && p[4] == "search") {
      absl::StatusOr<int64_t> run = RunId(p[2]);
      if (!run.ok()) {
        done(FromStatus(run.status()));
        return;
      }
      const std::string q = request.Param("q");
      if (q.empty()) {
        done(Response::Error(400, "q: the text to search for"));
        return;
      }
      SearchLogs(*run, q, std::move(done));
      return;
    }
    OnCore([this, request = std::move(request)] { return Get(request); }, std::move(done));
    return;
  }
  if (request.method == "POST") {
    OnCore([this, request = std::move(request)] { return Post(request); }, std::move(done));
    return;
  }
  done(Response::Error(405, absl::StrCat(request.method, ": only GET and POST")));
}

std::shared_ptr<EventSource> Api::OpenStream(const Request& request, Response* error) {
  const std::vector<std::string> p = Parts(request.path);
  if (p.size() == 2 && p[1] == "events") {
    return MakeGlobalEvents(this);
  }
  if (p.size() == 4 && p[1] == "experiments" && p[3] == "events") {
    return MakeExperimentEvents(this, query_, p[2]);
  }
  if (p.size() == 5 && p[1] == "runs" && p[3] == "logs" && p[4] == "stream") {
    absl::StatusOr<int64_t> run = RunId(p[2]);
    absl::StatusOr<int64_t> after = IntParam(request, "after", 0, 0, INT64_MAX);
    if (!run.ok() || !after.ok()) {
      *error = FromStatus(!run.ok() ? run.status() : after.status());
      return nullptr;
    }
    return MakeLogStream(this, query_, *run, *after);
  }
  return nullptr;
}

Response Api::Get(const Request& request) {
  const std::vector<std::string> p = Parts(request.path);
  if (p.size() == 2 && p[1] == "session") {
    return Ok({{"csrf", request.csrf}, {"version", version::Project()}});
  }
  if (p.size() == 2 && p[1] == "experiments") {
    return Experiments();
  }
  if (p.size() == 2 && p[1] == "fleet") {
    return Fleet();
  }
  if (p.size() >= 3 && p[1] == "experiments") {
    return Experiment(request, p);
  }
  if (p.size() >= 3 && p[1] == "runs") {
    return Run(request, p);
  }
  return Response::Error(404, absl::StrCat(request.path, ": no such endpoint"));
}

Response Api::Post(const Request& request) {
  const std::vector<std::string> p = Parts(request.path);
  nlohmann::json body = nlohmann::json::object();
  if (!request.body.empty()) {
    body = nlohmann::json::parse(request.body, nullptr, false);
    if (!body.is_object()) {
      return Response::Error(400, "body: expected a JSON object");
    }
  }
  if (p.size() == 4 && p[1] == "experiments") {
    return ExperimentAction(request, p[2], p[3]);
  }
  if (p.size() == 4 && p[1] == "runs" && p[3] == "cancel") {
    absl::StatusOr<int64_t> run = RunId(p[2]);
    if (!run.ok()) return FromStatus(run.status());
    return CancelRun(*run);
  }
  if (p.size() == 4 && p[1] == "agents" && p[3] == "drain") {
    return DrainAgent(p[2], body);
  }
  return Response::Error(404, absl::StrCat("POST ", request.path, ": no such action"));
}

}  // namespace tae::http
