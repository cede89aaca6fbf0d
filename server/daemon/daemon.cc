#include "server/daemon/daemon.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/signal_set.hpp"
#include "common/cli/paths.h"
#include "common/fs/fs.h"
#include "common/process/tool.h"
#include "common/status/macros.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "proto/tae/v1/limits.h"
#include "spdlog/spdlog.h"

namespace tae::daemon {
namespace {

// The address local programs dial to reach a listener on `listen` that got `port`: a wildcard
// host (0.0.0.0, [::], none) becomes 127.0.0.1.
std::string DialAddress(const std::string& listen, int port) {
  size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "*") {
    host = "127.0.0.1";
  }
  return absl::StrCat(host, ":", port);
}

std::string AgentLinkSecurity(const tls::ServerFiles& files) {
  if (!files.enabled()) {
    return "plaintext, loopback only";
  }
  return files.client_ca.empty() ? "TLS" : "TLS, agent certificates required";
}

}  // namespace

static absl::StatusOr<std::string> ReadConfigFile(const std::string& path,
                                                  const std::string& what) {
  absl::StatusOr<std::string> text = fs::ReadFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat(what, path, ": cannot be read"));
  }
  return text;
}

// A provider's file: `flag_path` when set (it must then be readable), else $TAE_HOME/`name` when
// it exists; nothing when neither.
static absl::StatusOr<std::optional<std::pair<std::string, std::string>>> ProviderFile(
    const std::string& flag_path, const Config& config, const char* name, const char* what) {
  std::string path = flag_path;
  if (path.empty()) {
    path = absl::StrCat(config.home, "/", name);
    if (access(path.c_str(), F_OK) != 0) {
      return std::nullopt;
    }
  }
  ASSIGN_OR_RETURN(std::string text, ReadConfigFile(path, what));
  return std::make_pair(path, std::move(text));
}

static absl::StatusOr<std::vector<provider::TpuPool>> LoadTpuPools(const Config& config) {
  ASSIGN_OR_RETURN(auto file, ProviderFile(config.tpu_pools_path, config, "tpu-pools.toml", ""));
  if (!file.has_value()) {
    return std::vector<provider::TpuPool>{};
  }
  return provider::ParseTpuPools(file->second, file->first, config.agent_binary);
}

static absl::StatusOr<std::vector<provider::GkePool>> LoadGkePools(const Config& config) {
  ASSIGN_OR_RETURN(
      auto file, ProviderFile(config.gke_pools_path, config, "gke-pools.toml", "gke pools file "));
  if (!file.has_value()) {
    return std::vector<provider::GkePool>{};
  }
  return provider::ParseGkePools(file->second, file->first);
}

static absl::StatusOr<std::vector<provider::SshHost>> LoadSshHosts(const Config& config) {
  ASSIGN_OR_RETURN(
      auto file, ProviderFile(config.ssh_hosts_path, config, "ssh-hosts.toml", "ssh hosts file "));
  if (!file.has_value()) {
    return std::vector<provider::SshHost>{};
  }
  return provider::ParseSshHosts(file->second, file->first, config.agent_binary);
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const Config& config) {
  std::unique_ptr<Daemon> daemon(new Daemon(config));
  RETURN_IF_ERROR(daemon->Init());
  return daemon;
}

std::string Daemon::control_address() const {
  return absl::StrCat("unix:", config_.home, "/taed.sock");
}

