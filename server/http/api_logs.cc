// A run's log: GET /api/runs/ID/logs (a page after a cursor, or the tail before one),
// /api/runs/ID/logs.txt (the whole log as a download) and /api/runs/ID/logs/search?q=TEXT (the
// cursors of matching lines). The last two run on the core a slice per turn. The live stream is
// api_events.cc's.

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/http/views.h"

namespace tae::http {
namespace {

constexpr int kMaxSearchMatches = 10000;
// Log download and search run on the core a slice at a time, other work in between: a 2-million
// line log never holds the core for more than one slice (a few ms).
constexpr int kLogSliceLines = 5000;
constexpr int kSearchSliceLines = 20000;
constexpr size_t kMaxDownloadBytes = 64 << 20;

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

Response Api::RunLogs(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> run = RunId(params.at("run"));
  if (!run.ok()) return FromStatus(run.status());
  const int64_t run_id = *run;
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

void Api::RunLogText(const Request& request, const PathParams& params,
                     std::function<void(Response)> done) {
  absl::StatusOr<int64_t> run = RunId(params.at("run"));
  if (!run.ok()) {
    done(FromStatus(run.status()));
    return;
  }
  const int64_t run_id = *run;
  auto after = std::make_shared<int64_t>(0);
  auto text = std::make_shared<std::string>();
  auto step = [this, run_id, after, text]() -> std::optional<Response> {
    absl::StatusOr<query::LogPage> page = query_->Logs(run_id, *after, kLogSliceLines);
    if (!page.ok()) {
      return FromStatus(page.status());
    }
    bool truncated = false;
    for (const model::LogRecord& line : page->lines) {
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

void Api::SearchLogs(const Request& request, const PathParams& params,
                     std::function<void(Response)> done) {
  absl::StatusOr<int64_t> run = RunId(params.at("run"));
  if (!run.ok()) {
    done(FromStatus(run.status()));
    return;
  }
  const int64_t run_id = *run;
  const std::string text = request.Param("q");
  if (text.empty()) {
    done(Response::Error(400, "q: the text to search for"));
    return;
  }
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

}  // namespace tae::http
