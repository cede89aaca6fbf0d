#pragma once

// Daemon: wires taed's object graph (store, controller, the two gRPC servers, the local
// provider) exactly as main runs it, so tests build the same graph.

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "common/log/rotate.h"
#include "common/tls/tls.h"
#include "grpcpp/server.h"
#include "server/blobs/blob_worker.h"
#include "server/controller/controller.h"
#include "server/daemon/home.h"
#include "server/http/api.h"
#include "server/http/server.h"
#include "server/provider/gke_provider.h"
#include "server/provider/local_provider.h"
#include "server/provider/tpu_provider.h"
#include "server/rpc/agent_link_service.h"
#include "server/rpc/control_service.h"
#include "server/store/store.h"

namespace tae::daemon {

struct Config {
  std::string home;  // $TAE_HOME
  // Agent link listener; port 0 picks a free port. Beyond loopback only with TLS: a non-loopback
  // address without tls.cert and tls.key is refused (docs/security.md).
  std::string agent_listen = "127.0.0.1:0";
  tls::ServerFiles tls;  // set: the agent listener speaks TLS (mTLS with tls.client_ca)
  int local_agents = 1;
  int slots = 1;            // per local agent
  std::string local_slice;  // set: the local agents form one slice of this name (gang runs)
  double agent_grace_s = 30;
  double agent_timeout_s = 20;  // silent this long: disconnected
  double retry_backoff_s = 10;
  std::string agent_binary;  // tae-agent; default: next to taed
  // The ssh provider's hosts (server/provider/ssh_hosts.h); "": $TAE_HOME/ssh-hosts.toml if it
  // exists.
  std::string ssh_hosts_path;
  // The gcloud-tpu provider's pools (server/provider/tpu_pools.h); "": $TAE_HOME/tpu-pools.toml
  // if it exists.
  std::string tpu_pools_path;
  double tpu_poll_s = 10;  // between the providers' rounds of gcloud (and kubectl) calls
  // The gke provider's pools (server/provider/gke_pools.h); "": $TAE_HOME/gke-pools.toml if it
  // exists.
  std::string gke_pools_path;
  // The dashboard's listener (docs/dashboard.md): a loopback HOST:PORT; "" = 127.0.0.1 at the
  // port of the last start ($TAE_HOME/http.addr), else a free one; "off" = none.
  std::string http_listen;
  // A checkpoint larger than this is refused (the agent says so in the run's log); 0: no cap.
  int64_t max_checkpoint_bytes = int64_t{64} << 30;
  // How long an agent's checkpoint upload stays open without a commit; then its partial uploads
  // and the blobs it stored that no checkpoint names are removed (rpc::UploadGrants).
  double upload_grant_s = 3600;
};

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const Config& config);
  ~Daemon();

  // Blocks until RequestShutdown() (Shutdown RPC, SIGINT or SIGTERM), then stops everything.
  void Wait();
  void RequestShutdown(bool delete_vms = false);

  int agent_port() const { return agent_port_; }
  // The dashboard's port (0: off).
  int http_port() const { return http_server_ != nullptr ? http_server_->port() : 0; }
  // With TLS and local agents: the plaintext loopback port they dial (else 0).
  int local_agent_port() const { return local_agent_port_; }
  std::string control_address() const;

 private:
  explicit Daemon(Config config) : config_(std::move(config)) {}
  absl::Status Init();
  absl::Status StartHttp();
  void StartGkeProvider(const std::string& kubectl);
  absl::Status StartServers(const std::string& token,
                            std::shared_ptr<grpc::ServerCredentials> agent_credentials);
  void Stop();
  // Runs AgentLinkService::ReclaimUploads every so often, on the core.
  void ScheduleReclaim();

  Config config_;
  std::optional<HomeLock> lock_;
  boost::asio::io_context core_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<query::Query> query_;                  // reads over store_
  std::unique_ptr<blobs::BlobWorker> blobs_;             // code snapshots
  std::unique_ptr<blobs::BlobWorker> checkpoint_blobs_;  // checkpoints runs uploaded
  provider::DemandBoard demand_;           // the controller publishes, the TPU provider reads
  registry::CredentialTable credentials_;  // the agents' credentials (agent link, controller)
  std::unique_ptr<controller::Controller> controller_;
  std::unique_ptr<rpc::ControlService> control_service_;
  std::unique_ptr<rpc::AgentLinkService> agent_service_;
  std::unique_ptr<grpc::Server> control_server_;
  std::unique_ptr<grpc::Server> agent_server_;
  std::unique_ptr<http::Api> http_api_;
  std::unique_ptr<http::Server> http_server_;
  std::vector<provider::SshHost> ssh_hosts_;
  std::unique_ptr<provider::LocalProvider> provider_;
  std::vector<provider::TpuPool> tpu_pools_;
  std::unique_ptr<provider::TpuProvider> tpu_provider_;
  std::vector<provider::GkePool> gke_pools_;
  std::unique_ptr<provider::GkeProvider> gke_provider_;
  std::unique_ptr<log::StderrRotation> log_rotation_;         // taed.log by size, on the core
  std::unique_ptr<boost::asio::steady_timer> reclaim_timer_;  // AgentLinkService::ReclaimUploads
  std::thread core_thread_;
  int agent_port_ = 0;
  int local_agent_port_ = 0;

  absl::Mutex mu_;
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool delete_vms_ ABSL_GUARDED_BY(mu_) = false;  // taectl down --delete-vms
  bool stopped_ = false;
};

}  // namespace tae::daemon
