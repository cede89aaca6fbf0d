#include "server/http/api.h"

#include <chrono>
#include <future>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "server/http/reply.h"
#include "spdlog/spdlog.h"

namespace tae::http {
namespace {

constexpr size_t kAnswerCacheEntries = 64;
// The answers (curves, runs pages) kept between requests, in bytes of body and key; an answer
// larger than a quarter of it is not kept.
constexpr int64_t kAnswerCacheBytes = 32 << 20;
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
  for (const Route& route : Routes()) {
    if (request.method != route.method) {
      continue;
    }
    if (std::optional<PathParams> params = MatchPath(route.pattern, request.path)) {
      Dispatch(route, std::move(request), *std::move(params), std::move(done));
      return;
    }
  }
  done(Response::Error(405, absl::StrCat(request.method, ": only GET and POST")));
}

void Api::Dispatch(const Route& route, Request request, PathParams params,
                   std::function<void(Response)> done) {
  if (request.method == "POST") {
    if (absl::StatusOr<nlohmann::json> body = JsonBody(request); !body.ok()) {
      done(FromStatus(body.status()));
      return;
    }
  }
  if (route.stream != nullptr) {
    Response error;
    std::shared_ptr<EventSource> stream = (this->*route.stream)(request, params, &error);
    if (stream == nullptr) {
      done(std::move(error));
      return;
    }
    Response r;
    r.stream = std::move(stream);
    done(std::move(r));
    return;
  }
  if (route.async != nullptr) {
    (this->*route.async)(request, params, std::move(done));
    return;
  }
  OnCore([this, handler = route.core, request = std::move(request),
          params = std::move(params)] { return (this->*handler)(request, params); },
         std::move(done));
}

std::optional<Response> Api::CachedAnswer(const std::string& key, int64_t version) const {
  auto it = answer_cache_.find(key);
  if (it == answer_cache_.end() || it->second.first != version) {
    return std::nullopt;
  }
  return it->second.second;
}

void Api::KeepAnswer(const std::string& key, int64_t version, const Response& response) {
  const int64_t size = static_cast<int64_t>(response.body.size() + key.size());
  if (size > kAnswerCacheBytes / 4) {
    return;
  }
  if (answer_cache_.size() >= kAnswerCacheEntries ||
      answer_cache_bytes_ + size > kAnswerCacheBytes) {
    answer_cache_.clear();
    answer_cache_bytes_ = 0;
  }
  if (auto old = answer_cache_.find(key); old != answer_cache_.end()) {
    answer_cache_bytes_ -= static_cast<int64_t>(old->second.second.body.size() + key.size());
  }
  answer_cache_[key] = {version, response};
  answer_cache_bytes_ += size;
}

}  // namespace tae::http
