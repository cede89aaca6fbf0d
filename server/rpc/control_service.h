#pragma once

// The Control service (taectl -> taed): a thin adapter. Each call is posted to the core thread,
// where the Controller answers what changes state and the Query what is read; gRPC threads only
// move messages; records and views become messages in server/wire.

#include <functional>

#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "server/blobs/blob_worker.h"
#include "server/controller/controller.h"
#include "server/query/query.h"
#include "server/rpc/convert.h"
#include "tae/v1/control.grpc.pb.h"

namespace tae::rpc {

class ControlService final : public tae::v1::Control::CallbackService {
 public:
  ControlService(boost::asio::io_context* core, controller::Controller* controller,
                 query::Query* query, blobs::BlobWorker* blobs, blobs::BlobWorker* checkpoint_blobs,
                 std::function<void(bool delete_vms)> request_shutdown);

  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* ctx,
                                   const tae::v1::SubmitRequest* request,
                                   tae::v1::SubmitResponse* response) override;
  grpc::ServerUnaryReactor* ListExperiments(grpc::CallbackServerContext* ctx,
                                            const tae::v1::ListExperimentsRequest* request,
                                            tae::v1::ListExperimentsResponse* response) override;
  grpc::ServerUnaryReactor* GetExperiment(grpc::CallbackServerContext* ctx,
                                          const tae::v1::GetExperimentRequest* request,
                                          tae::v1::Experiment* response) override;
  grpc::ServerUnaryReactor* ListRuns(grpc::CallbackServerContext* ctx,
                                     const tae::v1::ListRunsRequest* request,
                                     tae::v1::ListRunsResponse* response) override;
  grpc::ServerUnaryReactor* GetRun(grpc::CallbackServerContext* ctx,
                                   const tae::v1::GetRunRequest* request,
                                   tae::v1::GetRunResponse* response) override;
  grpc::ServerUnaryReactor* Logs(grpc::CallbackServerContext* ctx,
                                 const tae::v1::LogsRequest* request,
                                 tae::v1::LogsResponse* response) override;
  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* ctx,
                                   const tae::v1::ReportRequest* request,
                                   tae::v1::ReportResponse* response) override;
  grpc::ServerUnaryReactor* SetPaused(grpc::CallbackServerContext* ctx,
                                      const tae::v1::SetPausedRequest* request,
                                      tae::v1::Experiment* response) override;
  grpc::ServerUnaryReactor* Retry(grpc::CallbackServerContext* ctx,
                                  const tae::v1::RetryRequest* request,
                                  tae::v1::RetryResponse* response) override;
  grpc::ServerUnaryReactor* DrainAgent(grpc::CallbackServerContext* ctx,
                                       const tae::v1::DrainAgentRequest* request,
                                       tae::v1::DrainAgentResponse* response) override;
  grpc::ServerUnaryReactor* RevokeAgent(grpc::CallbackServerContext* ctx,
                                        const tae::v1::RevokeAgentRequest* request,
                                        tae::v1::RevokeAgentResponse* response) override;
  grpc::ServerUnaryReactor* ListQueue(grpc::CallbackServerContext* ctx,
                                      const tae::v1::ListQueueRequest* request,
                                      tae::v1::ListRunsResponse* response) override;
  grpc::ServerUnaryReactor* QueryMetrics(grpc::CallbackServerContext* ctx,
                                         const tae::v1::QueryMetricsRequest* request,
                                         tae::v1::QueryMetricsResponse* response) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* ctx,
                                   const tae::v1::CancelRequest* request,
                                   tae::v1::CancelResponse* response) override;
  grpc::ServerUnaryReactor* ListAgents(grpc::CallbackServerContext* ctx,
                                       const tae::v1::ListAgentsRequest* request,
                                       tae::v1::ListAgentsResponse* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const tae::v1::ShutdownRequest* request,
                                     tae::v1::ShutdownResponse* response) override;

  // Snapshots (snapshot_rpcs.cc): blob work runs on the blob worker, store work on the core.
  grpc::ServerUnaryReactor* MissingBlobs(grpc::CallbackServerContext* ctx,
                                         const tae::v1::MissingBlobsRequest* request,
                                         tae::v1::MissingBlobsResponse* response) override;
  grpc::ServerUnaryReactor* PutBlobs(grpc::CallbackServerContext* ctx,
                                     const tae::v1::PutBlobsRequest* request,
                                     tae::v1::PutBlobsResponse* response) override;
  grpc::ServerUnaryReactor* CreateSnapshot(grpc::CallbackServerContext* ctx,
                                           const tae::v1::CreateSnapshotRequest* request,
                                           tae::v1::CreateSnapshotResponse* response) override;
  grpc::ServerUnaryReactor* ListSnapshots(grpc::CallbackServerContext* ctx,
                                          const tae::v1::ListSnapshotsRequest* request,
                                          tae::v1::ListSnapshotsResponse* response) override;
  grpc::ServerUnaryReactor* Scrap(grpc::CallbackServerContext* ctx,
                                  const tae::v1::ScrapRequest* request,
                                  tae::v1::ScrapResponse* response) override;
  // Checkpoints, artifacts and profiles (checkpoint_rpcs.cc).
  grpc::ServerUnaryReactor* ListCheckpoints(grpc::CallbackServerContext* ctx,
                                            const tae::v1::ListCheckpointsRequest* request,
                                            tae::v1::ListCheckpointsResponse* response) override;
  grpc::ServerUnaryReactor* Profile(grpc::CallbackServerContext* ctx,
                                    const tae::v1::ProfileRequest* request,
                                    tae::v1::ProfileResponse* response) override;
  grpc::ServerUnaryReactor* GetProfile(grpc::CallbackServerContext* ctx,
                                       const tae::v1::GetProfileRequest* request,
                                       tae::v1::GetProfileResponse* response) override;
  grpc::ServerUnaryReactor* ListArtifacts(grpc::CallbackServerContext* ctx,
                                          const tae::v1::ListArtifactsRequest* request,
                                          tae::v1::ListArtifactsResponse* response) override;
  grpc::ServerUnaryReactor* GetCheckpoint(grpc::CallbackServerContext* ctx,
                                          const tae::v1::GetCheckpointRequest* request,
                                          tae::v1::Checkpoint* response) override;
  grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* FetchCheckpointBlobs(
      grpc::CallbackServerContext* ctx, const tae::v1::FetchBlobsRequest* request) override;

 private:
  // Scrap of checkpoints (ScrapRequest.checkpoints).
  void ScrapCheckpoints(grpc::ServerUnaryReactor* reactor, const tae::v1::ScrapRequest* request,
                        tae::v1::ScrapResponse* response);

  // Runs fn on the core thread and finishes the call with its status.
  template <typename Fn>
  grpc::ServerUnaryReactor* OnCore(grpc::CallbackServerContext* ctx, Fn fn);

  boost::asio::io_context* core_;
  controller::Controller* controller_;
  query::Query* query_;
  blobs::BlobWorker* blobs_;             // code snapshots
  blobs::BlobWorker* checkpoint_blobs_;  // checkpoints
  std::function<void(bool delete_vms)> request_shutdown_;
};

template <typename Fn>
grpc::ServerUnaryReactor* ControlService::OnCore(grpc::CallbackServerContext* ctx, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  boost::asio::post(*core_,
                    [reactor, fn = std::move(fn)]() mutable { reactor->Finish(ToGrpc(fn())); });
  return reactor;
}

}  // namespace tae::rpc