absl::Status Daemon::Init() {
  // Beyond loopback an agent link needs both the token (checked on every call) and TLS.
  std::shared_ptr<grpc::ServerCredentials> agent_credentials = grpc::InsecureServerCredentials();
  if (config_.tls.enabled()) {
    ASSIGN_OR_RETURN(agent_credentials, tls::LoadServerCredentials(config_.tls));
  } else if (!tls::IsLoopback(config_.agent_listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--agent-listen ", config_.agent_listen,
        " is not a loopback address, and agents beyond loopback need TLS: start taed with "
        "--tls-cert FILE --tls-key FILE (and --tls-client-ca FILE to require agent "
        "certificates); deploy/make-certs.sh makes them, docs/security.md has the steps"));
  }
  if (!config_.http_listen.empty() && config_.http_listen != "off" &&
      !tls::IsLoopback(config_.http_listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http ", config_.http_listen,
        ": the dashboard listens on loopback only (127.0.0.1:PORT); reach it from elsewhere "
        "through an ssh tunnel (ssh -L PORT:127.0.0.1:PORT host)"));
  }
  if (config_.agent_binary.empty()) {
    config_.agent_binary = cli::ProgramDir() + "/tae-agent";
  }
  ASSIGN_OR_RETURN(ssh_hosts_, LoadSshHosts(config_));
  ASSIGN_OR_RETURN(tpu_pools_, LoadTpuPools(config_));
  std::string gcloud;
  if (!tpu_pools_.empty()) {
    gcloud = process::FindOnPath("gcloud");
    if (gcloud.empty()) {
      return absl::FailedPreconditionError(
          "TPU pools are configured but gcloud is not on PATH: install the Google Cloud CLI "
          "(https://cloud.google.com/sdk/docs/install), then `gcloud auth login`");
    }
  }
  ASSIGN_OR_RETURN(gke_pools_, LoadGkePools(config_));
  std::string kubectl;
  if (!gke_pools_.empty()) {
    kubectl = process::FindOnPath("kubectl");
    if (kubectl.empty()) {
      return absl::FailedPreconditionError(
          "GKE pools are configured but kubectl is not on PATH: apt-get install "
          "kubernetes-client (or the Google Cloud CLI's kubectl), then `gcloud container "
          "clusters get-credentials CLUSTER`; `taectl doctor` checks the rest");
    }
    for (const provider::GkePool& gke : gke_pools_) {
      for (const provider::TpuPool& tpu : tpu_pools_) {
        if (gke.name == tpu.name) {
          return absl::InvalidArgumentError(absl::StrCat(
              "pool ", gke.name, " is both a TPU pool and a GKE pool: give one another name"));
        }
      }
    }
  }
  RETURN_IF_ERROR(EnsurePrivateDir(config_.home));
  ASSIGN_OR_RETURN(HomeLock lock, HomeLock::Acquire(config_.home));
  lock_.emplace(std::move(lock));
  RETURN_IF_ERROR(EnsurePrivateDir(config_.home + "/logs"));
  RETURN_IF_ERROR(EnsurePrivateDir(config_.home + "/agents"));
  ASSIGN_OR_RETURN(store_, store::Store::Open(config_.home + "/tae.db"));
  RETURN_IF_ERROR(store_->db()->CheckpointInBackground());
  query_ = std::make_unique<query::Query>(store_.get());
  ASSIGN_OR_RETURN(blobs_, blobs::BlobWorker::Start(config_.home + "/blobs"));
  // Checkpoint uploads are answered the same whether a blob is stored or not (docs/security.md).
  ASSIGN_OR_RETURN(checkpoint_blobs_, blobs::BlobWorker::Start(config_.home + "/checkpoints",
                                                               /*answer_as_missing=*/true));
  ASSIGN_OR_RETURN(std::string token, LoadOrCreateToken(config_.home));
  controller::Options options;
  options.agent_grace_s = config_.agent_grace_s;
  options.retry_backoff_s = config_.retry_backoff_s;
  options.agent_timeout_s = config_.agent_timeout_s;
  options.max_checkpoint_bytes = config_.max_checkpoint_bytes;
  ASSIGN_OR_RETURN(std::vector<model::CredentialRecord> credentials, store_->ListCredentials());
  credentials_.Load(credentials);
  options.credentials = &credentials_;
  if (!tpu_pools_.empty()) {
    for (const provider::TpuPool& pool : tpu_pools_) {
      options.demand_pools.push_back({pool.name, pool.labels});
    }
    options.demand = &demand_;
  }
  for (const provider::GkePool& pool : gke_pools_) {
    options.demand_pools.push_back({pool.name, pool.labels});
    options.demand = &demand_;
  }
  controller_ = std::make_unique<controller::Controller>(&core_, store_.get(), options);
  // Uploads a crash interrupted were never offered. Their blobs, and those of uploads no commit
  // followed (their grants died with the last taed), are removed before any agent can upload:
  // every checkpoint blob no row names.
  ASSIGN_OR_RETURN(int incomplete, store_->DeleteIncompleteCheckpoints());
  if (incomplete > 0) {
    spdlog::info("dropped {} checkpoints whose upload a restart interrupted", incomplete);
  }
  ASSIGN_OR_RETURN(std::set<std::string> named, store_->CheckpointBlobs());
  checkpoint_blobs_->Post([named = std::move(named)](blobs::BlobStore& store) {
    absl::StatusOr<blobs::BlobStore::Removed> removed = store.RemoveAllBut(named);
    if (!removed.ok()) {
      spdlog::warn("checkpoint blobs no checkpoint names: {}", removed.status().ToString());
    } else if (removed->blobs > 0) {
      spdlog::info(
          "removed {} checkpoint blobs ({} bytes) that no checkpoint names (uploads "
          "that an earlier taed took but no commit followed)",
          removed->blobs, removed->bytes);
    }
  });
  RETURN_IF_ERROR(StartServers(token, std::move(agent_credentials)));
  reclaim_timer_ = std::make_unique<boost::asio::steady_timer>(core_);
  ScheduleReclaim();

  auto signals = std::make_shared<boost::asio::signal_set>(core_, SIGINT, SIGTERM);
  signals->async_wait([this, signals](const boost::system::error_code& error, int signo) {
    if (!error) {
      spdlog::info("signal {}: shutting down", signo);
      RequestShutdown();
    }
  });
  boost::asio::post(core_, [this] { controller_->Recover(); });
  log_rotation_ = std::make_unique<log::StderrRotation>(&core_);
  core_thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(core_);
    core_.run();
  });
  RETURN_IF_ERROR(StartHttp());

  // Where agents on this machine, and the tunnels of agents elsewhere, reach taed.
  const std::string loopback = local_agent_port_ != 0
                                   ? absl::StrCat("127.0.0.1:", local_agent_port_)
                                   : DialAddress(config_.agent_listen, agent_port_);
  {
    // The agents taed starts die with it (die_with_parent), so nothing that should still use a
    // credential an earlier taed minted for one holds it: each agent started now gets a fresh one.
    std::promise<void> retired;
    boost::asio::post(core_, [this, &retired] {
      controller_->RetireCredentials("provider", {}, "minted by an earlier start of taed");
      retired.set_value();
    });
    retired.get_future().wait();
  }
  if (config_.local_agents > 0 || !ssh_hosts_.empty() || !tpu_pools_.empty()) {
    provider::LocalOptions local{
        config_.local_agents,
        config_.slots,
        config_.agent_binary,
        loopback,
        token,
        config_.home + "/agents",
        config_.home + "/logs",
        ssh_hosts_,
        loopback,
        controller_->provider_log(),
        config_.local_slice,
        [this](const std::string& id, const std::map<std::string, std::string>& labels) {
          return controller_->MintCredential(id, "provider", registry::PlacementOf(labels));
        }};
    provider_ = std::make_unique<provider::LocalProvider>(&core_, local);
    std::promise<absl::Status> started;
    boost::asio::post(core_, [this, &started] { started.set_value(provider_->Start()); });
    RETURN_IF_ERROR(started.get_future().get());
  }
  if (!tpu_pools_.empty()) {
    provider::TpuProviderOptions tpu;
    tpu.pools = tpu_pools_;
    tpu.gcloud = gcloud;
    tpu.poll_s = config_.tpu_poll_s;
    // The controller publishes the demand on the core; the provider's thread reads the latest
    // without waiting. Nothing from the core for 30 s (six liveness checks): the round is skipped.
    tpu.demand = [this]() { return demand_.Latest(std::chrono::seconds(30)); };
    tpu.vms = [this](std::string pool, std::vector<provider::CloudVm> vms) {
      boost::asio::post(core_, [this, pool = std::move(pool), vms = std::move(vms)]() mutable {
        controller_->provider_log()->SetVms(pool, std::move(vms));
      });
    };
    tpu.log = [this](std::string subject, std::string event, std::string detail) {
      boost::asio::post(core_, [this, subject = std::move(subject), event = std::move(event),
                                detail = std::move(detail)]() mutable {
        controller_->provider_log()->Add("gcloud-tpu", std::move(subject), std::move(event),
                                         std::move(detail));
      });
    };
    // Agents on the workers: gcloud ssh sessions under a HOME of taed's own (its ssh key and the
    // pinned host keys), gcloud's configuration as it was; LocalProvider supervises them.
    tpu.ssh_home = config_.home + "/tpu-ssh";
    RETURN_IF_ERROR(EnsurePrivateDir(tpu.ssh_home));
    if (const char* cloudsdk = getenv("CLOUDSDK_CONFIG"); cloudsdk != nullptr && *cloudsdk) {
      tpu.cloudsdk_config = cloudsdk;
    } else if (const char* home = getenv("HOME"); home != nullptr && *home) {
      tpu.cloudsdk_config = absl::StrCat(home, "/.config/gcloud");
    }
    tpu.tunnel_target = loopback;
    tpu.ssh_keygen = process::FindOnPath("ssh-keygen");
    tpu.start_sessions = [this](std::vector<provider::AgentSession> sessions) {
      boost::asio::post(core_, [this, sessions = std::move(sessions)]() mutable {
        for (provider::AgentSession& session : sessions) {
          provider_->AddSession(std::move(session));
        }
      });
    };
    tpu.stop_sessions = [this](std::vector<std::string> ids) {
      boost::asio::post(core_, [this, ids = std::move(ids)] {
        for (const std::string& id : ids) {
          provider_->RemoveSession(id);
        }
      });
    };
    tpu_provider_ = std::make_unique<provider::TpuProvider>(std::move(tpu));
    tpu_provider_->Start();
    spdlog::info("gcloud-tpu provider: {} pool(s), gcloud {}", tpu_pools_.size(), gcloud);
  }
  if (!gke_pools_.empty()) {
    StartGkeProvider(kubectl);
  }
  spdlog::info(
      "taed ready: control {}, agents on {} port {} ({}){}, data {}", control_address(),
      config_.agent_listen, agent_port_, AgentLinkSecurity(config_.tls),
      local_agent_port_ == 0
          ? ""
          : absl::StrCat(", local agents on 127.0.0.1:", local_agent_port_, " (plaintext)"),
      config_.home);
  return absl::OkStatus();
}

