#include "agent/link/link.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "spdlog/spdlog.h"

namespace tae::agent {

std::shared_ptr<grpc::Channel> DialTaed(const std::string& target, const tls::ClientConfig& tls,
                                        grpc::ChannelArguments args) {
  if (!tls.server_name.empty()) {
    args.SetSslTargetNameOverride(tls.server_name);  // GRPC_SSL_TARGET_NAME_OVERRIDE_ARG
  }
  return grpc::CreateCustomChannel(target, tls::ChannelCredentials(tls), args);
}

Link::Link(std::string target, std::string token, LinkCallbacks callbacks, tls::ClientConfig tls)
    : target_(std::move(target)),
      token_(std::move(token)),
      callbacks_(std::move(callbacks)),
      tls_(std::move(tls)) {}

Link::~Link() { Stop(); }

void Link::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Link::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (ctx_ != nullptr) {
      ctx_->TryCancel();
    }
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

bool Link::Send(tae::v1::AgentMessage message) {
  absl::MutexLock lock(&mu_);
  if (!stream_open_) {
    return false;
  }
  queue_.push_back(std::move(message));
  return true;
}

bool Link::SleepBackoff(int attempt) {
  static thread_local std::mt19937 rng(std::random_device{}());
  double cap_ms = std::min(30000.0, 500.0 * (1 << std::min(attempt, 6)));
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  auto delay = std::chrono::milliseconds(static_cast<int64_t>(cap_ms * jitter(rng)));
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(delay));
  return !stopping_;
}

void Link::Run() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetMaxReceiveMessageSize(64 << 20);
  std::shared_ptr<grpc::Channel> channel = DialTaed(target_, tls_, args);
  std::unique_ptr<tae::v1::AgentLink::Stub> stub = tae::v1::AgentLink::NewStub(channel);
  int attempt = 0;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) {
        return;
      }
    }
    auto started = std::chrono::steady_clock::now();
    RunStream(stub.get());
    // A stream that lived a while was a success: start the backoff again from the bottom.
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(5)) {
      attempt = 0;
    }
    if (!SleepBackoff(attempt++)) {
      return;
    }
  }
}

void Link::RunStream(tae::v1::AgentLink::Stub* stub) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + token_);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      return;
    }
    ctx_ = &ctx;
  }
  std::unique_ptr<grpc::ClientReaderWriter<tae::v1::AgentMessage, tae::v1::TaedMessage>> stream =
      stub->Connect(&ctx);
  {
    absl::MutexLock lock(&mu_);
    queue_.clear();  // anything queued for an old stream is resent from the journal
    stream_open_ = true;
  }
  callbacks_.on_connected();
  std::thread writer([this, &stream, &ctx] { WriteLoop(stream.get(), &ctx); });
  tae::v1::TaedMessage message;
  while (stream->Read(&message)) {
    callbacks_.on_message(std::move(message));
    message.Clear();
  }
  {
    absl::MutexLock lock(&mu_);
    stream_open_ = false;
    queue_.clear();
    ctx_ = nullptr;
  }
  writer.join();
  grpc::Status status = stream->Finish();
  std::string why = status.ok()
                        ? "taed closed the stream"
                        : std::to_string(status.error_code()) + " " + status.error_message();
  callbacks_.on_disconnected(why);
}

bool Link::WriterShouldWake() const { return !stream_open_ || stopping_ || !queue_.empty(); }

void Link::WriteLoop(grpc::ClientReaderWriter<tae::v1::AgentMessage, tae::v1::TaedMessage>* stream,
                     grpc::ClientContext* ctx) {
  while (true) {
    tae::v1::AgentMessage message;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Link::WriterShouldWake));
      if (!stream_open_ || stopping_) {
        return;
      }
      message = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!stream->Write(message)) {
      ctx->TryCancel();  // unblocks the reader, which ends this stream
      return;
    }
  }
}

}  // namespace tae::agent
