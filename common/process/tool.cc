#include "common/process/tool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tae::process {

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) {
    return "";
  }
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

ToolResult RunTool(std::vector<std::string> argv, int timeout_ms) {
  ToolResult result;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.error = absl::StrCat("pipe: ", std::strerror(errno));
    return result;
  }
  // Everything the child touches is prepared here: between clone and exec it only makes
  // async-signal-safe calls (another thread may hold malloc's lock).
  std::vector<char*> cargs;
  for (std::string& a : argv) {
    cargs.push_back(a.data());
  }
  cargs.push_back(nullptr);
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  sigset_t all;
  sigset_t saved;
  sigfillset(&all);
  // No handler of the caller's may run in the helper before it resets them. (glibc leaves its two
  // internal signals unblocked; they are only ever sent to threads of this process.)
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  // The helper: fork() semantics (no CLONE_VM, its own copy of memory) but exit signal 0, a
  // clone child, which waitpid(-1) without __WCLONE never reaps. Arguments 2-5 (stack, tids,
  // tls) are 0 in every architecture's argument order.
  const long pid = syscall(SYS_clone, 0UL, 0UL, 0UL, 0UL, 0UL);
  if (pid == 0) {
    setpgid(0, 0);  // the helper's group holds the tool too: one kill(-pid) stops both
    dup2(null_fd, STDIN_FILENO);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    for (int signo = 1; signo < NSIG; ++signo) {
      signal(signo, SIG_DFL);  // fails harmlessly for SIGKILL, SIGSTOP and unused numbers
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // exec would make the helper an ordinary child again (the kernel resets the exit signal to
    // SIGCHLD), so the tool is the helper's child, and the helper exits with its status.
    const pid_t tool = vfork();
    if (tool == 0) {
      execv(cargs[0], cargs.data());
      _exit(127);
    }
    if (tool < 0) {
      _exit(126);
    }
    int status = 0;
    while (waitpid(tool, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  close(pipe_fds[1]);
  if (null_fd >= 0) {
    close(null_fd);
  }
  if (pid < 0) {
    close(pipe_fds[0]);
    result.error = absl::StrCat("clone: ", std::strerror(clone_errno));
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left)) <= 0) {
      continue;  // EINTR or the deadline, checked above
    }
    ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;  // EOF: the tool (and whatever it started) closed its stdout
    }
    if (result.out.size() < (1 << 20)) {
      result.out.append(buf, static_cast<size_t>(n));
    }
  }
  close(pipe_fds[0]);
  const pid_t child = static_cast<pid_t>(pid);
  if (timed_out) {
    kill(-child, SIGKILL);
    kill(child, SIGKILL);
  }
  // A tool stuck in the kernel (a wedged driver) may not die even of SIGKILL: give it a second,
  // then leave it as a zombie rather than wedge this thread.
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 100 && reaped == 0; ++i) {
    reaped = waitpid(child, &status, WNOHANG | __WCLONE);
    if (reaped < 0 && errno == EINTR) {
      reaped = 0;
    }
    if (reaped == 0) {
      usleep(timed_out ? 10000 : 1000 * std::min(i + 1, 10));
    }
  }
  if (timed_out) {
    result.error = absl::StrCat("gave no answer within ", timeout_ms, " ms");
  } else if (reaped <= 0) {
    result.error = "closed its output but did not exit";
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    result.error = WIFEXITED(status) ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                                     : "was killed by a signal";
  } else {
    result.ok = true;
  }
  return result;
}

}  // namespace tae::process