void Daemon::StartGkeProvider(const std::string& kubectl) {
  provider::GkeProviderOptions gke;
  gke.pools = gke_pools_;
  gke.kubectl = kubectl;
  gke.poll_s = config_.tpu_poll_s;
  gke.demand = [this]() { return demand_.Latest(std::chrono::seconds(30)); };
  gke.slices = [this](std::string pool, std::vector<provider::CloudVm> slices) {
    boost::asio::post(core_, [this, pool = std::move(pool), slices = std::move(slices)]() mutable {
      controller_->SetPoolSlices(pool, std::move(slices));
    });
  };
  gke.log = [this](std::string subject, std::string event, std::string detail) {
    boost::asio::post(core_, [this, subject = std::move(subject), event = std::move(event),
                              detail = std::move(detail)]() mutable {
      controller_->provider_log()->Add("gke", std::move(subject), std::move(event),
                                       std::move(detail));
    });
  };
  // Credentials are minted on the core (the store and the credential table live there); the
  // provider's thread waits for them, never for long.
  gke.mint = [this](std::vector<std::string> ids,
                    std::vector<std::map<std::string, std::string>> labels)
      -> absl::StatusOr<std::vector<std::string>> {
    using Minted = absl::StatusOr<std::vector<std::string>>;
    auto promise = std::make_shared<std::promise<Minted>>();
    std::future<Minted> future = promise->get_future();
    if (labels.size() != ids.size()) {
      return absl::InvalidArgumentError("one set of labels per agent id");
    }
    boost::asio::post(core_, [this, ids = std::move(ids), labels = std::move(labels), promise] {
      std::vector<std::string> credentials;
      for (size_t i = 0; i < ids.size(); ++i) {
        const std::string& id = ids[i];
        absl::StatusOr<std::string> credential =
            controller_->MintCredential(id, "gke", registry::PlacementOf(labels[i]));
        if (!credential.ok()) {
          promise->set_value(credential.status());
          return;
        }
        credentials.push_back(*std::move(credential));
      }
      promise->set_value(std::move(credentials));
    });
    if (future.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      return absl::DeadlineExceededError("taed's core did not answer within 30 s");
    }
    return future.get();
  };
  // A deleted slice's credentials die with it (its Secret is gone, but a job on it may have
  // kept a copy).
  gke.retire = [this](std::vector<std::string> ids) {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> future = done->get_future();
    boost::asio::post(core_, [this, ids = std::move(ids), done] {
      controller_->RetireCredentials("gke", ids, "its gke slice was deleted");
      done->set_value();
    });
    if (future.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      spdlog::warn("gke: taed's core did not retire a deleted slice's credentials within 30 s");
    }
  };
  gke_provider_ = std::make_unique<provider::GkeProvider>(std::move(gke));
  gke_provider_->Start();
  spdlog::info("gke provider: {} pool(s), kubectl {}", gke_pools_.size(), kubectl);
}

