#pragma once

// The AgentLink service: one bidirectional Connect stream per agent. The stream reactor only
// moves messages: reads are posted to the core thread, writes come from the core thread through
// the AgentChannel interface with one write in flight.
//
// Every call but Enrol presents the agent's own credential ("authorization: Bearer ID.SECRET",
// server/registry/credentials.h) and is bound to that id: a stream registers only as it, events
// and checkpoints are taken only for the runs it holds (Controller::OnEvents, CheckCheckpoint),
// and checkpoint blobs are taken only for what its own offers named (UploadGrants). Enrol alone
// takes the shared enrolment token.

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/io_context.hpp"
#include "common/log/limiter.h"
#include "server/blobs/blob_worker.h"
#include "server/controller/controller.h"
#include "server/query/query.h"
#include "server/registry/credentials.h"
#include "server/rpc/upload_grants.h"
#include "tae/v1/agent_link.grpc.pb.h"

namespace tae::rpc {

class AgentLinkService final : public tae::v1::AgentLink::CallbackService {
 public:
  // token: the shared enrolment token (Enrol only); credentials: the table every other call is
  // authenticated against (kept current by the controller); upload_grant_s: how long a checkpoint
  // offer's uploads stay open (UploadGrants).
  AgentLinkService(boost::asio::io_context* core, controller::Controller* controller,
                   query::Query* query, blobs::BlobWorker* blobs,
                   blobs::BlobWorker* checkpoint_blobs, std::string token,
                   registry::CredentialTable* credentials,
                   double upload_grant_s = UploadGrants::kGrantSeconds);

  grpc::ServerUnaryReactor* Enrol(grpc::CallbackServerContext* ctx,
                                  const tae::v1::EnrolRequest* request,
                                  tae::v1::EnrolResponse* response) override;

  grpc::ServerBidiReactor<tae::v1::AgentMessage, tae::v1::TaedMessage>* Connect(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* GetManifest(grpc::CallbackServerContext* ctx,
                                        const tae::v1::GetManifestRequest* request,
                                        tae::v1::GetManifestResponse* response) override;
  // Streams the blobs' bytes, one chunk read on the blob worker per write.
  grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* FetchBlobs(
      grpc::CallbackServerContext* ctx, const tae::v1::FetchBlobsRequest* request) override;
  // Checkpoints (agent_link_checkpoints.cc): the manifest is parsed and the blobs checked on the
  // checkpoint blob worker, the run checked and the row written on the core.
  grpc::ServerUnaryReactor* OfferCheckpoint(grpc::CallbackServerContext* ctx,
                                            const tae::v1::OfferCheckpointRequest* request,
                                            tae::v1::OfferCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* PutCheckpointBlobs(
      grpc::CallbackServerContext* ctx, const tae::v1::PutCheckpointBlobsRequest* request,
      tae::v1::PutCheckpointBlobsResponse* response) override;
  grpc::ServerUnaryReactor* CommitCheckpoint(grpc::CallbackServerContext* ctx,
                                             const tae::v1::CommitCheckpointRequest* request,
                                             tae::v1::CommitCheckpointResponse* response) override;

  // On the core, every so often (taed: every min(60 s, upload_grant_s / 4)): ends the upload
  // grants past their time, drops their partial uploads, and removes the blobs they stored that
  // no checkpoint names (uploaded, never committed). So what an agent uploads without committing
  // leaves taed's disk within upload_grant_s and one period.
  void ReclaimUploads();

  // Checkpoint blobs granted by offers (for tests).
  UploadGrants* grants() { return &grants_; }
  // Bad events and bad values (a NaN metric, a wall_time that is not a time) left out of the
  // event batches agents sent; the rest of each batch was taken and acked.
  int64_t dropped_values() const { return dropped_values_.load(); }

 private:
  // The agent id the call's credential authenticates; nullopt (logged) when none.
  std::optional<std::string> Caller(grpc::CallbackServerContext* ctx) const;

  boost::asio::io_context* core_;
  controller::Controller* controller_;
  query::Query* query_;
  blobs::BlobWorker* blobs_;             // code snapshots ($TAE_HOME/blobs)
  blobs::BlobWorker* checkpoint_blobs_;  // checkpoints ($TAE_HOME/checkpoints)
  std::string token_;
  // What callers without a credential make taed write: a line per peer a minute, the rest
  // counted (common/log/limiter.h).
  mutable log::LineLimiter refusals_{60.0, 1024};
  registry::CredentialTable* credentials_;
  UploadGrants grants_;
  std::atomic<int64_t> dropped_values_{0};
};

// Constant-time comparison of a presented "Bearer <token>" header against the expected token.
bool TokenMatches(std::string_view header, std::string_view token);

}  // namespace tae::rpc
