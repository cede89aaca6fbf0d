#pragma once

// Link: the agent's connection to taed. One thread dials taed's AgentLink.Connect with jittered
// exponential backoff (500 ms -> 30 s, reset once taed answers), reads messages until the stream
// breaks, and dials again; a second thread writes queued messages, one at a time. Callbacks run
// on the link thread: they must only post work to the agent's io_context.
//
// DialTaed is the one way the agent opens a channel to taed (this link and the stager's fetches):
// TLS when configured (docs/security.md), plaintext otherwise.

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/tls/tls.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/channel_arguments.h"
#include "tae/v1/agent_link.grpc.pb.h"

namespace tae::agent {

// A channel to taed's agent listener at target with the credentials of tls (and its server-name
// override) and the caller's channel args.
std::shared_ptr<grpc::Channel> DialTaed(const std::string& target, const tls::ClientConfig& tls,
                                        grpc::ChannelArguments args);

struct LinkCallbacks {
  std::function<void()> on_connected;  // a new stream is open: send Register first
  std::function<void(tae::v1::TaedMessage)> on_message;
  std::function<void(const std::string& why)> on_disconnected;
};

class Link {
 public:
  Link(std::string target, std::string token, LinkCallbacks callbacks, tls::ClientConfig tls = {});
  ~Link();

  void Start();
  void Stop();
  // Queues a message for the current stream. Returns false when there is none.
  bool Send(tae::v1::AgentMessage message);

 private:
  void Run();
  void RunStream(tae::v1::AgentLink::Stub* stub);
  void WriteLoop(grpc::ClientReaderWriter<tae::v1::AgentMessage, tae::v1::TaedMessage>* stream,
                 grpc::ClientContext* ctx);
  bool SleepBackoff(int attempt);
  bool WriterShouldWake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string target_;
  std::string token_;
  LinkCallbacks callbacks_;
  tls::ClientConfig tls_;
  std::thread thread_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_open_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<tae::v1::AgentMessage> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace tae::agent
