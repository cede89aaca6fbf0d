#include "server/rpc/agent_link_service.h"

#include <atomic>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/post.hpp"
#include "common/auth/credential.h"
#include "common/clock/clock.h"
#include "server/registry/agent_channel.h"
#include "server/rpc/blob_rpcs.h"
#include "server/rpc/convert.h"
#include "spdlog/spdlog.h"

namespace tae::rpc {
namespace {

using Reactor = grpc::ServerBidiReactor<tae::v1::AgentMessage, tae::v1::TaedMessage>;

class Rejected final : public Reactor {
 public:
  explicit Rejected(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// Write side of one stream, shared between the reactor (gRPC threads) and the core thread.
class StreamChannel final : public registry::AgentChannel {
 public:
  explicit StreamChannel(Reactor* reactor) : reactor_(reactor) {}

  void Send(const tae::v1::TaedMessage& message) override {
    const tae::v1::TaedMessage* next = nullptr;
    Reactor* reactor = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || closing_) {
        return;
      }
      queue_.push_back(message);
      if (writing_) {
        return;
      }
      writing_ = true;
      next = &queue_.front();
      reactor = reactor_;
    }
    reactor->StartWrite(next);  // outside the lock: a reaction may run inline
  }

  void Close() override {
    Reactor* finish = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || closing_) {
        return;
      }
      closing_ = true;
      if (!writing_) {
        finished_ = true;
        finish = reactor_;
      }
    }
    if (finish != nullptr) {
      finish->Finish(grpc::Status::OK);
    }
  }

  // From the reactor: the write in flight completed.
  void WriteDone(bool ok) {
    const tae::v1::TaedMessage* next = nullptr;
    bool finish = false;
    Reactor* reactor = nullptr;  // alive: OnDone cannot run while this write is outstanding
    {
      absl::MutexLock lock(&mu_);
      reactor = reactor_;
      queue_.pop_front();
      if (!ok) {
        queue_.clear();
        closing_ = true;  // the stream is broken; reads will end too
      }
      if (!closing_ && !queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
        if (closing_ && !finished_) {  // also after a failed write: every RPC must finish
          finished_ = true;
          finish = true;
        }
      }
    }
    if (next != nullptr) {
      reactor->StartWrite(next);
    } else if (finish) {
      reactor->Finish(grpc::Status::OK);
    }
  }

  void Detach() {
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
  }

 private:
  absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
  std::deque<tae::v1::TaedMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// The host part of a gRPC peer string ("ipv4:10.0.0.2:5000", "ipv6:[::1]:5000"); "" otherwise.
std::string PeerHost(const std::string& peer) {
  if (peer.rfind("ipv4:", 0) == 0) {
    const std::string rest = peer.substr(5);
    return rest.substr(0, rest.rfind(':'));
  }
  if (peer.rfind("ipv6:", 0) == 0) {
    const size_t open = peer.find('[');
    const size_t close = peer.find(']');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      return peer.substr(open + 1, close - open - 1);
    }
  }
  return "";
}

class AgentStream final : public Reactor {
 public:
  // caller: the id `presented` (the stream's "ID.SECRET") authenticated when it opened.
  AgentStream(boost::asio::io_context* core, controller::Controller* controller,
              registry::CredentialTable* credentials, std::atomic<int64_t>* dropped,
              std::string peer_host, std::string caller, std::string presented)
      : core_(core),
        controller_(controller),
        credentials_(credentials),
        dropped_(dropped),
        channel_(std::make_shared<StreamChannel>(this)),
        peer_host_(std::move(peer_host)),
        caller_(std::move(caller)),
        presented_(std::move(presented)),
        opened_at_(controller_->Now()) {
    credentials_->AddStream(caller_, channel_);
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The agent closed its side or the connection broke: end the stream from the core.
      boost::asio::post(*core_, [channel = channel_] { channel->Close(); });
      return;
    }
    if (!MayGoOn()) {
      // Nothing more is read: the message is dropped and the stream ends.
      boost::asio::post(*core_, [channel = channel_] { channel->Close(); });
      return;
    }
    Dispatch(std::move(in_));
    in_.Clear();
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override { channel_->WriteDone(ok); }

