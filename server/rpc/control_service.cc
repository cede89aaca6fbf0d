#include "server/rpc/control_service.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "common/status/macros.h"
#include "server/rpc/convert.h"
#include "server/wire/wire.h"

namespace tae::rpc {
namespace {

constexpr size_t kMaxSpecBytes = 1 << 20;
constexpr int kMaxOverrides = 256;
constexpr int kDefaultLogLines = 1000;

}  // namespace

ControlService::ControlService(boost::asio::io_context* core, controller::Controller* controller,
                               query::Query* query, blobs::BlobWorker* blobs,
                               blobs::BlobWorker* checkpoint_blobs,
                               std::function<void(bool delete_vms)> request_shutdown)
    : core_(core),
      controller_(controller),
      query_(query),
      blobs_(blobs),
      checkpoint_blobs_(checkpoint_blobs),
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
    ASSIGN_OR_RETURN(model::ExperimentRecord exp, query_->GetExperiment(result.experiment_id));
    wire::ToProto(exp, response->mutable_experiment());
    response->set_existing(result.existing);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::ListExperiments(
    grpc::CallbackServerContext* ctx, const tae::v1::ListExperimentsRequest* request,
    tae::v1::ListExperimentsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<model::ExperimentRecord> exps,
                     query_->ListExperiments(request->limit()));
    for (const model::ExperimentRecord& exp : exps) {
      wire::ToProto(exp, response->add_experiments());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::GetExperiment(
    grpc::CallbackServerContext* ctx, const tae::v1::GetExperimentRequest* request,
    tae::v1::Experiment* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    ASSIGN_OR_RETURN(int64_t id, query_->ResolveExperiment(request->experiment()));
    ASSIGN_OR_RETURN(model::ExperimentRecord exp, query_->GetExperiment(id));
    wire::ToProto(exp, response);
    ASSIGN_OR_RETURN(std::optional<report::SearchSavings> savings, query_->SearchSavings(exp));
    if (savings) {
      wire::ToProto(*savings, response->mutable_search_savings());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::ListRuns(grpc::CallbackServerContext* ctx,
                                                   const tae::v1::ListRunsRequest* request,
                                                   tae::v1::ListRunsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    if (request->limit() < 0 || request->after_run() < 0) {
      return absl::InvalidArgumentError("limit and after_run: not negative");
    }
    ASSIGN_OR_RETURN(
        query::RunsPage page,
        query_->ListRunsPage(request->experiment(), request->after_run(), request->limit()));
    for (const query::RunView& run : page.runs) {
      wire::ToProto(run, response->add_runs());
    }
    response->set_total(page.total);
    response->set_next_after(page.next_after);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::GetRun(grpc::CallbackServerContext* ctx,
                                                 const tae::v1::GetRunRequest* request,
                                                 tae::v1::GetRunResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    ASSIGN_OR_RETURN(query::RunDetail run, query_->GetRun(request->run_id()));
    wire::ToProto(run, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::Logs(grpc::CallbackServerContext* ctx,
                                               const tae::v1::LogsRequest* request,
                                               tae::v1::LogsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    if (request->limit() < 0 || request->limit() > query::Query::kMaxLogLines) {
      return absl::InvalidArgumentError(
          absl::StrCat("limit: must be 0..", query::Query::kMaxLogLines));
    }
    const int limit = request->limit() == 0 ? kDefaultLogLines : request->limit();
    ASSIGN_OR_RETURN(query::LogPage page, query_->Logs(request->run_id(), request->after(), limit));
    wire::ToProto(page, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::Report(grpc::CallbackServerContext* ctx,
                                                 const tae::v1::ReportRequest* request,
                                                 tae::v1::ReportResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    ASSIGN_OR_RETURN(
        query::ReportResult result,
        query_->Report(request->experiment(),
                       {request->metrics().begin(), request->metrics().end()}, request->baseline(),
                       request->sort(), request->view(), request->frontier(), request->cost(),
                       request->scale(), request->scale_at()));
    wire::ToProto(result, response);
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
    ASSIGN_OR_RETURN(int64_t id, controller_->SetPaused(request->experiment(), request->paused()));
    ASSIGN_OR_RETURN(model::ExperimentRecord exp, query_->GetExperiment(id));
    wire::ToProto(exp, response);
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

grpc::ServerUnaryReactor* ControlService::RevokeAgent(grpc::CallbackServerContext* ctx,
                                                      const tae::v1::RevokeAgentRequest* request,
                                                      tae::v1::RevokeAgentResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    if (request->agent_id().empty()) {
      return absl::InvalidArgumentError("agent_id: required");
    }
    ASSIGN_OR_RETURN(int requeued, controller_->Revoke(request->agent_id(), request->reason()));
    response->set_runs_requeued(requeued);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::ListQueue(grpc::CallbackServerContext* ctx,
                                                    const tae::v1::ListQueueRequest* request,
                                                    tae::v1::ListRunsResponse* response) {
  return OnCore(ctx, [this, response]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<model::RunRecord> queued, query_->Queue());
    for (const model::RunRecord& run : queued) {
      wire::ToProto(run, response->add_runs());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::QueryMetrics(grpc::CallbackServerContext* ctx,
                                                       const tae::v1::QueryMetricsRequest* request,
                                                       tae::v1::QueryMetricsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    query::MetricsRequest input{request->experiment(),
                                {request->run_ids().begin(), request->run_ids().end()},
                                {request->keys().begin(), request->keys().end()},
                                request->max_points()};
    ASSIGN_OR_RETURN(std::vector<query::MetricSeries> series, query_->Metrics(input));
    for (const query::MetricSeries& one : series) {
      wire::ToProto(one, response->add_series());
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
      wire::ToProto(agent, response->add_agents());
    }
    if (request->provider_events()) {
      for (const provider::ProviderEvent& event : controller_->provider_log()->events()) {
        wire::ToProto(event, response->add_provider_events());
      }
    }
    // A handful: every listing shows them (a GKE slice Kueue holds says why agents are missing).
    for (const provider::CloudVm& vm : controller_->provider_log()->vms()) {
      wire::ToProto(vm, response->add_vms());
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
      wire::ToProto(vm, response->add_vms());
    }
    request_shutdown_(request->delete_vms());
    return absl::OkStatus();
  });
}

}  // namespace tae::rpc
