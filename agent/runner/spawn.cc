#include "agent/runner/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace tae::agent {
namespace {

void CloseAll(std::initializer_list<int*> fds) {
  for (int* fd : fds) {
    if (*fd >= 0) {
      close(*fd);
      *fd = -1;
    }
  }
}

std::vector<std::string> BuildEnv(const SpawnRequest& request) {
  std::set<std::string> overridden;
  for (const auto& [key, value] : request.env) {
    overridden.insert(key);
  }
  overridden.insert("TAE_METRICS_FD");
  overridden.insert("TAE_AGENT_TOKEN");  // the job never sees the agent's credentials
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    if (overridden.count(entry.substr(0, entry.find('='))) == 0) {
      env.push_back(std::move(entry));
    }
  }
  for (const auto& [key, value] : request.env) {
    env.push_back(absl::StrCat(key, "=", value));
  }
  env.push_back(absl::StrCat("TAE_METRICS_FD=", kMetricsFd));
  return env;
}

}  // namespace

absl::StatusOr<SpawnedProcess> Spawn(const SpawnRequest& request) {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int met[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(met, O_CLOEXEC) != 0) {
    std::string msg = strerror(errno);
    CloseAll({&out[0], &out[1], &err[0], &err[1], &met[0], &met[1]});
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", msg));
  }
  std::vector<std::string> env = BuildEnv(request);
  std::vector<std::string> args = request.argv;
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

  // Block every signal across fork so the child cannot run our (Asio) handlers before exec; the
  // child resets them to the default and unblocks.
  sigset_t all;
  sigset_t saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = fork();
  if (pid != 0) {
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  }
  if (pid < 0) {
    std::string msg = strerror(errno);
    CloseAll({&out[0], &out[1], &err[0], &err[1], &met[0], &met[1]});
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", msg));
  }
  if (pid == 0) {
    setpgid(0, 0);
    for (int signo = 1; signo < NSIG; ++signo) {
      signal(signo, SIG_DFL);  // fails harmlessly for SIGKILL, SIGSTOP and unused numbers
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    dup2(devnull, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    dup2(met[1], kMetricsFd);  // dup2 clears FD_CLOEXEC on the new fd
    if (chdir(request.cwd.c_str()) != 0) {
      const char msg[] = "tae-agent: cannot enter the run directory\n";
      (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
      _exit(126);
    }
    execve(argv[0], argv.data(), envp.data());
    // Only async-signal-safe calls here: the errno is written as a number.
    int error = errno;
    char msg[96] = "tae-agent: cannot execute the job (errno ";
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
  setpgid(pid, pid);  // also from the parent, so the group exists before we ever signal it
  CloseAll({&out[1], &err[1], &met[1]});
  SpawnedProcess process;
  process.pid = pid;
  process.stdout_fd = out[0];
  process.stderr_fd = err[0];
  process.metrics_fd = met[0];
  return process;
}

}  // namespace tae::agent
