#pragma once

// The AgentLink service: one bidirectional Connect stream per agent. The stream reactor only
// moves messages: reads are posted to the core thread, writes come from the core thread through
// the AgentChannel interface with one write in flight. Agents authenticate with a bearer token.

#include <string>

#include "boost/asio/io_context.hpp"
#include "server/blobs/blob_worker.h"
#include "server/controller/controller.h"
#include "server/query/query.h"
#include "tae/v1/agent_link.grpc.pb.h"

namespace tae::rpc {

class AgentLinkService final : public tae::v1::AgentLink::CallbackService {
 public:
  AgentLinkService(boost::asio::io_context* core, controller::Controller* controller,
                   query::Query* query, blobs::BlobWorker* blobs,
                   blobs::BlobWorker* checkpoint_blobs, std::string token);

  grpc::ServerBidiReactor<tae::v1::AgentMessage, tae::v1::TaedMessage>* Connect(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* GetManifest(grpc::CallbackServerContext* ctx,
                                        const tae::v1::GetManifestRequest* request,
                                        tae::v1::GetManifestResponse* response) override;
  // Streams the blobs' bytes, one chunk read on the blob worker per write.
  grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* FetchBlobs(
      grpc::CallbackServerContext* ctx, const tae::v1::FetchBlobsRequest* request) override;
  // Checkpoints (checkpoint_rpcs.cc): the manifest is parsed and the blobs checked on the
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

 private:
  bool Authorized(grpc::CallbackServerContext* ctx) const;

  boost::asio::io_context* core_;
  controller::Controller* controller_;
  query::Query* query_;
  blobs::BlobWorker* blobs_;             // code snapshots ($TAE_HOME/blobs)
  blobs::BlobWorker* checkpoint_blobs_;  // checkpoints ($TAE_HOME/checkpoints)
  std::string token_;
};

// Constant-time comparison of a presented "Bearer <token>" header against the expected token.
bool TokenMatches(std::string_view header, std::string_view token);

}  // namespace tae::rpc