  void OnDone() override {
    channel_->Detach();
    credentials_->RemoveStream(caller_, channel_.get());
    if (!agent_id_.empty()) {
      boost::asio::post(*core_, [controller = controller_, id = agent_id_, channel = channel_] {
        controller->OnDisconnected(id, channel.get());
      });
    }
    delete this;
  }

 private:
  // Identity on every message, not only at the stream's start: the credential must still be the
  // agent's (not revoked, not replaced by a provider's new key) and the stream within its
  // lifetime.
  bool MayGoOn() {
    if (credentials_->Authenticate(presented_) != std::optional<std::string>(caller_)) {
      spdlog::warn(
          "agent {}: its credential is no longer valid (revoked or replaced); ending "
          "its stream",
          caller_);
      return false;
    }
    if (controller_->Now() - opened_at_ > tae::v1::kTaedStreamLifetimeS) {
      spdlog::info(
          "agent {}: its stream reached its lifetime of {} s; ending it (the agent "
          "reconnects)",
          caller_, tae::v1::kTaedStreamLifetimeS);
      return false;
    }
    return true;
  }

  void Dispatch(tae::v1::AgentMessage message) {
    switch (message.kind_case()) {
      case tae::v1::AgentMessage::kRegister: {
        if (!agent_id_.empty()) {
          return;  // one Register per stream
        }
        if (message.register_().agent_id() != caller_) {
          // A credential speaks for one agent only.
          spdlog::warn("agent {}: registering as '{}' refused; closing its stream", caller_,
                       message.register_().agent_id().substr(0, 128));
          boost::asio::post(*core_, [channel = channel_] { channel->Close(); });
          return;
        }
        agent_id_ = message.register_().agent_id();
        controller::AgentHello hello = FromProto(message.register_());
        auto addr = hello.agent.labels.find("addr");
        hello.agent.address = addr != hello.agent.labels.end() ? addr->second : peer_host_;
        boost::asio::post(*core_, [controller = controller_, channel = channel_,
                                   hello = std::move(hello)]() mutable {
          controller->OnRegister(channel, std::move(hello));
        });
        return;
      }
      case tae::v1::AgentMessage::kEvents: {
        if (agent_id_.empty()) {
          return;  // events before Register are ignored; the agent resends them
        }
        if (message.events().events_size() > kMaxEventsPerBatch) {
          spdlog::error("agent {}: a batch of {} events (at most {}); closing its stream",
                        agent_id_, message.events().events_size(), kMaxEventsPerBatch);
          boost::asio::post(*core_, [channel = channel_] { channel->Close(); });
          return;
        }
        auto events = std::make_shared<std::vector<model::IngestEvent>>();
        std::vector<std::string> rejected;
        uint64_t last_seq =
            FromProto(message.events(), controller_->Now(), events.get(), &rejected);
        if (!rejected.empty()) {
          // Counted, and logged with the first few: a job that reports NaN at every step
          // must not flood the log.
          dropped_->fetch_add(static_cast<int64_t>(rejected.size()));
          for (size_t i = 0; i < rejected.size() && i < 3; ++i) {
            spdlog::error("agent {}: {}", agent_id_, rejected[i]);
          }
          if (rejected.size() > 3) {
            spdlog::error("agent {}: {} more bad events or values in the batch dropped", agent_id_,
                          rejected.size() - 3);
          }
        }
        boost::asio::post(*core_, [controller = controller_, id = agent_id_, channel = channel_,
                                   events, last_seq] {
          controller->OnEvents(id, channel.get(), *events, last_seq).IgnoreError();
        });
        return;
      }
      case tae::v1::AgentMessage::kDraining:
        if (!agent_id_.empty()) {
          boost::asio::post(
              *core_, [controller = controller_, id = agent_id_] { controller->OnDraining(id); });
        }
        return;
      case tae::v1::AgentMessage::kHeartbeat:
        if (!agent_id_.empty()) {
          boost::asio::post(
              *core_, [controller = controller_, id = agent_id_] { controller->OnHeartbeat(id); });
        }
        return;
      case tae::v1::AgentMessage::kProfileFailed:
        if (!agent_id_.empty()) {
          const tae::v1::ProfileFailed& failed = message.profile_failed();
          boost::asio::post(*core_, [controller = controller_, agent = agent_id_,
                                     run_id = failed.run_id(), attempt = failed.attempt(),
                                     id = failed.id(), error = failed.error().substr(0, 4096)] {
            controller->OnProfileFailed(agent, run_id, attempt, id, error);
          });
        }
        return;
      case tae::v1::AgentMessage::kFault:
        if (!agent_id_.empty()) {
          boost::asio::post(*core_, [controller = controller_, id = agent_id_,
                                     reason = message.fault().reason().substr(0, 1024)] {
            controller->OnAgentFault(id, reason);
          });
        }
        return;
      case tae::v1::AgentMessage::KIND_NOT_SET:
        return;
    }
  }

