// tae-job: the supervisor of one run, started by tae-agent as
//
//   tae-job JOB_DIR RUN_DIR PROGRAM [ARG...]
//
// It runs PROGRAM in RUN_DIR in a new process group with stdout, stderr and fd 3 (the metrics
// fd) appended to JOB_DIR/stdout, JOB_DIR/stderr and JOB_DIR/metrics, and waits for it. Nothing
// the job does depends on the agent being alive: the agent tails those files and may be
// restarted at any time. When the job's main process exits, tae-job kills what is left of its
// process group, reaps it (it is a child subreaper), and writes JOB_DIR/exit atomically:
// "EXIT_CODE SIGNAL GROUP_GONE\n" (exit code -1 when killed by a signal; GROUP_GONE 1 when no
// process of the group remained). The job's group id is in JOB_DIR/pgid before it starts.
//
// tae-job ignores SIGTERM, SIGINT and SIGHUP: cancelling a run signals the job's group, not its
// supervisor. It is deliberately tiny and uses only POSIX calls.

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "common/fs/fs.h"

namespace {

constexpr size_t kReserve = 64;  // bytes kept for the exit record

int OpenOutput(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    fprintf(stderr, "tae-job: cannot open %s: %s\n", path.c_str(), strerror(errno));
    exit(111);
  }
  return fd;
}

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: tae-job JOB_DIR RUN_DIR PROGRAM [ARG...]\n");
    return 2;
  }
  const std::string job_dir = argv[1];
  const char* run_dir = argv[2];
  int out = OpenOutput(job_dir + "/stdout");
  int err = OpenOutput(job_dir + "/stderr");
  int met = OpenOutput(job_dir + "/metrics");
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Room for the exit record, taken now: a job that fills the disk must not keep its exit from
  // being recorded (the record is written into these blocks when a new file cannot be).
  const std::string reserve = job_dir + "/exit.reserve";
  (void)tae::fs::WriteFileAtomically(reserve, std::string(kReserve, ' '));

  prctl(PR_SET_CHILD_SUBREAPER, 1);
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);

  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "tae-job: fork: %s\n", strerror(errno));
    return 111;
  }
  if (pid == 0) {
    setpgid(0, 0);
    for (int signo = 1; signo < NSIG; ++signo) {
      signal(signo, SIG_DFL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(devnull, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    dup2(met, 3);  // clears FD_CLOEXEC on the new descriptors
    if (chdir(run_dir) != 0) {
      dprintf(STDERR_FILENO, "tae-job: cannot enter %s: %s\n", run_dir, strerror(errno));
      _exit(126);
    }
    execv(argv[3], argv + 3);
    dprintf(STDERR_FILENO, "tae-job: cannot execute %s: %s\n", argv[3], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so the group exists before anyone signals it
  (void)tae::fs::WriteFileAtomically(job_dir + "/pgid", std::to_string(pid) + "\n");

  int status = 0;
  while (true) {
    int st = 0;
    pid_t got = waitpid(-1, &st, 0);
    if (got == pid) {
      status = st;
      break;
    }
    if (got < 0 && errno != EINTR) {
      fprintf(stderr, "tae-job: waitpid: %s\n", strerror(errno));
      return 111;
    }
  }
  // Whatever the main process left in its group goes too; as a subreaper we reap it.
  kill(-pid, SIGKILL);
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    gone = kill(-pid, 0) != 0 && errno == ESRCH;
    if (!gone) {
      SleepMs(10);
    }
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  const std::string text =
      std::to_string(code) + " " + std::to_string(sig) + " " + (gone ? "1" : "0") + "\n";
  if (absl::Status s = tae::fs::WriteFileAtomically(job_dir + "/exit", text); !s.ok()) {
    // No room for a new file (the disk is full): into the reserved blocks, then renamed.
    const int fd = open(reserve.c_str(), O_WRONLY | O_CLOEXEC);
    std::string padded = text;
    padded.resize(kReserve, ' ');
    if (fd < 0 || pwrite(fd, padded.data(), padded.size(), 0) != static_cast<ssize_t>(kReserve) ||
        fsync(fd) != 0 || rename(reserve.c_str(), (job_dir + "/exit").c_str()) != 0) {
      fprintf(stderr, "tae-job: %s; and the reserved record: %s\n",
              std::string(s.message()).c_str(), strerror(errno));
      return 111;
    }
    close(fd);
    return 0;
  }
  unlink(reserve.c_str());
  return 0;
}