absl::Status Daemon::StartHttp() {
  if (config_.http_listen == "off") {
    return absl::OkStatus();
  }
  const std::string addr_path = config_.home + "/http.addr";
  std::vector<std::string> candidates;
  if (!config_.http_listen.empty()) {
    candidates.push_back(config_.http_listen);
  } else {
    // The port of the last start, so a bookmarked dashboard keeps working; else a free one.
    if (absl::StatusOr<std::string> last = fs::ReadFile(addr_path); last.ok()) {
      std::string address(absl::StripAsciiWhitespace(*last));
      if (tls::IsLoopback(address)) {
        candidates.push_back(address);
      }
    }
    candidates.push_back("127.0.0.1:0");
  }
  ASSIGN_OR_RETURN(std::string token, LoadOrCreateToken(config_.home, "http.token"));
  http_api_ = std::make_unique<http::Api>(&core_, controller_.get(), query_.get());
  http_api_->Start();
  absl::Status last_error;
  for (const std::string& listen : candidates) {
    absl::StatusOr<std::unique_ptr<http::Server>> server =
        http::Server::Start({listen, token, http_api_.get()});
    if (server.ok()) {
      http_server_ = *std::move(server);
      break;
    }
    last_error = server.status();
    if (server.status().code() == absl::StatusCode::kInvalidArgument) {
      return server.status();
    }
  }
  if (http_server_ == nullptr) {
    return last_error;
  }
  spdlog::info("dashboard on http://127.0.0.1:{}/ (taectl ui prints the sign-in URL)",
               http_server_->port());
  return fs::WriteFileAtomically(addr_path, absl::StrCat("127.0.0.1:", http_server_->port(), "\n"),
                                 {0600, fs::Durability::kFile});
}

