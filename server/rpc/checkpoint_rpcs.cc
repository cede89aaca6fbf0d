// The Control service's checkpoint calls (docs/checkpoints.md, docs/profiles.md): taectl's
// checkpoints / artifacts / pull / scrap --checkpoints / profile. Reads and rows are the core's;
// blob reads and garbage collection run on the checkpoint blob worker. Nothing here blocks a gRPC
// thread. The agents' side (offer / upload / commit) is agent_link_checkpoints.cc.

#include <optional>
#include <utility>
#include <vector>

#include "server/rpc/blob_rpcs.h"
#include "server/rpc/control_service.h"
#include "server/wire/wire.h"

namespace tae::rpc {

grpc::ServerUnaryReactor* ControlService::ListCheckpoints(
    grpc::CallbackServerContext* ctx, const tae::v1::ListCheckpointsRequest* request,
    tae::v1::ListCheckpointsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    absl::StatusOr<std::pair<std::vector<model::CheckpointRecord>, int>> listed =
        query_->Checkpoints(request->run_id());
    if (!listed.ok()) {
      return listed.status();
    }
    for (const model::CheckpointRecord& c : listed->first) {
      wire::ToProto(c, response->add_checkpoints());
    }
    response->set_keep(listed->second);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::GetCheckpoint(
    grpc::CallbackServerContext* ctx, const tae::v1::GetCheckpointRequest* request,
    tae::v1::Checkpoint* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    absl::StatusOr<model::CheckpointRecord> checkpoint =
        !request->artifact().empty()
            ? query_->Artifact(request->run_id(), request->artifact())
            : query_->Checkpoint(request->run_id(), request->has_step()
                                                        ? std::optional<int64_t>(request->step())
                                                        : std::nullopt);
    if (!checkpoint.ok()) {
      return checkpoint.status();
    }
    wire::ToProto(*checkpoint, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::Profile(grpc::CallbackServerContext* ctx,
                                                  const tae::v1::ProfileRequest* request,
                                                  tae::v1::ProfileResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    // The legacy profiler keeps every event in memory until the capture ends.
    if (!(request->seconds() >= 0 && request->seconds() <= 600) || request->steps() > 1000) {
      return absl::InvalidArgumentError(
          "steps, seconds: at most 1000 steps or 600 seconds (and not negative)");
    }
    absl::StatusOr<controller::ProfileTicket> ticket =
        controller_->RequestProfile(request->run_id(), request->steps(), request->seconds());
    if (!ticket.ok()) {
      return ticket.status();
    }
    response->set_id(ticket->id);
    response->set_artifact(ticket->artifact);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::GetProfile(grpc::CallbackServerContext* ctx,
                                                     const tae::v1::GetProfileRequest* request,
                                                     tae::v1::GetProfileResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    absl::StatusOr<controller::ProfileStatus> status =
        controller_->GetProfile(request->run_id(), request->id());
    if (!status.ok()) {
      return status.status();
    }
    switch (status->state) {
      case controller::ProfileState::kPending:
        response->set_state(tae::v1::GetProfileResponse::PENDING);
        break;
      case controller::ProfileState::kDone:
        response->set_state(tae::v1::GetProfileResponse::DONE);
        wire::ToProto(status->artifact, response->mutable_artifact());
        break;
      case controller::ProfileState::kFailed:
        response->set_state(tae::v1::GetProfileResponse::FAILED);
        response->set_error(status->error);
        break;
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ControlService::ListArtifacts(
    grpc::CallbackServerContext* ctx, const tae::v1::ListArtifactsRequest* request,
    tae::v1::ListArtifactsResponse* response) {
  return OnCore(ctx, [this, request, response]() -> absl::Status {
    absl::StatusOr<std::vector<model::CheckpointRecord>> listed =
        query_->Artifacts(request->run_id());
    if (!listed.ok()) {
      return listed.status();
    }
    for (const model::CheckpointRecord& a : *listed) {
      wire::ToProto(a, response->add_artifacts());
    }
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* ControlService::FetchCheckpointBlobs(
    grpc::CallbackServerContext*, const tae::v1::FetchBlobsRequest* request) {
  return NewBlobFetch(checkpoint_blobs_, request);
}

void ControlService::ScrapCheckpoints(grpc::ServerUnaryReactor* reactor,
                                      const tae::v1::ScrapRequest* request,
                                      tae::v1::ScrapResponse* response) {
  boost::asio::post(*core_, [this, reactor, request, response] {
    controller::ScrapInput input{{request->ids().begin(), request->ids().end()},
                                 request->all(),
                                 request->older_than_s(),
                                 request->dry_run(),
                                 request->artifacts()};
    absl::StatusOr<controller::CheckpointScrap> plan = controller_->ScrapCheckpoints(input);
    if (!plan.ok()) {
      reactor->Finish(ToGrpc(plan.status()));
      return;
    }
    for (const std::string& removed : plan->removed) {
      response->add_removed(removed);
    }
    for (const std::string& kept : plan->kept) {
      response->add_kept(kept);
    }
    response->set_checkpoints_removed(plan->checkpoints);
    if (request->dry_run()) {
      reactor->Finish(grpc::Status::OK);
      return;
    }
    // Every blob no remaining checkpoint names: the dropped ones' and any an upload left without
    // a commit. An upload in progress may lose blobs here; its commit then names them missing and
    // the agent uploads them again.
    RemoveUnreferencedBlobs(checkpoint_blobs_, std::move(plan->referenced), reactor, response);
  });
}

}  // namespace tae::rpc
