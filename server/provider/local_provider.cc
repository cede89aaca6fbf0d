#include "server/provider/local_provider.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "boost/asio/steady_timer.hpp"
#include "common/auth/environment.h"
#include "common/process/spawn.h"
#include "spdlog/spdlog.h"

namespace tae::provider {

LocalProvider::LocalProvider(boost::asio::io_context* io, LocalOptions options)
    : io_(io), options_(std::move(options)), sigchld_(*io, SIGCHLD) {
  for (int i = 0; i < options_.agents; ++i) {
    Child child;
    child.id = absl::StrCat("local-", i);
    child.worker = i;
    Add(std::move(child));
  }
  for (const SshHost& host : options_.ssh_hosts) {
    Child child;
    child.id = host.id;
    child.session = true;
    child.command = {host.id, "ssh", SshArgv(host, options_.tunnel_target), {}, host.labels};
    Add(std::move(child));
  }
}

LocalProvider::~LocalProvider() { Stop(0); }

void LocalProvider::Add(Child child) { children_.emplace(next_serial_++, std::move(child)); }

absl::Status LocalProvider::Start() {
  started_ = true;
  WatchChildren();
  for (auto& [serial, child] : children_) {
    if (absl::Status s = Spawn(&child); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void LocalProvider::AddSession(AgentSession session) {
  if (stopping_) {
    return;
  }
  Child child;
  child.id = session.id;
  child.session = true;
  child.command = std::move(session);
  const Serial serial = next_serial_;
  Add(std::move(child));
  if (started_) {
    Child& added = children_.at(serial);
    if (absl::Status s = Spawn(&added); !s.ok()) {
      spdlog::warn("agent {}: {}", added.id, std::string(s.message()));
      Record(added, "exit", absl::StrCat("could not start: ", s.message()));
    }
  }
}

void LocalProvider::RemoveSession(const std::string& id, int grace_ms) {
  for (auto it = children_.begin(); it != children_.end();) {
    Child& child = it->second;
    if (!child.session || child.id != id || child.removed) {
      ++it;
      continue;
    }
    child.removed = true;
    if (child.pid <= 0) {  // between restarts: nothing runs
      Record(child, "stop", "removed");
      it = children_.erase(it);
      continue;
    }
    Record(child, "stop", absl::StrCat("pid ", child.pid, ": asked to stop"));
    const char stop[] = "stop\n";
    if (child.stdin_fd < 0 || write(child.stdin_fd, stop, sizeof(stop) - 1) != sizeof(stop) - 1) {
      kill(-child.pid, SIGTERM);
    }
    // The far end may be gone without a word (a preempted VM): the session ends by keepalive
    // timeout at the latest, or by this.
    auto timer =
        std::make_shared<boost::asio::steady_timer>(*io_, std::chrono::milliseconds(grace_ms));
    timer->async_wait([this, timer, serial = it->first](const boost::system::error_code& error) {
      auto found = children_.find(serial);
      if (!error && !stopping_ && found != children_.end() && found->second.pid > 0) {
        kill(-found->second.pid, SIGTERM);
      }
    });
    ++it;
  }
}

std::map<std::string, std::string> LocalProvider::LabelsOf(const Child& child) const {
  if (child.session) {
    return child.command.labels;
  }
  std::map<std::string, std::string> labels = {{"accelerator", "cpu"}, {"provider", "local"}};
  if (!options_.slice.empty()) {
    labels["slice"] = options_.slice;
    labels["worker"] = absl::StrCat(child.worker);
  }
  return labels;
}

absl::StatusOr<std::string> LocalProvider::KeyFor(const Child& child) {
  if (!options_.credential) {
    return options_.token;
  }
  absl::StatusOr<std::string> credential = options_.credential(child.id, LabelsOf(child));
  if (!credential.ok()) {
    Record(child, "refused", std::string(credential.status().message()));
  }
  return credential;
}

absl::Status LocalProvider::Spawn(Child* child) {
  absl::StatusOr<std::string> key = KeyFor(*child);
  if (!key.ok()) {
    return key.status();
  }
  if (child->session) {
    return SpawnSession(child, *key);
  }
  process::SpawnRequest request;
  request.argv = {options_.agent_binary,
                  "--taed",
                  options_.taed_address,
                  "--id",
                  child->id,
                  "--slots",
                  absl::StrCat(options_.slots),
                  "--work-dir",
                  absl::StrCat(options_.work_root, "/", child->id),
                  "--labels",
                  absl::StrJoin(LabelsOf(*child), ",", absl::PairFormatter("="))};
  request.env = {{"TAE_AGENT_TOKEN", *key}};  // never on the command line
  // Local agents dial loopback without TLS (docs/security.md): taed's own TLS settings in the
  // environment (TAE_TLS_CERT and TAE_TLS_KEY are its server certificate) are not theirs, nor is
  // TAE_HOME (its socket and tokens), which their jobs would otherwise inherit.
  request.env_remove = auth::TaedOnlyEnv();
  request.log_path = absl::StrCat(options_.log_dir, "/", child->id, ".log");
  // If taed dies (crash, kill -9), its agents exit at once with SIGUSR1 but leave their runs'
  // supervisors running; the agents the next taed starts on the same work dirs adopt them.
  request.die_with_parent = true;
  request.death_signal = SIGUSR1;
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  if (!spawned.ok()) {
    return spawned.status();
  }
  child->pid = spawned->pid;
  spdlog::info("started agent {} (pid {}, log {})", child->id, child->pid, request.log_path);
  Record(*child, "start", absl::StrCat("pid ", child->pid, ": ", absl::StrJoin(request.argv, " ")));
  return absl::OkStatus();
}

absl::Status LocalProvider::SpawnSession(Child* child, const std::string& key) {
  process::SpawnRequest request;
  request.argv = child->command.argv;
  request.env = child->command.env;
  request.stdin_pipe = true;
  request.env_remove = auth::TaedOnlyEnv();
  request.log_path = absl::StrCat(options_.log_dir, "/", child->id, ".log");
  // taed gone: the session ends, the remote agent sees stdin close and leaves its runs to be
  // adopted.
  request.die_with_parent = true;
  request.death_signal = SIGTERM;
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  if (!spawned.ok()) {
    return spawned.status();
  }
  child->pid = spawned->pid;
  child->stdin_fd = spawned->stdin_fd;
  // The token goes down the session, never on a command line. A pipe this small never blocks.
  const std::string line = key + "\n";
  if (write(child->stdin_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    spdlog::warn("agent {}: could not hand the token to its session: {}", child->id,
                 strerror(errno));
  }
  const std::string command = absl::StrJoin(request.argv, " ");
  spdlog::info("started agent {} through {} (pid {}, log {}): {}", child->id,
               child->command.provider, child->pid, request.log_path, command);
  Record(*child, "start", absl::StrCat("pid ", child->pid, ": ", command));
  return absl::OkStatus();
}

void LocalProvider::Record(const Child& child, const std::string& event,
                           const std::string& detail) {
  if (options_.log != nullptr && !stopping_) {
    options_.log->Add(child.session ? child.command.provider : "local", child.id, event, detail);
  }
}

void LocalProvider::CloseStdin(Child* child) {
  if (child->stdin_fd >= 0) {
    close(child->stdin_fd);
    child->stdin_fd = -1;
  }
}

void LocalProvider::WatchChildren() {
  sigchld_.async_wait([this](const boost::system::error_code& error, int) {
    if (error || stopping_) {
      return;  // once stopping, Stop() reaps the children itself
    }
    // Only our own children: taed has others (the gcloud-tpu provider's gcloud calls), whose
    // owners wait for them by pid.
    std::vector<std::pair<Serial, int>> exited;
    for (auto& [serial, child] : children_) {
      int status = 0;
      if (child.pid > 0 && waitpid(child.pid, &status, WNOHANG) == child.pid) {
        exited.emplace_back(serial, status);
      }
    }
    for (const auto& [serial, status] : exited) {
      OnExit(serial, status);
    }
    WatchChildren();
  });
}

void LocalProvider::OnExit(Serial serial, int status) {
  auto it = children_.find(serial);
  if (it == children_.end()) {
    return;
  }
  Child& child = it->second;
  child.pid = 0;
  CloseStdin(&child);
  if (stopping_) {
    return;
  }
  const std::string how = WIFEXITED(status) ? absl::StrCat("exit code ", WEXITSTATUS(status))
                                            : absl::StrCat("killed by signal ", WTERMSIG(status));
  if (child.removed) {
    Record(child, "exit", absl::StrCat(how, "; removed, not restarted"));
    children_.erase(it);
    return;
  }
  child.restarts += 1;
  int delay_ms = std::min(30000, 500 * (1 << std::min(child.restarts, 6)));
  spdlog::warn("agent {} exited (status {}); restarting in {} ms", child.id, status, delay_ms);
  Record(child, "exit",
         absl::StrCat(how, "; restarting in ", delay_ms, " ms",
                      child.session ? absl::StrCat(" (the session's own messages: ",
                                                   options_.log_dir, "/", child.id, ".log)")
                                    : ""));
  auto timer =
      std::make_shared<boost::asio::steady_timer>(*io_, std::chrono::milliseconds(delay_ms));
  timer->async_wait([this, timer, serial](const boost::system::error_code& error) {
    auto found = children_.find(serial);
    if (!error && !stopping_ && found != children_.end() && found->second.pid == 0 &&
        !found->second.removed) {
      Spawn(&found->second).IgnoreError();
    }
  });
}

void LocalProvider::PrepareStop() {
  stopping_ = true;
  boost::system::error_code ignored;
  sigchld_.cancel(ignored);
}

void LocalProvider::Stop(int grace_ms) {
  stopping_ = true;
  for (auto& [serial, child] : children_) {
    if (child.pid <= 0) {
      continue;
    }
    if (child.session && child.stdin_fd >= 0) {
      // The remote agent stops its runs and exits; then the session, and ssh, end.
      const char stop[] = "stop\n";
      if (write(child.stdin_fd, stop, sizeof(stop) - 1) != sizeof(stop) - 1) {
        kill(-child.pid, SIGTERM);  // the session's group: gcloud and the ssh it runs
      }
    } else {
      kill(child.pid, SIGTERM);
    }
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (auto& [serial, child] : children_) {
    while (child.pid > 0) {
      int status = 0;
      pid_t r = waitpid(child.pid, &status, WNOHANG);
      if (r == child.pid || (r < 0 && errno == ECHILD)) {
        child.pid = 0;
        CloseStdin(&child);
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(child.session ? -child.pid : child.pid, SIGKILL);
        waitpid(child.pid, &status, 0);
        child.pid = 0;
        CloseStdin(&child);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace tae::provider
