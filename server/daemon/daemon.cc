#include "server/daemon/daemon.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <future>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/signal_set.hpp"
#include "common/cli/paths.h"
#include "common/status/macros.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "spdlog/spdlog.h"

namespace tae::daemon {
namespace {

bool IsLoopback(const std::string& address) {
  return absl::StartsWith(address, "127.") || absl::StartsWith(address, "localhost:") ||
         absl::StartsWith(address, "[::1]:");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const Config& config) {
  std::unique_ptr<Daemon> daemon(new Daemon(config));
  RETURN_IF_ERROR(daemon->Init());
  return daemon;
}

std::string Daemon::control_address() const {
  return absl::StrCat("unix:", config_.home, "/taed.sock");
}

absl::Status Daemon::Init() {
  if (!IsLoopback(config_.agent_listen)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--agent-listen ", config_.agent_listen,
                     ": only loopback addresses are allowed until TLS is configured"));
  }
  if (config_.agent_binary.empty()) {
    config_.agent_binary = cli::ProgramDir() + "/tae-agent";
  }
  RETURN_IF_ERROR(EnsurePrivateDir(config_.home));
  ASSIGN_OR_RETURN(HomeLock lock, HomeLock::Acquire(config_.home));
  lock_.emplace(std::move(lock));
  RETURN_IF_ERROR(EnsurePrivateDir(config_.home + "/logs"));
  RETURN_IF_ERROR(EnsurePrivateDir(config_.home + "/agents"));
  ASSIGN_OR_RETURN(store_, store::Store::Open(config_.home + "/tae.db"));
  ASSIGN_OR_RETURN(blobs_, blobs::BlobWorker::Start(config_.home + "/blobs"));
  ASSIGN_OR_RETURN(std::string token, LoadOrCreateToken(config_.home));
  controller_ = std::make_unique<controller::Controller>(
      &core_, store_.get(),
      controller::Options{config_.agent_grace_s, config_.retry_backoff_s, 300,
                          config_.agent_timeout_s});
  RETURN_IF_ERROR(StartServers(token));

  auto signals = std::make_shared<boost::asio::signal_set>(core_, SIGINT, SIGTERM);
  signals->async_wait([this, signals](const boost::system::error_code& error, int signo) {
    if (!error) {
      spdlog::info("signal {}: shutting down", signo);
      RequestShutdown();
    }
  });
  boost::asio::post(core_, [this] { controller_->Recover(); });
  core_thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(core_);
    core_.run();
  });

  if (config_.local_agents > 0) {
    provider::LocalOptions local{config_.local_agents,
                                 config_.slots,
                                 config_.agent_binary,
                                 absl::StrCat("127.0.0.1:", agent_port_),
                                 token,
                                 config_.home + "/agents",
                                 config_.home + "/logs"};
    provider_ = std::make_unique<provider::LocalProvider>(&core_, local);
    std::promise<absl::Status> started;
    boost::asio::post(core_, [this, &started] { started.set_value(provider_->Start()); });
    RETURN_IF_ERROR(started.get_future().get());
  }
  spdlog::info("taed ready: control {}, agents 127.0.0.1:{}, data {}", control_address(),
               agent_port_, config_.home);
  return absl::OkStatus();
}

absl::Status Daemon::StartServers(const std::string& token) {
  std::string socket_path = config_.home + "/taed.sock";
  unlink(socket_path.c_str());  // a stale socket of a dead taed; the lock proves none is running
  control_service_ = std::make_unique<rpc::ControlService>(&core_, controller_.get(), blobs_.get(),
                                                           [this] { RequestShutdown(); });
  grpc::ServerBuilder control_builder;
  control_builder.AddListeningPort(control_address(), grpc::InsecureServerCredentials());
  control_builder.RegisterService(control_service_.get());
  control_builder.SetMaxReceiveMessageSize(16 << 20);  // PutBlobs carries up to 8 MiB
  control_server_ = control_builder.BuildAndStart();
  if (control_server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", control_address()));
  }
  if (chmod(socket_path.c_str(), 0600) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("chmod 0600 ", socket_path));
  }

  agent_service_ = std::make_unique<rpc::AgentLinkService>(&core_, controller_.get(), blobs_.get(), token);
  grpc::ServerBuilder agent_builder;
  agent_builder.AddListeningPort(config_.agent_listen, grpc::InsecureServerCredentials(),
                                 &agent_port_);
  agent_builder.RegisterService(agent_service_.get());
  agent_builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  agent_builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  agent_builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  agent_builder.SetMaxReceiveMessageSize(64 << 20);
  agent_server_ = agent_builder.BuildAndStart();
  if (agent_server_ == nullptr || agent_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.agent_listen));
  }
  return WriteFileAtomically(config_.home + "/agent.addr",
                             absl::StrCat("127.0.0.1:", agent_port_, "\n"), 0600);
}

void Daemon::RequestShutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_requested_ = true;
}

void Daemon::Wait() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&shutdown_requested_));
  }
  Stop();
}

void Daemon::Stop() {
  if (stopped_) {
    return;
  }
  stopped_ = true;
  if (provider_ != nullptr) {
    std::promise<void> prepared;
    boost::asio::post(core_, [this, &prepared] {
      provider_->PrepareStop();
      prepared.set_value();
    });
    prepared.get_future().wait();
    provider_->Stop();  // agents stop their jobs and exit
  }
  // Calls in flight get this long to finish; after it gRPC cancels them. Every call's work runs
  // on the core, which is still running here.
  auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
  if (control_server_ != nullptr) {
    spdlog::debug("stopping the control server");
    control_server_->Shutdown(deadline);
  }
  if (agent_server_ != nullptr) {
    spdlog::debug("stopping the agent server");
    agent_server_->Shutdown(deadline);
  }
  spdlog::debug("servers stopped");
  core_.stop();
  if (core_thread_.joinable()) {
    core_thread_.join();
  }
  if (blobs_ != nullptr) {
    blobs_->Stop();
  }
  if (control_server_ != nullptr) {
    unlink((config_.home + "/taed.sock").c_str());  // ours: only a lock holder gets this far
    spdlog::info("taed stopped");
  }
}

Daemon::~Daemon() { Stop(); }

}  // namespace tae::daemon
