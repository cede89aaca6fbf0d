#pragma once

// The local provider: starts N tae-agent children on this machine and keeps them alive
// (restart with backoff when one dies), stops them on shutdown. Runs on the core io_context.

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/signal_set.hpp"

namespace tae::provider {

struct LocalOptions {
  int agents = 1;
  int slots = 1;             // per agent
  std::string agent_binary;  // path of tae-agent
  std::string taed_address;  // host:port of the agent listener
  std::string token;         // passed in the environment, never on the command line
  std::string work_root;     // each agent works in work_root/<id>
  std::string log_dir;       // each agent logs to log_dir/<id>.log
};

class LocalProvider {
 public:
  LocalProvider(boost::asio::io_context* io, LocalOptions options);
  ~LocalProvider();

  absl::Status Start();
  // On the core thread: no more restarts, no more reaping by the SIGCHLD handler.
  void PrepareStop();
  // SIGTERM to every agent, then SIGKILL after grace_ms; waits for them. After PrepareStop() ran
  // on the core (or once the core has stopped), from any thread.
  void Stop(int grace_ms = 10000);

 private:
  struct Child {
    std::string id;
    pid_t pid = 0;
    int restarts = 0;
  };
  absl::Status Spawn(Child* child);
  void WatchChildren();
  void OnExit(pid_t pid, int status);

  boost::asio::io_context* io_;
  LocalOptions options_;
  boost::asio::signal_set sigchld_;
  std::vector<Child> children_;
  bool stopping_ = false;
};

}  // namespace tae::provider
