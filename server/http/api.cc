#include "server/http/api.h"

#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "boost/asio/post.hpp"
#include "common/api/head_grid.h"
#include "common/api/json.h"
#include "common/host/host.h"
#include "common/metrics/names.h"
#include "common/spec/spec.h"
#include "server/http/assets.h"
#include "server/http/streams.h"
#include "server/http/views.h"
#include "server/report/report.h"
#include "server/wire/wire.h"
#include "spdlog/spdlog.h"

namespace tae::http {
namespace {

using nlohmann::ordered_json;

constexpr auto kPublishEvery = std::chrono::milliseconds(100);
constexpr size_t kCurveCacheEntries = 64;
// The curve answers kept between requests, in bytes of body; an answer larger than a quarter of
// it is not kept.
constexpr int64_t kCurveCacheBytes = 32 << 20;
// The series the curves keep in memory between requests (server/http/series_cache.h).
constexpr int64_t kSeriesCacheBytes = 128 << 20;
constexpr int kMaxSearchMatches = 10000;
// Log download and search run on the core a slice at a time, other work in between: a 2-million
// line log never holds the core for more than one slice (a few ms).
constexpr int kLogSliceLines = 5000;
constexpr int kSearchSliceLines = 20000;
constexpr size_t kMaxDownloadBytes = 64 << 20;

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

Response FromStatus(const absl::Status& status) {
  return Response::Error(HttpStatus(status), std::string(status.message()));
}

Response Ok(const ordered_json& body) { return Response::Json(200, Dump(body)); }

// "/api/runs/12/logs" -> {"api", "runs", "12", "logs"}
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

}  // namespace

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

namespace {

// `filename` passes through SafeFilename: a metric name may hold quotes, CR or LF.
Response Download(Response response, const std::string& filename, bool attachment) {
  if (attachment) {
    response.headers.push_back({"Content-Disposition", absl::StrCat("attachment; filename=\"",
                                                                    SafeFilename(filename), "\"")});
  }
  return response;
}

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
    return Ok({{"csrf", request.csrf}, {"version", host::Version()}});
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

Response Api::Experiments() {
  absl::StatusOr<std::vector<store::ExperimentRecord>> exps = query_->ListExperiments(0);
  if (!exps.ok()) return FromStatus(exps.status());
  ordered_json list = ordered_json::array();
  for (const store::ExperimentRecord& exp : *exps) {
    tae::v1::Experiment proto;
    wire::ToProto(exp, &proto);
    list.push_back(api::ExperimentJson(proto));
  }
  return Ok({{"experiments", list}});
}

Response Api::Fleet() {
  tae::v1::ListAgentsResponse agents;
  for (const auto& [id, agent] : controller_->registry().agents()) {
    wire::ToProto(agent, agents.add_agents());
  }
  for (const provider::ProviderEvent& event : controller_->provider_log()->events()) {
    wire::ToProto(event, agents.add_provider_events());
  }
  for (const provider::CloudVm& vm : controller_->provider_log()->vms()) {
    wire::ToProto(vm, agents.add_vms());
  }
  ordered_json out = api::FleetJson(agents);
  absl::StatusOr<std::vector<store::RunRecord>> queue = query_->Queue();
  if (!queue.ok()) return FromStatus(queue.status());
  ordered_json queued = ordered_json::array();
  for (const store::RunRecord& run : *queue) {
    tae::v1::Run proto;
    wire::ToProto(run, &proto);
    queued.push_back(api::RunJson(proto));
  }
  out["queue"] = queued;
  return Ok(out);
}

Response Api::Experiment(const Request& request, const std::vector<std::string>& p) {
  absl::StatusOr<int64_t> id = query_->ResolveExperiment(p[2]);
  if (!id.ok()) return FromStatus(id.status());
  const std::string what = p.size() == 3 ? "" : p[3];
  if (p.size() > 4) {
    return Response::Error(404, absl::StrCat(request.path, ": no such endpoint"));
  }
  if (what.empty()) {
    absl::StatusOr<store::ExperimentRecord> exp = query_->GetExperiment(*id);
    if (!exp.ok()) return FromStatus(exp.status());
    tae::v1::Experiment proto;
    wire::ToProto(*exp, &proto);
    absl::StatusOr<std::optional<report::SearchSavings>> savings = query_->SearchSavings(*exp);
    if (!savings.ok()) return FromStatus(savings.status());
    if (*savings) {
      wire::ToProto(**savings, proto.mutable_search_savings());
    }
    return Ok(api::ExperimentJson(proto));
  }
  if (what == "report") {
    return ExperimentReport(request, *id);
  }
  if (what == "runs") {
    absl::StatusOr<std::vector<query::RunView>> runs = query_->ListRuns(absl::StrCat(*id));
    if (!runs.ok()) return FromStatus(runs.status());
    ordered_json list = ordered_json::array();
    for (const query::RunView& run : *runs) {
      tae::v1::Run proto;
      wire::ToProto(run, &proto);
      list.push_back(api::RunJson(proto));
    }
    return Ok({{"runs", list}});
  }
  if (what == "metrics") {
    absl::StatusOr<std::vector<std::string>> names = query_->MetricNames(*id);
    if (!names.ok()) return FromStatus(names.status());
    absl::StatusOr<store::ExperimentRecord> exp = query_->GetExperiment(*id);
    if (!exp.ok()) return FromStatus(exp.status());
    std::vector<std::string> defaults = exp->report.metrics;
    if (defaults.empty()) {
      defaults = metrics::DefaultMetrics(*names);
    }
    return Ok({{"metrics", *names}, {"default", defaults}});
  }
  if (what == "curves" || what == "curves.csv" || what == "curves.svg") {
    return Curves(request, *id, what);
  }
  return Response::Error(404, absl::StrCat(request.path, ": no such endpoint"));
}

Response Api::ExperimentReport(const Request& request, int64_t id) {
  std::vector<std::string> metrics =
      absl::StrSplit(request.Param("metrics"), ',', absl::SkipEmpty());
  absl::StatusOr<query::ReportResult> report =
      query_->Report(absl::StrCat(id), metrics, request.Param("baseline"), request.Param("sort"),
                     request.Param("view"));
  if (!report.ok()) return FromStatus(report.status());
  tae::v1::ReportResponse proto;
  wire::ToProto(*report, &proto);
  ordered_json out = api::ReportJson(proto);
  ordered_json goal = ordered_json::object();
  for (const std::string& metric : report->metrics) {
    goal[metric] = report::HigherIsBetter(metric, report->experiment.report.goal) ? "max" : "min";
  }
  out["goal"] = goal;
  absl::StatusOr<std::vector<query::RunView>> runs = query_->ListRuns(absl::StrCat(id));
  if (!runs.ok()) return FromStatus(runs.status());
  out["varying"] = VaryingKeys(*runs);
  return Ok(out);
}

Response Api::Run(const Request& request, const std::vector<std::string>& p) {
  absl::StatusOr<int64_t> run_id = RunId(p[2]);
  if (!run_id.ok()) return FromStatus(run_id.status());
  const std::string what = p.size() == 3 ? "" : absl::StrJoin(p.begin() + 3, p.end(), "/");
  if (what.empty()) {
    return RunDetail(*run_id);
  }
  if (what == "series") {
    const std::string metric = request.Param("metric");
    if (metric.empty()) {
      return Response::Error(400, "metric: required, e.g. metric=train/loss");
    }
    absl::StatusOr<int64_t> width = IntParam(request, "width", 600, 50, 8000);
    if (!width.ok()) return FromStatus(width.status());
    absl::StatusOr<std::vector<store::MetricPoint>> points =
        query_->QueryMetric(*run_id, metric, *width * 2);
    if (!points.ok()) return FromStatus(points.status());
    ordered_json x = ordered_json::array(), value = ordered_json::array(),
                 min = ordered_json::array(), max = ordered_json::array();
    for (const store::MetricPoint& point : *points) {
      x.push_back(point.step);
      value.push_back(std::isfinite(point.value) ? ordered_json(point.value) : ordered_json());
      min.push_back(std::isfinite(point.min) ? ordered_json(point.min) : ordered_json());
      max.push_back(std::isfinite(point.max) ? ordered_json(point.max) : ordered_json());
    }
    return Ok({{"run", *run_id},
               {"metric", metric},
               {"x", x},
               {"value", value},
               {"min", min},
               {"max", max}});
  }
  if (what == "logs") {
    return RunLogs(request, *run_id);
  }
  return Response::Error(404, absl::StrCat(request.path, ": no such endpoint"));
}

Response Api::RunDetail(int64_t run_id) {
  absl::StatusOr<query::RunDetail> detail = query_->GetRun(run_id);
  if (!detail.ok()) return FromStatus(detail.status());
  tae::v1::GetRunResponse proto;
  wire::ToProto(*detail, &proto);
  ordered_json out = api::RunJson(proto.run());
  ordered_json transitions = ordered_json::array();
  for (const store::TransitionRecord& t : detail->transitions) {
    transitions.push_back({{"attempt", t.attempt},
                           {"from", t.from_state},
                           {"to", t.to_state},
                           {"reason", t.reason},
                           {"at", t.at}});
  }
  out["transitions"] = transitions;
  ordered_json summaries = ordered_json::array();
  for (const store::MetricSummary& s : detail->view.summaries) {
    summaries.push_back({{"key", s.key},
                         {"last_step", s.last_step},
                         {"last", s.last_value},
                         {"min", s.min_value},
                         {"max", s.max_value},
                         {"count", s.count}});
  }
  out["summaries"] = summaries;
  absl::StatusOr<api::HeadGrid> grid = api::BuildHeadGrid(proto.run());
  out["heads"] = grid.ok() ? api::HeadGridJson(run_id, *grid) : ordered_json();
  return Ok(out);
}

Response Api::RunLogs(const Request& request, int64_t run_id) {
  absl::StatusOr<int64_t> after = IntParam(request, "after", 0, 0, INT64_MAX);
  if (!after.ok()) return FromStatus(after.status());
  absl::StatusOr<int64_t> limit = IntParam(request, "limit", 1000, 1, query::Query::kMaxLogLines);
  if (!limit.ok()) return FromStatus(limit.status());
  absl::StatusOr<int64_t> tail = IntParam(request, "tail", 0, 0, query::Query::kMaxLogLines);
  if (!tail.ok()) return FromStatus(tail.status());
  absl::StatusOr<int64_t> before = IntParam(request, "before", 0, 0, INT64_MAX);
  if (!before.ok()) return FromStatus(before.status());
  if ((*tail > 0 || *before > 0) && !request.Param("after").empty()) {
    return Response::Error(400, "after: not with tail or before (one direction at a time)");
  }
  absl::StatusOr<query::LogPage> page =
      *tail > 0 || *before > 0
          ? query_->LogsBefore(run_id, *before, static_cast<int>(*tail > 0 ? *tail : *limit))
          : query_->Logs(run_id, *after, static_cast<int>(*limit));
  if (!page.ok()) return FromStatus(page.status());
  return Ok(LogPageJson(*page));
}

namespace {

// Work done on the core one slice per turn, other work in between: `step` runs until it returns
// the answer, which goes to `done` (a stopping taed answers 503 instead).
struct Slices {
  boost::asio::io_context* core;
  const std::atomic<bool>* stopped;
  std::function<std::optional<Response>()> step;
  std::function<void(Response)> done;
};

void NextSlice(std::shared_ptr<Slices> slices) {
  boost::asio::io_context* core = slices->core;
  boost::asio::post(*core, [slices = std::move(slices)]() mutable {
    if (slices->stopped->load()) {
      slices->done(Response::Error(503, "taed is stopping"));
      return;
    }
    if (std::optional<Response> answer = slices->step()) {
      slices->done(*std::move(answer));
      return;
    }
    NextSlice(std::move(slices));
  });
}

}  // namespace

void Api::RunLogText(int64_t run_id, std::function<void(Response)> done) {
  auto after = std::make_shared<int64_t>(0);
  auto text = std::make_shared<std::string>();
  auto step = [this, run_id, after, text]() -> std::optional<Response> {
    absl::StatusOr<query::LogPage> page = query_->Logs(run_id, *after, kLogSliceLines);
    if (!page.ok()) {
      return FromStatus(page.status());
    }
    bool truncated = false;
    for (const store::LogRecord& line : page->lines) {
      if (text->size() + line.text.size() + 10 > kMaxDownloadBytes) {
        truncated = true;
        break;
      }
      absl::StrAppend(text.get(), line.stream == "stderr" ? "[stderr] " : "", line.text, "\n");
    }
    const bool end = truncated || page->lines.empty() || page->next == *after;
    *after = page->next;
    if (!end) {
      return std::nullopt;
    }
    if (truncated) {
      absl::StrAppend(text.get(), "[taed: the download stops at ", kMaxDownloadBytes >> 20,
                      " MiB; `taectl logs r", run_id, "` prints the whole log]\n");
    }
    Response r;
    r.content_type = "text/plain; charset=utf-8";
    r.body = std::move(*text);
    return Download(std::move(r), absl::StrCat("r", run_id, ".log"), true);
  };
  NextSlice(std::make_shared<Slices>(Slices{core_, &stopped_, std::move(step), std::move(done)}));
}

void Api::SearchLogs(int64_t run_id, const std::string& text, std::function<void(Response)> done) {
  auto after = std::make_shared<int64_t>(0);
  auto matches = std::make_shared<std::vector<int64_t>>();
  auto step = [this, run_id, text, after, matches]() -> std::optional<Response> {
    absl::StatusOr<query::Query::SearchSlice> found =
        query_->SearchLogsSlice(run_id, text, *after, kSearchSliceLines);
    if (!found.ok()) {
      return FromStatus(found.status());
    }
    matches->insert(matches->end(), found->matches.begin(), found->matches.end());
    *after = found->last;
    const bool truncated = static_cast<int>(matches->size()) > kMaxSearchMatches;
    if (!found->end && !truncated) {
      return std::nullopt;
    }
    if (truncated) {
      matches->resize(kMaxSearchMatches);
    }
    return Ok({{"matches", *matches}, {"truncated", truncated}});
  };
  NextSlice(std::make_shared<Slices>(Slices{core_, &stopped_, std::move(step), std::move(done)}));
}

Response Api::Curves(const Request& request, int64_t id, const std::string& what) {
  absl::StatusOr<CurveRequest> parsed = ParseCurveRequest(request);
  if (!parsed.ok()) return FromStatus(parsed.status());
  CurveRequest req = *std::move(parsed);
  absl::StatusOr<store::ExperimentRecord> exp = query_->GetExperiment(id);
  if (!exp.ok()) return FromStatus(exp.status());
  if (req.metric.empty()) {
    std::vector<std::string> defaults = exp->report.metrics;
    if (defaults.empty()) {
      absl::StatusOr<std::vector<std::string>> names = query_->MetricNames(id);
      if (!names.ok()) return FromStatus(names.status());
      defaults = metrics::DefaultMetrics(*names);
    }
    if (defaults.empty()) {
      return Response::Error(404, absl::StrCat("e", id, " has no metrics yet"));
    }
    req.metric = defaults.front();
  }
  const std::string key = absl::StrCat(what, "|", req.Key(id));
  const int64_t version = query_->DataVersion();
  if (auto it = curve_cache_.find(key); it != curve_cache_.end() && it->second.first == version) {
    return it->second.second;
  }
  absl::StatusOr<std::vector<query::RunView>> runs = query_->ListRuns(absl::StrCat(id));
  if (!runs.ok()) return FromStatus(runs.status());
  // From memory where nothing changed; new steps only where runs moved
  // (server/http/series_cache.h).
  absl::StatusOr<const std::map<int64_t, std::vector<store::MetricPoint>>*> points =
      series_cache_.Get(id, *runs, req.metric);
  if (!points.ok()) return FromStatus(points.status());
  std::vector<std::string> variants = req.variants;
  std::set<std::string> wanted(variants.begin(), variants.end());
  if (req.delta) {
    for (const std::string& v : req.variants) {
      wanted.insert(spec::BaselineFor(v, req.baseline));
    }
  }
  std::vector<std::string> order;
  for (const std::string& v : exp->variants) {
    if (wanted.empty() || wanted.count(v) > 0) {
      order.push_back(v);
    }
  }
  std::vector<curves::RunSeries> series;
  for (const query::RunView& view : *runs) {
    if (!wanted.empty() && wanted.count(view.run.variant) == 0) {
      continue;
    }
    auto it = (*points)->find(view.run.id);
    curves::RunSeries s{view.run.id, view.run.variant, {}, {}};
    if (it != (*points)->end()) {
      absl::StatusOr<std::vector<double>> x = XValues(req.x, view.run, it->second);
      if (!x.ok()) return FromStatus(x.status());
      s.x = *std::move(x);
      s.y.reserve(it->second.size());
      for (const store::MetricPoint& point : it->second) {
        s.y.push_back(point.value);
      }
    }
    series.push_back(std::move(s));
  }
  curves::Curves built =
      curves::Build(series, order, {req.width * 2, req.smooth, req.x_min, req.x_max});
  if (req.delta) {
    curves::ToDelta(&built,
                    [&](const std::string& v) { return spec::BaselineFor(v, req.baseline); });
    if (!req.variants.empty()) {
      std::set<std::string> asked(req.variants.begin(), req.variants.end());
      std::vector<curves::Band> kept;
      for (curves::Band& band : built.bands) {
        if (asked.count(band.variant) > 0) {
          kept.push_back(std::move(band));
        }
      }
      built.bands = std::move(kept);
    }
  }
  const std::string goal = report::HigherIsBetter(req.metric, exp->report.goal) ? "max" : "min";
  Response response;
  const bool download = request.Param("download") == "1";
  const std::string stem =
      absl::StrCat("e", id, "-", absl::StrReplaceAll(req.metric, {{"/", "_"}}));
  if (what == "curves.csv") {
    response.content_type = "text/csv; charset=utf-8";
    response.body = CurvesCsv(req, built);
    response = Download(std::move(response), stem + ".csv", true);
  } else if (what == "curves.svg") {
    response.content_type = "image/svg+xml";
    response.body =
        CurvesSvg(absl::StrCat(exp->name, ": ", req.metric,
                               req.smooth > 0 ? absl::StrCat(" (EMA ", req.smooth, ")") : "",
                               ", mean ± 95% CI over seeds"),
                  req, built);
    response = Download(std::move(response), stem + ".svg", download);
  } else {
    response = Response::Json(200, CurvesJson(id, req, goal, built));
    response = Download(std::move(response), stem + ".json", download);
  }
  const int64_t size = static_cast<int64_t>(response.body.size() + key.size());
  if (size <= kCurveCacheBytes / 4) {
    if (curve_cache_.size() >= kCurveCacheEntries || curve_cache_bytes_ + size > kCurveCacheBytes) {
      curve_cache_.clear();
      curve_cache_bytes_ = 0;
    }
    if (auto old = curve_cache_.find(key); old != curve_cache_.end()) {
      curve_cache_bytes_ -= static_cast<int64_t>(old->second.second.body.size() + key.size());
    }
    curve_cache_[key] = {version, response};
    curve_cache_bytes_ += size;
  }
  return response;
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
    const std::string& ref = p[2];
    const std::string& action = p[3];
    if (action == "cancel") {
      absl::StatusOr<int> n = controller_->Cancel(ref, "cancelled from the dashboard");
      if (!n.ok()) return FromStatus(n.status());
      return Ok({{"ok", true}, {"cancelled", *n}});
    }
    if (action == "pause" || action == "resume") {
      absl::StatusOr<int64_t> id = controller_->SetPaused(ref, action == "pause");
      if (!id.ok()) return FromStatus(id.status());
      return Ok({{"ok", true}, {"experiment", *id}, {"paused", action == "pause"}});
    }
    if (action == "retry") {
      absl::StatusOr<int> n = controller_->Retry(ref);
      if (!n.ok()) return FromStatus(n.status());
      return Ok({{"ok", true}, {"requeued", *n}});
    }
  }
  if (p.size() == 4 && p[1] == "runs" && p[3] == "cancel") {
    absl::StatusOr<int64_t> run = RunId(p[2]);
    if (!run.ok()) return FromStatus(run.status());
    absl::StatusOr<int> n =
        controller_->Cancel(absl::StrCat("r", *run), "cancelled from the dashboard");
    if (!n.ok()) return FromStatus(n.status());
    return Ok({{"ok", true}, {"cancelled", *n}});
  }
  if (p.size() == 4 && p[1] == "agents" && p[3] == "drain") {
    const bool drain = !body.contains("drain") || body["drain"] == true;
    if (body.contains("drain") && !body["drain"].is_boolean()) {
      return Response::Error(400, "drain: true or false");
    }
    absl::Status s = controller_->Drain(p[2], drain);
    if (!s.ok()) return FromStatus(s);
    return Ok({{"ok", true}, {"agent", p[2]}, {"drain", drain}});
  }
  return Response::Error(404, absl::StrCat("POST ", request.path, ": no such action"));
}

}  // namespace tae::http
