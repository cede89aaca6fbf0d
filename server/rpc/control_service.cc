#include "server/rpc/control_service.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "common/status/macros.h"
#include "server/rpc/convert.h"

namespace tae::rpc {
namespace {

constexpr size_t kMaxSpecBytes = 1 << 20;
constexpr int kMaxOverrides = 256;
constexpr int kDefaultLogLines = 1000;
constexpr int kMaxLogLines = 10000;

void FillRun(const store::RunRecord& record, const std::vector<store::MetricSummary>& summaries,
             tae::v1::Run* run) {
  ToProto(record, run);
  int64_t last_step = 0;
  for (const store::MetricSummary& s : summaries) {
    tae::v1::Scalar* scalar = run->add_final_metrics();
    scalar->set_key(s.key);
    scalar->set_value(s.last_value);
    last_step = std::max(last_step, s.last_step);
  }
  run->set_last_step(last_step);
}

}  // namespace

ControlService::ControlService(boost::asio::io_context* core, controller::Controller* controller,
                               blobs::BlobWorker* blobs,
                               std::function<void(bool delete_vms)> request_shutdown)
    : core_(core),
      controller_(controller),
      blobs_(blobs),
      request_shutdown_(std::move(request_shutdown)) {}

grpc::ServerUnaryReactor* ControlService::Submit(grpc::CallbackServerContext* ctx,
                                                 const tae::v1::SubmitRequest* request,
                                                 tae::v1::SubmitResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    if (request->spec_text().size() > kMaxSpecBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec_text: larger than ", kMaxSpecBytes, " bytes"));
    }
    if (request->overrides_size() > kMaxOverrides) {
      return absl::InvalidArgumentError(
          absl::StrCat("overrides: more than ", kMaxOverrides, " entries"));
    }
    controller::SubmitInput input{request->spec_text(),
                                  request->spec_path(),
                                  {request->overrides().begin(), request->overrides().end()},
                                  request->force_new(),
                                  request->snapshot_id()};
    ASSIGN_OR_RETURN(controller::SubmitResult result, controller_->Submit(input));
    ASSIGN_OR_RETURN(store::ExperimentRecord exp,
                     controller_->store()->GetExperiment(result.experiment_id));
    ToProto(exp, response->mutable_experiment());
    response->set_existing(result.existing);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::ListExperiments(
    grpc::CallbackServerContext* ctx, const tae::v1::ListExperimentsRequest* request,
    tae::v1::ListExperimentsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<store::ExperimentRecord> exps,
                     controller_->store()->ListExperiments(request->limit()));
    for (const store::ExperimentRecord& exp : exps) {
      ToProto(exp, response->add_experiments());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::GetExperiment(
    grpc::CallbackServerContext* ctx, const tae::v1::GetExperimentRequest* request,
    tae::v1::Experiment* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    ASSIGN_OR_RETURN(int64_t id, controller_->store()->ResolveExperiment(request->experiment()));
    ASSIGN_OR_RETURN(store::ExperimentRecord exp, controller_->store()->GetExperiment(id));
    ToProto(exp, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::ListRuns(grpc::CallbackServerContext* ctx,
                                                   const tae::v1::ListRunsRequest* request,
                                                   tae::v1::ListRunsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    store::Store* store = controller_->store();
    ASSIGN_OR_RETURN(int64_t id, store->ResolveExperiment(request->experiment()));
    // A constant number of statements however many runs: the runs, then all their summaries.
    ASSIGN_OR_RETURN(std::vector<store::RunRecord> runs, store->ListRuns(id));
    ASSIGN_OR_RETURN(auto summaries, store->ExperimentSummaries(id));
    static const std::vector<store::MetricSummary> kNone;
    for (const store::RunRecord& run : runs) {
      auto it = summaries.find(run.id);
      FillRun(run, it == summaries.end() ? kNone : it->second, response->add_runs());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::GetRun(grpc::CallbackServerContext* ctx,
                                                 const tae::v1::GetRunRequest* request,
                                                 tae::v1::GetRunResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    store::Store* store = controller_->store();
    ASSIGN_OR_RETURN(store::RunRecord run, store->GetRun(request->run_id()));
    ASSIGN_OR_RETURN(std::vector<store::MetricSummary> summaries, store->Summaries(run.id));
    FillRun(run, summaries, response->mutable_run());
    ASSIGN_OR_RETURN(std::vector<store::TransitionRecord> transitions,
                     store->ListTransitions(run.id));
    for (const store::TransitionRecord& t : transitions) {
      ToProto(t, response->add_transitions());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::Logs(grpc::CallbackServerContext* ctx,
                                               const tae::v1::LogsRequest* request,
                                               tae::v1::LogsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    store::Store* store = controller_->store();
    if (request->limit() < 0 || request->limit() > kMaxLogLines) {
      return absl::InvalidArgumentError(absl::StrCat("limit: must be 0..", kMaxLogLines));
    }
    ASSIGN_OR_RETURN(store::RunRecord run, store->GetRun(request->run_id()));
    int limit = request->limit() == 0 ? kDefaultLogLines : request->limit();
    ASSIGN_OR_RETURN(std::vector<store::LogRecord> lines,
                     store->Logs(run.id, request->after(), limit));
    int64_t next = request->after();
    for (const store::LogRecord& line : lines) {
      tae::v1::LogEntry* entry = response->add_lines();
      entry->set_cursor(line.cursor);
      entry->set_attempt(line.attempt);
      entry->set_stream(line.stream);
      entry->set_text(line.text);
      entry->set_wall_time(line.wall_time);
      next = line.cursor;
    }
    response->set_next(next);
    // Final only once every line has been read: a final run's lines are all stored already.
    response->set_run_finished(store::IsFinal(run.state) && static_cast<int>(lines.size()) < limit);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::Report(grpc::CallbackServerContext* ctx,
                                                 const tae::v1::ReportRequest* request,
                                                 tae::v1::ReportResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    ASSIGN_OR_RETURN(controller::ReportResult result,
                     controller_->Report(request->experiment(),
                                         {request->metrics().begin(), request->metrics().end()},
                                         request->baseline(), request->sort()));
    ToProto(result, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::SetPaused(grpc::CallbackServerContext* ctx,
                                                    const tae::v1::SetPausedRequest* request,
                                                    tae::v1::Experiment* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    if (request->experiment().empty()) {
      return absl::InvalidArgumentError("experiment: an experiment (e<ID> or name) is required");
    }
    ASSIGN_OR_RETURN(store::ExperimentRecord exp,
                     controller_->SetPaused(request->experiment(), request->paused()));
    ToProto(exp, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::Retry(grpc::CallbackServerContext* ctx,
                                                const tae::v1::RetryRequest* request,
                                                tae::v1::RetryResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    if (request->experiment().empty()) {
      return absl::InvalidArgumentError("experiment: an experiment (e<ID> or name) is required");
    }
    ASSIGN_OR_RETURN(int n, controller_->Retry(request->experiment()));
    response->set_requeued(n);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::DrainAgent(grpc::CallbackServerContext* ctx,
                                                     const tae::v1::DrainAgentRequest* request,
                                                     tae::v1::DrainAgentResponse* response) {
  return OnCore(ctx, [this, request]() -> absl::Status {
    if (request->agent_id().empty()) {
      return absl::InvalidArgumentError("agent_id: required");
    }
    return controller_->Drain(request->agent_id(), request->drain());
  });
}

grpc::ServerUnaryReactor* ControlService::ListQueue(grpc::CallbackServerContext* ctx,
                                                    const tae::v1::ListQueueRequest* request,
                                                    tae::v1::ListRunsResponse* response) {
  return OnCore(ctx, [this, response]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<store::RunRecord> queued, controller_->Queue());
    for (const store::RunRecord& run : queued) {
      ToProto(run, response->add_runs());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::QueryMetrics(grpc::CallbackServerContext* ctx,
                                                       const tae::v1::QueryMetricsRequest* request,
                                                       tae::v1::QueryMetricsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    store::Store* store = controller_->store();
    if (request->max_points() < 0) {
      return absl::InvalidArgumentError("max_points: must be >= 0 (0: every point)");
    }
    if (request->experiment().empty() == (request->run_ids_size() == 0)) {
      return absl::InvalidArgumentError("experiment or run_ids: give exactly one of the two");
    }
    std::vector<store::RunRecord> runs;
    if (!request->experiment().empty()) {
      ASSIGN_OR_RETURN(int64_t id, store->ResolveExperiment(request->experiment()));
      ASSIGN_OR_RETURN(runs, store->ListRuns(id));
    } else {
      for (int64_t run_id : request->run_ids()) {
        ASSIGN_OR_RETURN(store::RunRecord run, store->GetRun(run_id));
        runs.push_back(std::move(run));
      }
    }
    for (const store::RunRecord& run : runs) {
      std::vector<std::string> keys(request->keys().begin(), request->keys().end());
      if (keys.empty()) {
        ASSIGN_OR_RETURN(std::vector<store::MetricSummary> summaries, store->Summaries(run.id));
        for (const store::MetricSummary& summary : summaries) {
          keys.push_back(summary.key);
        }
      }
      for (const std::string& key : keys) {
        ASSIGN_OR_RETURN(std::vector<store::MetricPoint> points,
                         store->QueryMetric(run.id, key, request->max_points()));
        if (points.empty()) {
          continue;
        }
        tae::v1::MetricSeries* series = response->add_series();
        ToProto(run, series->mutable_run());
        series->set_key(key);
        for (const store::MetricPoint& p : points) {
          tae::v1::MetricPoint* out = series->add_points();
          out->set_step(p.step);
          out->set_value(p.value);
          out->set_min(p.min);
          out->set_max(p.max);
          out->set_wall_time(p.wall_time);
          out->set_count(p.count);
        }
      }
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::Cancel(grpc::CallbackServerContext* ctx,
                                                 const tae::v1::CancelRequest* request,
                                                 tae::v1::CancelResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    if (request->target().empty()) {
      return absl::InvalidArgumentError("target: an experiment or run (r<ID>) is required");
    }
    ASSIGN_OR_RETURN(int n, controller_->Cancel(request->target(), request->reason()));
    response->set_cancelled(n);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::ListAgents(grpc::CallbackServerContext* ctx,
                                                     const tae::v1::ListAgentsRequest* request,
                                                     tae::v1::ListAgentsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    for (const auto& [id, agent] : controller_->registry().agents()) {
      ToProto(agent, response->add_agents());
    }
    if (request->provider_events()) {
      for (const provider::ProviderEvent& event : controller_->provider_log()->events()) {
        tae::v1::ProviderEvent* out = response->add_provider_events();
        out->set_time(event.time);
        out->set_provider(event.provider);
        out->set_subject(event.subject);
        out->set_event(event.event);
        out->set_detail(event.detail);
      }
      for (const provider::CloudVm& vm : controller_->provider_log()->vms()) {
        ToProto(vm, response->add_vms());
      }
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::Shutdown(grpc::CallbackServerContext* ctx,
                                                   const tae::v1::ShutdownRequest* request,
                                                   tae::v1::ShutdownResponse* response) {
  response->set_pid(getpid());
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    for (const provider::CloudVm& vm : controller_->provider_log()->vms()) {
      ToProto(vm, response->add_vms());
    }
    request_shutdown_(request->delete_vms());
    return absl::OkStatus();
  });
}

}  // namespace tae::rpc
