// taed: the control-plane daemon. Parses config (defaults < TAE_* environment < flags), starts
// the daemon's object graph and waits for shutdown.

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/cli/flags.h"
#include "common/cli/paths.h"
#include "common/log/log.h"
#include "server/daemon/daemon.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  // A write to a pipe whose reader is gone (an ssh agent's session that just ended) must be an
  // EPIPE error, not the end of taed.
  signal(SIGPIPE, SIG_IGN);
  tae::daemon::Config config;
  config.home = tae::cli::TaeHome();
  config.agent_listen = tae::cli::EnvOr("TAE_AGENT_LISTEN", config.agent_listen);
  config.tls.cert = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_TLS_CERT", ""));
  config.tls.key = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_TLS_KEY", ""));
  config.tls.client_ca = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_TLS_CLIENT_CA", ""));
  if (!absl::SimpleAtoi(tae::cli::EnvOr("TAE_LOCAL_AGENTS", "1"), &config.local_agents) ||
      !absl::SimpleAtoi(tae::cli::EnvOr("TAE_SLOTS", "1"), &config.slots) ||
      !absl::SimpleAtod(tae::cli::EnvOr("TAE_AGENT_GRACE", "30"), &config.agent_grace_s) ||
      !absl::SimpleAtod(tae::cli::EnvOr("TAE_RETRY_BACKOFF", "10"), &config.retry_backoff_s) ||
      !absl::SimpleAtod(tae::cli::EnvOr("TAE_TPU_POLL", "10"), &config.tpu_poll_s) ||
      !absl::SimpleAtod(tae::cli::EnvOr("TAE_AGENT_TIMEOUT", "20"), &config.agent_timeout_s) ||
      !absl::SimpleAtod(tae::cli::EnvOr("TAE_UPLOAD_GRANT", "3600"), &config.upload_grant_s)) {
    std::fprintf(stderr,
                 "taed: TAE_LOCAL_AGENTS and TAE_SLOTS must be integers, TAE_AGENT_GRACE, "
                 "TAE_RETRY_BACKOFF, TAE_TPU_POLL, TAE_AGENT_TIMEOUT and TAE_UPLOAD_GRANT "
                 "numbers\n");
    return 2;
  }
  std::string log_level = "info";

  tae::cli::FlagSet flags(
      "usage: taed [flags]\n\n"
      "The TAE control-plane daemon: stores experiments, runs, metrics and logs in SQLite under\n"
      "--home, schedules runs onto agents and starts local agents. Usually started by\n"
      "`taectl up`.\n\n"
      "Agents authenticate with the token in $TAE_HOME/agent.token. Beyond loopback the agent\n"
      "listener also needs TLS: a non-loopback --agent-listen without --tls-cert and --tls-key\n"
      "is refused. deploy/make-certs.sh makes the certificates; docs/security.md has the steps.\n"
      "Local agents always dial loopback without TLS.\n\n"
      "The web dashboard listens on loopback (--http); the token in $TAE_HOME/http.token signs a\n"
      "browser in, and `taectl ui` prints the URL that carries it.\n\n"
      "Environment: TAE_HOME, TAE_AGENT_LISTEN, TAE_TLS_CERT, TAE_TLS_KEY, TAE_TLS_CLIENT_CA,\n"
      "TAE_LOCAL_AGENTS, TAE_SLOTS, TAE_AGENT_GRACE, TAE_RETRY_BACKOFF, TAE_AGENT_TIMEOUT,\n"
      "TAE_TPU_POLL (seconds between the TPU and GKE providers' rounds), "
      "TAE_MAX_CHECKPOINT_BYTES, TAE_UPLOAD_GRANT, TAE_HTTP, "
      "TAE_LOG_LEVEL.");
  flags.Path("home", &config.home, "data dir (database, socket, logs)");
  flags.String("agent-listen", &config.agent_listen,
               "agent link address host:port (beyond loopback only with --tls-cert/--tls-key)");
  flags.Path("tls-cert", &config.tls.cert,
             "PEM certificate chain of taed for the agent link (TAE_TLS_CERT)");
  flags.Path("tls-key", &config.tls.key,
             "PEM private key of --tls-cert, unencrypted (TAE_TLS_KEY)");
  flags.Path("tls-client-ca", &config.tls.client_ca,
             "PEM CA: agents must present a certificate it signed (mTLS; TAE_TLS_CLIENT_CA)");
  config.http_listen = tae::cli::EnvOr("TAE_HTTP", "");
  flags.String("http", &config.http_listen,
               "the web dashboard's loopback address HOST:PORT (default: the last start's port "
               "in $TAE_HOME/http.addr, else a free one; 'off': no dashboard; TAE_HTTP). "
               "`taectl ui` prints its sign-in URL");
  flags.Int("agents", &config.local_agents, "local agents to start");
  flags.Int("slots", &config.slots, "run slots per local agent");
  config.local_slice = tae::cli::EnvOr("TAE_SLICE", "");
  flags.String("slice", &config.local_slice,
               "the local agents form one slice of this name (labels slice=NAME, worker=0..N-1), "
               "so resources.hosts = N runs gang-scheduled on this machine (TAE_SLICE)");
  flags.Double("agent-grace", &config.agent_grace_s,
               "seconds a disconnected agent has to come back before its runs are requeued");
  flags.Double("retry-backoff", &config.retry_backoff_s,
               "seconds a run lost with its agent waits before its next attempt, doubling per "
               "attempt (at most 300)");
  flags.Path("agent-binary", &config.agent_binary, "path of tae-agent (default: next to taed)");
  if (!absl::SimpleAtoi(
          tae::cli::EnvOr("TAE_MAX_CHECKPOINT_BYTES", std::to_string(config.max_checkpoint_bytes)),
          &config.max_checkpoint_bytes)) {
    std::fprintf(stderr, "taed: TAE_MAX_CHECKPOINT_BYTES must be an integer (bytes)\n");
    return 2;
  }
  flags.Int("max-checkpoint-bytes", &config.max_checkpoint_bytes,
            "refuse checkpoints larger than this many bytes (0: no cap); the run's log says "
            "so (TAE_MAX_CHECKPOINT_BYTES; default 64 GiB)");
  flags.Double("upload-grant", &config.upload_grant_s,
               "seconds an agent's checkpoint upload stays open without a commit; then what it "
               "uploaded and no checkpoint names is removed (TAE_UPLOAD_GRANT; default 3600)");
  config.ssh_hosts_path = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_SSH_HOSTS", ""));
  config.tpu_pools_path = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_TPU_POOLS", ""));
  flags.Path("tpu-pools", &config.tpu_pools_path,
             "TOML list of Cloud TPU VM pools taed creates and deletes with gcloud "
             "(TAE_TPU_POOLS; default $TAE_HOME/tpu-pools.toml when it exists; "
             "docs/providers.md)");
  config.gke_pools_path = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_GKE_POOLS", ""));
  flags.Path("gke-pools", &config.gke_pools_path,
             "TOML list of GKE TPU pools: taed asks for slices as JobSets that Kueue admits, "
             "with kubectl (TAE_GKE_POOLS; default $TAE_HOME/gke-pools.toml when it exists; "
             "docs/providers.md)");
  flags.Path("ssh-hosts", &config.ssh_hosts_path,
             "TOML list of hosts whose agents taed starts over ssh (TAE_SSH_HOSTS; default "
             "$TAE_HOME/ssh-hosts.toml when it exists; docs/providers.md)");
  flags.String("log-level", &log_level, "trace, debug, info, warn or error");
  std::vector<std::string> positional;
  absl::Status parsed = flags.Parse({argv + 1, argv + argc}, &positional);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (!parsed.ok() || !positional.empty()) {
    std::fprintf(stderr, "taed: %s\n",
                 parsed.ok() ? "unexpected arguments" : std::string(parsed.message()).c_str());
    return 2;
  }
  if (!(config.upload_grant_s >= 1)) {
    std::fprintf(stderr, "taed: --upload-grant: %g: must be at least 1 (seconds)\n",
                 config.upload_grant_s);
    return 2;
  }
  tae::log::Setup("taed", log_level);
  absl::StatusOr<std::unique_ptr<tae::daemon::Daemon>> daemon = tae::daemon::Daemon::Start(config);
  if (!daemon.ok()) {
    spdlog::error("{}", std::string(daemon.status().message()));
    return 1;
  }
  (*daemon)->Wait();
  return 0;
}
