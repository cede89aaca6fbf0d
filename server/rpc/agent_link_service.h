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

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/io_context.hpp"
#include "server/blobs/blob_worker.h"
#include "server/controller/controller.h"
#include "server/query/query.h"
#include "server/registry/credentials.h"
#include "tae/v1/agent_link.grpc.pb.h"

namespace tae::rpc {

// Which checkpoint blobs each agent may upload: those its accepted offers said were missing,
// each at the size its manifest gave, for an hour after the offer. A put of anything else is
// refused, so a credential holder cannot fill taed's disk with blobs nobody asked for; expired
// grants name the partial uploads to drop. Thread-safe.
class UploadGrants {
 public:
  static constexpr double kGrantSeconds = 3600;
  // At most this many bytes granted to one agent at a time (offers beyond it are refused).
  static constexpr uint64_t kMaxGrantedBytes = uint64_t{64} << 30;

  // Grants `agent` the blobs `sizes` (hash -> size) until now + kGrantSeconds.
  // ResourceExhausted beyond kMaxGrantedBytes.
  absl::Status Grant(const std::string& agent, const std::map<std::string, uint64_t>& sizes,
                     double now);
  // OK when every chunk is of a blob granted to `agent` with that total size.
  absl::Status Check(const std::string& agent,
                     const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks,
                     double now);
  // The blob is stored (or the commit that needed it is done): no longer granted.
  void Done(const std::string& agent, const std::vector<std::string>& hashes);
  // Removes grants past their time; returns their hashes (partial uploads to drop).
  std::vector<std::string> Expire(double now);

 private:
  struct Granted {
    uint64_t size = 0;
    double until = 0;
  };
  absl::Mutex mu_;
  std::map<std::string, std::map<std::string, Granted>> grants_ ABSL_GUARDED_BY(mu_);
};

class AgentLinkService final : public tae::v1::AgentLink::CallbackService {
 public:
  // token: the shared enrolment token (Enrol only); credentials: the table every other call is
  // authenticated against (kept current by the controller).
  AgentLinkService(boost::asio::io_context* core, controller::Controller* controller,
                   query::Query* query, blobs::BlobWorker* blobs,
                   blobs::BlobWorker* checkpoint_blobs, std::string token,
                   const registry::CredentialTable* credentials);

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

  // Checkpoint blobs granted by offers (for tests).
  UploadGrants* grants() { return &grants_; }

 private:
  // The agent id the call's credential authenticates; nullopt (logged) when none.
  std::optional<std::string> Caller(grpc::CallbackServerContext* ctx) const;

  boost::asio::io_context* core_;
  controller::Controller* controller_;
  query::Query* query_;
  blobs::BlobWorker* blobs_;             // code snapshots ($TAE_HOME/blobs)
  blobs::BlobWorker* checkpoint_blobs_;  // checkpoints ($TAE_HOME/checkpoints)
  std::string token_;
  const registry::CredentialTable* credentials_;
  UploadGrants grants_;
};

// Constant-time comparison of a presented "Bearer <token>" header against the expected token.
bool TokenMatches(std::string_view header, std::string_view token);

}  // namespace tae::rpc
