#include "server/provider/cli_call.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock/clock.h"
#include "common/process/spawn.h"

namespace tae::provider {

std::string ErrorLine(const std::string& text) {
  std::string last;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string line = text.substr(start, end - start);
    if (line.rfind("ERROR:", 0) == 0 || line.rfind("Error from server", 0) == 0 ||
        line.rfind("error:", 0) == 0) {
      return line;
    }
    if (line.find_first_not_of(" \r") != std::string::npos) {
      last = line;
    }
    start = end + 1;
  }
  return last;
}

std::string CallOutcome(const CliResult& result) {
  return result.ok
             ? absl::StrFormat("ok in %.1f s", result.seconds)
             : absl::StrCat("failed: ", ErrorLine(result.err.empty() ? result.out : result.err));
}

CliResult RunCli(const std::vector<std::string>& argv, const std::string& input, double timeout_s,
                 const std::function<bool()>& aborted) {
  CliResult result;
  process::SpawnRequest request;
  request.argv = argv;
  request.env_remove = {"TAE_AGENT_TOKEN", "TAE_TLS_KEY"};
  request.stdin_pipe = true;
  const double start = clock::SteadyNow();
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  if (!spawned.ok()) {
    result.err = std::string(spawned.status().message());
    return result;
  }
  // The input first (a manifest: kilobytes, within the pipe's buffer), then both pipes until
  // EOF (or the deadline), then the exit status of this very pid.
  size_t written = 0;
  while (written < input.size()) {
    ssize_t n = write(spawned->stdin_fd, input.data() + written, input.size() - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;  // the tool closed its stdin: its exit status says what it made of that
    }
    written += static_cast<size_t>(n);
  }
  close(spawned->stdin_fd);
  std::string* sinks[2] = {&result.out, &result.err};
  int fds[2] = {spawned->stdout_fd, spawned->stderr_fd};
  const double deadline = start + timeout_s;
  bool timed_out = false;
  bool stopped = false;
  bool cut[2] = {false, false};
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd pfds[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    const double left = deadline - clock::SteadyNow();
    stopped = aborted && aborted();
    if (left <= 0 || stopped) {
      timed_out = true;
      break;
    }
    if (poll(pfds, 2, static_cast<int>(std::min(left, 1.0) * 1000)) <= 0) {
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || pfds[i].revents == 0) {
        continue;
      }
      char buf[8192];
      ssize_t n = read(fds[i], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        close(fds[i]);
        fds[i] = -1;
      } else if (sinks[i]->size() + static_cast<size_t>(n) <= kMaxCliOutputBytes) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        cut[i] = true;  // read on to the end (the tool must not block), kept no further
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) {
      close(fd);
    }
  }
  if (timed_out) {
    kill(-spawned->pid, SIGKILL);
  }
  int status = 0;
  while (waitpid(spawned->pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.ok = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0 && !cut[0];
  if (cut[0]) {
    // A cut answer is no answer: a listing missing its end would read as fewer objects.
    result.out.clear();
    result.err = absl::StrCat("error: its output passed ", kMaxCliOutputBytes >> 20,
                              " MiB and was not read; ", result.err);
  }
  if (timed_out) {
    result.err = stopped ? absl::StrCat("taed is stopping; ", result.err)
                         : absl::StrCat("no answer within ", timeout_s, " s; ", result.err);
  }
  result.seconds = clock::SteadyNow() - start;
  return result;
}

}  // namespace tae::provider