absl::Status Daemon::StartServers(const std::string& token,
                                  std::shared_ptr<grpc::ServerCredentials> agent_credentials) {
  std::string socket_path = config_.home + "/taed.sock";
  unlink(socket_path.c_str());  // a stale socket of a dead taed; the lock proves none is running
  control_service_ = std::make_unique<rpc::ControlService>(
      &core_, controller_.get(), query_.get(), blobs_.get(), checkpoint_blobs_.get(),
      [this](bool delete_vms) { RequestShutdown(delete_vms); });
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

  agent_service_ = std::make_unique<rpc::AgentLinkService>(
      &core_, controller_.get(), query_.get(), blobs_.get(), checkpoint_blobs_.get(), token,
      &credentials_, config_.upload_grant_s);
  grpc::ServerBuilder agent_builder;
  agent_builder.AddListeningPort(config_.agent_listen, std::move(agent_credentials), &agent_port_);
  const bool loopback_agents =
      config_.local_agents > 0 || !ssh_hosts_.empty() || !tpu_pools_.empty();
  if (config_.tls.enabled() && loopback_agents) {
    // Local agents (and ssh and TPU agents, through their tunnels) dial loopback without TLS
    // (docs/security.md): a second, plaintext port of the same service, on 127.0.0.1 only; the
    // token is checked there as everywhere.
    agent_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                                   &local_agent_port_);
  }
  agent_builder.RegisterService(agent_service_.get());
  agent_builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  agent_builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  agent_builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  agent_builder.SetMaxReceiveMessageSize(static_cast<int>(tae::v1::kTaedMaxMessageBytes));
  agent_server_ = agent_builder.BuildAndStart();
  if (agent_server_ == nullptr || agent_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.agent_listen));
  }
  if (config_.tls.enabled() && loopback_agents && local_agent_port_ == 0) {
    return absl::UnavailableError("cannot listen on 127.0.0.1 for the local agents");
  }
  // Where a program on this host dials the agent listener (the --agent-listen port).
  return fs::WriteFileAtomically(config_.home + "/agent.addr",
                                 DialAddress(config_.agent_listen, agent_port_) + "\n",
                                 {0600, fs::Durability::kFile});
}

