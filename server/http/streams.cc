#include "server/http/streams.h"

#include "absl/strings/str_cat.h"
#include "server/http/api.h"
#include "server/http/views.h"

namespace tae::http {
namespace {

class GlobalEvents final : public EventSource {
 public:
  explicit GlobalEvents(Api* api) : api_(api), seen_(api->data_version()) {}
  void Poll(std::function<void(std::optional<std::string>)> emit) override {
    const int64_t version = api_->data_version();
    if (version == seen_) {
      emit(std::string());
      return;
    }
    seen_ = version;
    emit(SseEvent("changed", Dump({{"version", version}})));
  }

 private:
  Api* api_;
  int64_t seen_;
};

// Asks the core only when the data version moved; at most one question in flight.
class ExperimentEvents final : public EventSource,
                               public std::enable_shared_from_this<ExperimentEvents> {
 public:
  ExperimentEvents(Api* api, query::Query* query, std::string experiment)
      : api_(api), query_(query), experiment_(std::move(experiment)) {}

  void Poll(std::function<void(std::optional<std::string>)> emit) override {
    const int64_t version = api_->data_version();
    if (version == seen_) {
      emit(std::string());
      return;
    }
    auto self = shared_from_this();
    api_->OnCoreThen(
        [self]() -> std::optional<std::pair<int64_t, std::string>> {
          absl::StatusOr<int64_t> id = self->query_->ResolveExperiment(self->experiment_);
          if (!id.ok()) {
            return std::nullopt;
          }
          absl::StatusOr<std::string> mine = self->query_->ExperimentVersion(*id);
          return std::make_pair(*id, mine.ok() ? *mine : std::string());
        },
        [self, version,
         emit = std::move(emit)](std::optional<std::pair<int64_t, std::string>> answer) {
          if (!answer.has_value()) {
            emit(std::nullopt);  // the experiment is gone (or never was)
            return;
          }
          self->seen_ = version;
          const auto& [id, mine] = *answer;
          if (mine.empty() || mine == self->mine_) {
            emit(std::string());
            return;
          }
          const bool first = self->mine_.empty();
          self->mine_ = mine;
          // The first answer is what the page loaded with: nothing to say yet.
          emit(first ? std::string()
                     : SseEvent("changed", Dump({{"experiment", id}, {"version", version}})));
        });
  }

 private:
  Api* api_;
  query::Query* query_;
  std::string experiment_;
  int64_t seen_ = -1;  // data version last looked at (HTTP thread)
  std::string mine_;   // the experiment's version then
};

class LogStream final : public EventSource, public std::enable_shared_from_this<LogStream> {
 public:
  LogStream(Api* api, query::Query* query, int64_t run_id, int64_t after)
      : api_(api), query_(query), run_id_(run_id), after_(after) {}

  void Poll(std::function<void(std::optional<std::string>)> emit) override {
    if (ended_) {
      emit(std::nullopt);
      return;
    }
    const int64_t version = api_->data_version();
    if (version == seen_) {
      emit(std::string());
      return;
    }
    auto self = shared_from_this();
    const int64_t after = after_;
    api_->OnCoreThen(
        [self, after]() -> absl::StatusOr<query::LogPage> {
          return self->query_->Logs(self->run_id_, after, query::Query::kMaxLogLines);
        },
        [self, version, emit = std::move(emit)](absl::StatusOr<query::LogPage> page) {
          if (!page.ok()) {
            self->ended_ = true;
            emit(SseEvent("failed", Dump({{"error", std::string(page.status().message())}})));
            return;
          }
          self->seen_ = version;
          std::string out;
          if (!page->lines.empty()) {
            self->after_ = page->next;
            self->seen_ = -1;  // a full page may have more behind it: look again next poll
            out = SseEvent("lines", Dump(LogPageJson(*page)));
          }
          if (page->run_finished) {
            absl::StrAppend(&out, SseEvent("end", Dump({{"next", page->next}})));
            self->ended_ = true;
          }
          emit(std::move(out));
        });
  }

 private:
  Api* api_;
  query::Query* query_;
  int64_t run_id_;
  int64_t after_;
  int64_t seen_ = -1;
  bool ended_ = false;
};

}  // namespace

std::string SseEvent(const std::string& name, const std::string& data) {
  return absl::StrCat("event: ", name, "\ndata: ", data, "\n\n");
}

std::shared_ptr<EventSource> MakeGlobalEvents(Api* api) {
  return std::make_shared<GlobalEvents>(api);
}

std::shared_ptr<EventSource> MakeExperimentEvents(Api* api, query::Query* query,
                                                  std::string experiment) {
  return std::make_shared<ExperimentEvents>(api, query, std::move(experiment));
}

std::shared_ptr<EventSource> MakeLogStream(Api* api, query::Query* query, int64_t run_id,
                                           int64_t after) {
  return std::make_shared<LogStream>(api, query, run_id, after);
}

}  // namespace tae::http