  boost::asio::io_context* core_;
  controller::Controller* controller_;
  registry::CredentialTable* credentials_;
  std::atomic<int64_t>* dropped_;  // bad events and values left out of batches
  std::shared_ptr<StreamChannel> channel_;
  tae::v1::AgentMessage in_;
  std::string agent_id_;  // set by Register; only touched by the read chain
  const std::string peer_host_;
  const std::string caller_;     // whose credential opened the stream
  const std::string presented_;  // that credential, checked again on every message
  const double opened_at_;
};

}  // namespace

bool TokenMatches(std::string_view header, std::string_view token) {
  constexpr std::string_view kPrefix = "Bearer ";
  return !token.empty() && header.substr(0, kPrefix.size()) == kPrefix &&
         auth::SecretEquals(header.substr(kPrefix.size()), token);
}

AgentLinkService::AgentLinkService(boost::asio::io_context* core,
                                   controller::Controller* controller, query::Query* query,
                                   blobs::BlobWorker* blobs, blobs::BlobWorker* checkpoint_blobs,
                                   std::string token, registry::CredentialTable* credentials,
                                   double upload_grant_s)
    : core_(core),
      controller_(controller),
      query_(query),
      blobs_(blobs),
      checkpoint_blobs_(checkpoint_blobs),
      token_(std::move(token)),
      credentials_(credentials),
      grants_(upload_grant_s) {}

namespace {

std::string_view Authorization(grpc::CallbackServerContext* ctx) {
  const auto& metadata = ctx->client_metadata();
  auto it = metadata.find("authorization");
  return it == metadata.end() ? std::string_view()
                              : std::string_view(it->second.data(), it->second.size());
}

}  // namespace

std::optional<std::string> AgentLinkService::Caller(grpc::CallbackServerContext* ctx) const {
  constexpr std::string_view kPrefix = "Bearer ";
  std::string_view header = Authorization(ctx);
  std::optional<std::string> id;
  if (header.substr(0, kPrefix.size()) == kPrefix && credentials_ != nullptr) {
    id = credentials_->Authenticate(header.substr(kPrefix.size()));
  }
  if (!id.has_value()) {
    const std::string peer = log::LineLimiter::PeerKey(ctx->peer());
    if (std::optional<int64_t> dropped = refusals_.Admit(peer, clock::WallNow());
        dropped.has_value()) {
      spdlog::warn("agent call from {} refused: {}{}", peer,
                   TokenMatches(header, token_)
                       ? "the enrolment token only enrols (the agent must present its own "
                         "credential)"
                       : "bad, revoked or missing credential",
                   *dropped > 0 ? absl::StrCat(" (and ", *dropped,
                                               " more refused calls from there in the last minute)")
                                : std::string());
    }
  }
  return id;
}