void Daemon::RequestShutdown(bool delete_vms) {
  absl::MutexLock lock(&mu_);
  shutdown_requested_ = true;
  delete_vms_ = delete_vms_ || delete_vms;
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
  if (tpu_provider_ != nullptr) {
    // While the core still runs (the provider may be waiting for its answer). VMs stay.
    tpu_provider_->Stop();
    bool delete_vms = false;
    {
      absl::MutexLock lock(&mu_);
      delete_vms = delete_vms_;
    }
    if (delete_vms) {
      // Before the agents stop: theirs go with the VMs (their sessions end on their own).
      spdlog::info("gcloud-tpu provider: deleting every pool's VMs (taectl down --delete-vms)");
      spdlog::info("gcloud-tpu provider: {} VM(s) or request(s) deleted",
                   tpu_provider_->DeleteAll());
    } else {
      spdlog::info(
          "gcloud-tpu provider stopped; its VMs are left running (taectl down --delete-vms, or "
          "deploy/tpu/teardown.sh)");
    }
  }
  if (gke_provider_ != nullptr) {
    // A slice's agents without taed only hold the team's quota: every slice goes, always
    // (docs/providers.md, "gke"). Before the local agents stop; the pods' agents stop with them.
    gke_provider_->Stop();
    spdlog::info("gke provider: giving back every pool's slices");
    spdlog::info("gke provider: {} slice(s) deleted", gke_provider_->DeleteAll());
  }
  if (provider_ != nullptr) {
    std::promise<void> prepared;
    boost::asio::post(core_, [this, &prepared] {
      provider_->PrepareStop();
      prepared.set_value();
    });
    prepared.get_future().wait();
    provider_->Stop();  // agents stop their jobs and exit
    // Their credentials die with them (a job may have kept a copy of its agent's).
    std::promise<void> retired;
    boost::asio::post(core_, [this, &retired] {
      controller_->RetireCredentials("provider", {}, "taed stopped its agents");
      retired.set_value();
    });
    retired.get_future().wait();
  }
  if (http_server_ != nullptr) {
    http_server_->Stop();  // its streams end; nothing more is asked of the core
  }
  if (http_api_ != nullptr) {
    http_api_->Stop();
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
  log_rotation_.reset();  // its timer, once nothing runs on the core
  reclaim_timer_.reset();
  if (checkpoint_blobs_ != nullptr) {
    checkpoint_blobs_->Stop();
  }
  if (blobs_ != nullptr) {
    blobs_->Stop();
  }
  if (control_server_ != nullptr) {
    unlink((config_.home + "/taed.sock").c_str());  // ours: only a lock holder gets this far
    spdlog::info("taed stopped");
  }
}

void Daemon::ScheduleReclaim() {
  const double every_s = std::clamp(config_.upload_grant_s / 4, 0.25, 60.0);
  reclaim_timer_->expires_after(std::chrono::milliseconds(static_cast<int64_t>(every_s * 1000)));
  reclaim_timer_->async_wait([this](const boost::system::error_code& error) {
    if (error) {
      return;  // cancelled: taed is stopping
    }
    agent_service_->ReclaimUploads();
    ScheduleReclaim();
  });
}

Daemon::~Daemon() { Stop(); }

}  // namespace tae::daemon
