#pragma once

// The agent processes taed starts and keeps alive (restart with backoff when one dies), stops on
// shutdown: N local tae-agent children (the local provider), one `ssh` session per host of the
// ssh provider (ssh_hosts.h), and the sessions other providers add and remove while taed runs
// (the gcloud-tpu provider: one `gcloud ... tpu-vm ssh` per worker of a READY VM; session.h).
// Runs on the core io_context.

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/signal_set.hpp"
#include "server/provider/provider_log.h"
#include "server/provider/session.h"
#include "server/provider/ssh_hosts.h"

namespace tae::provider {

struct LocalOptions {
  int agents = 1;
  int slots = 1;             // per agent
  std::string agent_binary;  // path of tae-agent
  std::string taed_address;  // host:port of the agent listener
  std::string token;         // passed in the environment, never on the command line
  std::string work_root;     // each agent works in work_root/<id>
  std::string log_dir;       // each agent logs to log_dir/<id>.log
  std::vector<SshHost> ssh_hosts;
  std::string tunnel_target;   // loopback host:port the ssh agents' tunnels lead to
  ProviderLog* log = nullptr;  // set: starts, exits and restarts are recorded there (core thread)
  // Set: the local agents are one slice of this name (labels slice=NAME, worker=0..agents-1), so
  // a resources.hosts = N study can be tried on one machine.
  std::string slice;
  // Set: each agent started gets its own credential from this (taed's controller, on the core)
  // instead of the shared token, minted afresh at every start (docs/security.md). An error
  // (a revoked id) leaves the agent unstarted until its next restart attempt.
  // `labels`: what the agent's --labels give it, whose placement labels its credential holds.
  std::function<absl::StatusOr<std::string>(const std::string& agent_id,
                                            const std::map<std::string, std::string>& labels)>
      credential;
};

class LocalProvider {
 public:
  LocalProvider(boost::asio::io_context* io, LocalOptions options);
  ~LocalProvider();

  absl::Status Start();
  // On the core thread. Starts `session` (its stdin gets the token) and keeps it alive until
  // RemoveSession. A session with the same id that is still being removed may overlap briefly.
  void AddSession(AgentSession session);
  // On the core thread. Sends `stop` to the session's agent, then SIGTERM to the session's
  // process group after grace_ms if it is still there; it is not restarted.
  void RemoveSession(const std::string& id, int grace_ms = 10000);
  // On the core thread: no more restarts, no more reaping by the SIGCHLD handler.
  void PrepareStop();
  // SIGTERM to every agent, then SIGKILL after grace_ms; waits for them. After PrepareStop() ran
  // on the core (or once the core has stopped), from any thread.
  void Stop(int grace_ms = 10000);

 private:
  struct Child {
    std::string id;
    int worker = 0;        // a local agent's index
    bool session = false;  // an AgentSession (ssh, gcloud-tpu), else a local tae-agent
    AgentSession command;  // session: what to run
    pid_t pid = 0;
    int stdin_fd = -1;  // session: its stdin (token, then `stop`; closing it abandons)
    int restarts = 0;
    bool removed = false;  // RemoveSession: forgotten once it exits, never restarted
  };
  using Serial = uint64_t;  // children by serial: restart timers outlive removed children
  void Add(Child child);
  absl::Status Spawn(Child* child);
  absl::Status SpawnSession(Child* child, const std::string& key);
  // What the agent authenticates with: its minted credential, or the shared token.
  absl::StatusOr<std::string> KeyFor(const Child& child);
  // The labels the agent is started with.
  std::map<std::string, std::string> LabelsOf(const Child& child) const;
  void CloseStdin(Child* child);
  void Record(const Child& child, const std::string& event, const std::string& detail);
  void WatchChildren();
  void OnExit(Serial serial, int status);

  boost::asio::io_context* io_;
  LocalOptions options_;
  boost::asio::signal_set sigchld_;
  std::map<Serial, Child> children_;
  Serial next_serial_ = 1;
  bool started_ = false;
  bool stopping_ = false;
};

}  // namespace tae::provider