grpc::ServerUnaryReactor* AgentLinkService::Enrol(grpc::CallbackServerContext* ctx,
                                                  const tae::v1::EnrolRequest* request,
                                                  tae::v1::EnrolResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!TokenMatches(Authorization(ctx), token_)) {
    const std::string peer = log::LineLimiter::PeerKey(ctx->peer());
    if (std::optional<int64_t> dropped = refusals_.Admit(peer, clock::WallNow());
        dropped.has_value()) {
      spdlog::warn("enrolment from {} refused: bad or missing enrolment token{}", peer,
                   *dropped > 0 ? absl::StrCat(" (and ", *dropped,
                                               " more refused calls from there in the last minute)")
                                : std::string());
    }
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad enrolment token"));
    return reactor;
  }
  boost::asio::post(*core_, [this, reactor, request, response] {
    absl::StatusOr<std::string> credential =
        controller_->Enrol(request->agent_id(), request->request_id());
    if (credential.ok()) {
      response->set_credential(*credential);
    }
    reactor->Finish(ToGrpc(credential.status()));
  });
  return reactor;
}

grpc::ServerBidiReactor<tae::v1::AgentMessage, tae::v1::TaedMessage>* AgentLinkService::Connect(
    grpc::CallbackServerContext* ctx) {
  std::optional<std::string> caller = Caller(ctx);
  if (!caller.has_value()) {
    return new Rejected(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad agent credential"));
  }
  constexpr std::string_view kPrefix = "Bearer ";
  return new AgentStream(core_, controller_, credentials_, &dropped_values_, PeerHost(ctx->peer()),
                         *std::move(caller),
                         std::string(Authorization(ctx).substr(kPrefix.size())));
}

grpc::ServerUnaryReactor* AgentLinkService::GetManifest(grpc::CallbackServerContext* ctx,
                                                        const tae::v1::GetManifestRequest* request,
                                                        tae::v1::GetManifestResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<std::string> caller = Caller(ctx);
  if (!caller.has_value()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad agent credential"));
    return reactor;
  }
  boost::asio::post(*core_, [this, reactor, request, response, caller = *std::move(caller)] {
    // Only a snapshot of a run the caller holds; anything else reads as missing.
    if (absl::Status may = controller_->MayReadSnapshot(caller, request->snapshot_id());
        !may.ok()) {
      reactor->Finish(ToGrpc(may));
      return;
    }
    absl::StatusOr<std::string> manifest = query_->Manifest(request->snapshot_id());
    if (manifest.ok()) {
      response->set_manifest(std::move(*manifest));
    }
    reactor->Finish(ToGrpc(manifest.status()));
  });
  return reactor;
}

grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* AgentLinkService::FetchBlobs(
    grpc::CallbackServerContext* ctx, const tae::v1::FetchBlobsRequest* request) {
  std::optional<std::string> caller = Caller(ctx);
  if (!caller.has_value()) {
    return RejectedBlobFetch(
        grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad agent credential"));
  }
  // Only the blobs of the snapshots (or checkpoints) of runs the caller holds.
  BlobFetchGate gate = [this, request, caller = *caller](std::function<void(grpc::Status)> answer) {
    boost::asio::post(*core_, [this, request, caller, answer = std::move(answer)] {
      const std::vector<std::string> hashes(request->hashes().begin(), request->hashes().end());
      answer(ToGrpc(controller_->MayFetchBlobs(caller, request->checkpoints(), hashes)));
    });
  };
  // Identity for the life of the call, as on a Connect stream: a fetch of many blobs stops at
  // the next chunk once the credential is revoked or replaced, or past the stream lifetime.
  constexpr std::string_view kPrefix = "Bearer ";
  BlobFetchCheck check = [credentials = credentials_, caller = *caller,
                          presented = std::string(Authorization(ctx).substr(kPrefix.size())),
                          controller = controller_, opened_at = controller_->Now()] {
    if (credentials->Authenticate(presented) != std::optional<std::string>(caller)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "the agent's credential is no longer valid (revoked or replaced)");
    }
    if (controller->Now() - opened_at > tae::v1::kTaedStreamLifetimeS) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "the fetch reached the stream lifetime; fetch the rest again");
    }
    return grpc::Status::OK;
  };
  return NewBlobFetch(request->checkpoints() ? checkpoint_blobs_ : blobs_, request, gate,
                      std::move(check));
}

}  // namespace tae::rpc
