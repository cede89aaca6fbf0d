#include "common/process/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace tae::process {
namespace {

// Parent-side file descriptors, closed on every exit path unless released.
struct Fds {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int met[2] = {-1, -1};
  int in[2] = {-1, -1};
  int log = -1;
  int devnull = -1;
  ~Fds() {
    for (int* fd :
         {&out[0], &out[1], &err[0], &err[1], &met[0], &met[1], &in[0], &in[1], &log, &devnull}) {
      if (*fd >= 0) {
        close(*fd);
      }
    }
  }
  static int Release(int* fd) { return std::exchange(*fd, -1); }
};

std::vector<std::string> BuildEnv(const SpawnRequest& request) {
  std::set<std::string> dropped(request.env_remove.begin(), request.env_remove.end());
  for (const auto& [key, value] : request.env) {
    dropped.insert(key);
  }
  if (request.metrics_pipe) {
    dropped.insert("TAE_METRICS_FD");
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    if (dropped.count(entry.substr(0, entry.find('='))) == 0) {
      env.push_back(std::move(entry));
    }
  }
  for (const auto& [key, value] : request.env) {
    env.push_back(absl::StrCat(key, "=", value));
  }
  if (request.metrics_pipe) {
    env.push_back(absl::StrCat("TAE_METRICS_FD=", kMetricsFd));
  }
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

// Async-signal-safe: reports a failed exec of `program` with the errno as a number.
[[noreturn]] void ExecFailed(const char* program, int error) {
  const char head[] = "cannot execute ";
  (void)!write(STDERR_FILENO, head, sizeof(head) - 1);
  (void)!write(STDERR_FILENO, program, strlen(program));
  char msg[32] = " (errno ";
  size_t len = strlen(msg);
  char digits[12];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + error % 10);
    error /= 10;
  } while (error > 0 && n < 11);
  while (n > 0) {
    msg[len++] = digits[--n];
  }
  msg[len++] = ')';
  msg[len++] = '\n';
  (void)!write(STDERR_FILENO, msg, len);
  _exit(127);
}

[[noreturn]] void RunChild(const SpawnRequest& request, const Fds& fds, pid_t parent,
                           char* const* argv, char* const* envp) {
  if (request.new_session) {
    setsid();
  } else {
    setpgid(0, 0);
  }
  for (int signo = 1; signo < NSIG; ++signo) {
    signal(signo, SIG_DFL);  // fails harmlessly for SIGKILL, SIGSTOP and unused numbers
  }
  if (request.die_with_parent) {
    prctl(PR_SET_PDEATHSIG, request.death_signal);
    if (getppid() != parent) {
      _exit(1);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  dup2(request.stdin_pipe ? fds.in[0] : fds.devnull, STDIN_FILENO);
  dup2(fds.log >= 0 ? fds.log : fds.out[1], STDOUT_FILENO);
  dup2(fds.log >= 0 ? fds.log : fds.err[1], STDERR_FILENO);
  if (request.metrics_pipe) {
    dup2(fds.met[1], kMetricsFd);  // dup2 clears FD_CLOEXEC on the new fd
  }
  if (!request.cwd.empty() && chdir(request.cwd.c_str()) != 0) {
    const char msg[] = "cannot enter the working directory\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(126);
  }
  execve(argv[0], argv, envp);
  ExecFailed(argv[0], errno);
}

absl::Status OpenFds(const SpawnRequest& request, Fds* fds) {
  fds->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fds->devnull < 0) {
    return absl::InternalError(absl::StrCat("/dev/null: ", strerror(errno)));
  }
  if (!request.log_path.empty()) {
    fds->log = open(request.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fds->log < 0) {
      return absl::InternalError(absl::StrCat(request.log_path, ": ", strerror(errno)));
    }
  } else if (pipe2(fds->out, O_CLOEXEC) != 0 || pipe2(fds->err, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", strerror(errno)));
  }
  if (request.metrics_pipe && pipe2(fds->met, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", strerror(errno)));
  }
  if (request.stdin_pipe && pipe2(fds->in, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SpawnedProcess> Spawn(const SpawnRequest& request) {
  if (request.argv.empty()) {
    return absl::InvalidArgumentError("spawn: empty argv");
  }
  Fds fds;
  if (absl::Status s = OpenFds(request, &fds); !s.ok()) {
    return s;
  }
  std::vector<std::string> env = BuildEnv(request);
  std::vector<std::string> args = request.argv;
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(env);

  pid_t parent = getpid();
  sigset_t all;
  sigset_t saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);  // no handler of ours may run in the child
  pid_t pid = fork();
  if (pid == 0) {
    RunChild(request, fds, parent, argv.data(), envp.data());
  }
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (!request.new_session) {
    // Also from the parent, so the group exists before we ever signal it. Not for a new session:
    // setsid() fails in a child that is already a group leader.
    setpgid(pid, pid);
  }
  SpawnedProcess process;
  process.pid = pid;
  process.stdout_fd = Fds::Release(&fds.out[0]);
  process.stderr_fd = Fds::Release(&fds.err[0]);
  process.metrics_fd = Fds::Release(&fds.met[0]);
  process.stdin_fd = Fds::Release(&fds.in[1]);
  return process;
}

}  // namespace tae::process
