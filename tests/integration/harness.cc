#include "tests/integration/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tae::testing {

std::string BinPath(const std::string& name) { return std::string(TAE_BIN_DIR) + "/" + name; }

std::string FirstLine(const std::string& path) {
  std::string line;
  std::ifstream in(path);
  std::getline(in, line);
  return line;
}

CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s) {
  process::SpawnRequest request;
  request.argv = argv;
  return RunCommand(request, timeout_s);
}

CommandResult RunCommand(const process::SpawnRequest& request, double timeout_s) {
  // Some tests run this on threads of their own (an agent kept running beside the test), and
  // Catch's macros are not thread-safe (an INFO here raced the main thread's assertions and
  // crashed the test process): they are touched only when something is wrong.
  if (!request.log_path.empty()) {
    FAIL("RunCommand reads the program's output: no log_path");
  }
  absl::StatusOr<process::SpawnedProcess> child = process::Spawn(request);
  if (!child.ok()) {
    FAIL("spawn " << request.argv.at(0) << ": " << child.status().ToString());
  }
  const pid_t pid = child->pid;
  CommandResult result;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  pollfd fds[2] = {{child->stdout_fd, POLLIN, 0}, {child->stderr_fd, POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      kill(-pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left)) <= 0) {
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP))) {
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
        } else {
          (i == 0 ? result.out : result.err).append(buf, n);
        }
      }
    }
  }
  for (auto& fd : fds) {
    if (fd.fd >= 0) {
      close(fd.fd);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/tae-test-XXXXXX";  // short: unix socket paths are limited to 108 bytes
  char* dir = mkdtemp(tmpl);
  REQUIRE(dir != nullptr);
  path_ = dir;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& name, const std::string& content) const {
  std::string path = path_ + "/" + name;
  std::ofstream(path) << content;
  return path;
}

Cluster::Cluster(int agents, int slots,
                 const std::function<void(const std::string& home)>& before_up,
                 const std::vector<std::string>& up_args) {
  if (before_up) {
    before_up(home_.path());
  }
  std::vector<std::string> up_argv = {"up", "--agents", std::to_string(agents), "--slots",
                                      std::to_string(slots)};
  up_argv.insert(up_argv.end(), up_args.begin(), up_args.end());
  CommandResult up = Taectl(up_argv, 120);
  started_ = true;
  INFO("taectl up: " << up.out << up.err);
  REQUIRE(up.exit_code == 0);
}

Cluster::~Cluster() {
  // Also when `up` failed: a taed that started but did not get its agents is still running.
  RunCommand({BinPath("taectl"), "--home", home(), "down"}, 60);
}

bool Cluster::KillTaed() {
  const long taed = FindProcess("taed", home());
  return taed > 0 && kill(static_cast<pid_t>(taed), SIGKILL) == 0 &&
         WaitUntil([&] { return FindProcess("taed", home()) == 0; }, 30);
}

CommandResult Cluster::Taectl(std::vector<std::string> args, double timeout_s) {
  std::vector<std::string> argv = {BinPath("taectl"), "--home", home()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout_s);
}

nlohmann::json Cluster::TaectlJson(std::vector<std::string> args) {
  args.push_back("--json");
  CommandResult result = Taectl(args);
  INFO("taectl stderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  nlohmann::json doc = nlohmann::json::parse(result.out, nullptr, false);
  INFO("taectl stdout: " << result.out);
  REQUIRE_FALSE(doc.is_discarded());
  return doc;
}

std::string CopyTaskSpec(const std::string& name, int hosts, int steps, int checkpoint_every) {
  return "name = \"" + name +
         "\"\n"
         "[model]\nlayers = 2\nd_model = 32\n"
         "[train]\ntask = \"copy\"\nvocab = 8\nseq_len = 16\nbatch_size = 8\nlr = 0.01\n"
         "warmup = 5\nsteps = " +
         std::to_string(steps) + "\neval_every = 10\neval_batches = 2\nthreads = 1\nseeds = [0]\n" +
         "checkpoint_every = " + std::to_string(checkpoint_every) + "\n" +
         "[resources]\nhosts = " + std::to_string(hosts) + "\nmax_attempts = 3\n";
}

bool WaitUntil(const std::function<bool()>& pred, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return pred();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

long FindProcess(const std::string& name, const std::string& needle) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    // The process may exit between the listing and the read, and read() then fails with ESRCH
    // (std::ifstream turned that into an exception): such a process is simply not a match.
    std::string cmdline;
    const int fd = ::open((entry.path() / "cmdline").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      continue;
    }
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) {
      cmdline.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(name) != std::string::npos && cmdline.find(needle) != std::string::npos) {
      return std::stol(pid);
    }
  }
  return 0;
}

bool ProcessGroupExists(long pgid) { return kill(-static_cast<pid_t>(pgid), 0) == 0; }

bool KillLocalAgent(const Cluster& cluster, const std::string& id) {
  const std::string needle = cluster.home() + "/agents/" + id;
  const long agent = FindProcess("tae-agent", needle);
  if (agent <= 0 || kill(static_cast<pid_t>(agent), SIGKILL) != 0) {
    return false;
  }
  return WaitUntil(
      [&] {
        const long now = FindProcess("tae-agent", needle);
        return now > 0 && now != agent;
      },
      60);
}

void StopProcessGroup(long pid) {
  if (pid <= 0) {
    return;
  }
  kill(static_cast<pid_t>(-pid), SIGTERM);
  int status = 0;
  if (!WaitUntil([&] { return waitpid(static_cast<pid_t>(pid), &status, WNOHANG) == pid; }, 10)) {
    kill(static_cast<pid_t>(-pid), SIGKILL);
    waitpid(static_cast<pid_t>(pid), &status, 0);
  }
}

}  // namespace tae::testing
