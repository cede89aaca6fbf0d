#include "server/provider/local_provider.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "boost/asio/steady_timer.hpp"
#include "spdlog/spdlog.h"

namespace tae::provider {

LocalProvider::LocalProvider(boost::asio::io_context* io, LocalOptions options)
    : io_(io), options_(std::move(options)), sigchld_(*io, SIGCHLD) {
  for (int i = 0; i < options_.agents; ++i) {
    children_.push_back({absl::StrCat("local-", i)});
  }
}

LocalProvider::~LocalProvider() { Stop(0); }

absl::Status LocalProvider::Start() {
  WatchChildren();
  for (Child& child : children_) {
    if (absl::Status s = Spawn(&child); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status LocalProvider::Spawn(Child* child) {
  std::string work_dir = absl::StrCat(options_.work_root, "/", child->id);
  std::string log_path = absl::StrCat(options_.log_dir, "/", child->id, ".log");
  std::string slots = absl::StrCat(options_.slots);
  std::vector<std::string> args = {options_.agent_binary,
                                   "--taed",
                                   options_.taed_address,
                                   "--id",
                                   child->id,
                                   "--slots",
                                   slots,
                                   "--work-dir",
                                   work_dir,
                                   "--labels",
                                   "accelerator=cpu,provider=local"};
  // Everything exec needs is built before fork: the child only calls async-signal-safe code.
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).rfind("TAE_AGENT_TOKEN=", 0) != 0) {
      env.emplace_back(*e);
    }
  }
  env.push_back(absl::StrCat("TAE_AGENT_TOKEN=", options_.token));
  std::vector<char*> argv;
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  pid_t parent = getpid();
  sigset_t all;
  sigset_t saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);  // no Asio handler may run in the child
  pid_t pid = fork();
  if (pid != 0) {
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  }
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    for (int signo = 1; signo < NSIG; ++signo) {
      signal(signo, SIG_DFL);
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) {
      _exit(1);
    }
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  child->pid = pid;
  spdlog::info("started agent {} (pid {}, log {})", child->id, pid, log_path);
  return absl::OkStatus();
}

void LocalProvider::WatchChildren() {
  sigchld_.async_wait([this](const boost::system::error_code& error, int) {
    if (error || stopping_) {
      return;  // once stopping, Stop() reaps the children itself
    }
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      OnExit(pid, status);
    }
    WatchChildren();
  });
}

void LocalProvider::OnExit(pid_t pid, int status) {
  for (Child& child : children_) {
    if (child.pid != pid) {
      continue;
    }
    child.pid = 0;
    if (stopping_) {
      return;
    }
    child.restarts += 1;
    int delay_ms = std::min(30000, 500 * (1 << std::min(child.restarts, 6)));
    spdlog::warn("agent {} exited (status {}); restarting in {} ms", child.id, status, delay_ms);
    auto timer =
        std::make_shared<boost::asio::steady_timer>(*io_, std::chrono::milliseconds(delay_ms));
    timer->async_wait([this, timer, &child](const boost::system::error_code& error) {
      if (!error && !stopping_ && child.pid == 0) {
        Spawn(&child).IgnoreError();
      }
    });
    return;
  }
}

void LocalProvider::PrepareStop() {
  stopping_ = true;
  boost::system::error_code ignored;
  sigchld_.cancel(ignored);
}

void LocalProvider::Stop(int grace_ms) {
  stopping_ = true;
  for (Child& child : children_) {
    if (child.pid > 0) {
      kill(child.pid, SIGTERM);
    }
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (Child& child : children_) {
    while (child.pid > 0) {
      int status = 0;
      pid_t r = waitpid(child.pid, &status, WNOHANG);
      if (r == child.pid || (r < 0 && errno == ECHILD)) {
        child.pid = 0;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(child.pid, SIGKILL);
        waitpid(child.pid, &status, 0);
        child.pid = 0;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace tae::provider
