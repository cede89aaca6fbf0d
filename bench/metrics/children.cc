#include "bench/metrics/children.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/cli/paths.h"
#include "common/process/spawn.h"

namespace tae::bench {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Reaps pid, waiting at most timeout_s before SIGKILL. Returns the exit code, -1 on a signal.
int Reap(pid_t pid, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string BinDir() { return cli::ProgramDir(); }

double SteadyNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double ProcessCpuSeconds(pid_t pid) {
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) {
    return 0;
  }
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && (fields >> field); ++i) {  // fields 14 and 15: utime, stime
    if (i >= 14) {
      ticks += std::stod(field);
    }
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double MachineBusySeconds() {
  std::istringstream cpu(ReadFile("/proc/stat"));
  std::string label;
  cpu >> label;  // "cpu": the sum over cores
  double busy = 0;
  double ticks = 0;
  for (int i = 0; i < 8 && (cpu >> ticks); ++i) {
    busy += (i == 3 || i == 4) ? 0 : ticks;  // idle, iowait
  }
  return busy / static_cast<double>(sysconf(_SC_CLK_TCK));
}

AutogroupPriority::AutogroupPriority() {
  const char* env = std::getenv("BENCH_PRIORITY");
  if (env == nullptr || std::string(env) != "1") {
    return;
  }
  // "/autogroup-253 nice 0"
  std::string text = ReadFile("/proc/self/autogroup");
  size_t nice = text.find("nice ");
  if (nice == std::string::npos) {
    std::fprintf(stderr, "BENCH_PRIORITY ignored: /proc/self/autogroup is not readable\n");
    return;
  }
  previous_ = std::string(absl::StripAsciiWhitespace(text.substr(nice + 5)));
  std::ofstream out("/proc/self/autogroup");
  out << "-19";
  out.close();
  if (!out) {
    std::fprintf(stderr, "BENCH_PRIORITY ignored: cannot write /proc/self/autogroup (root?)\n");
    return;
  }
  enabled_ = true;
}

AutogroupPriority::~AutogroupPriority() {
  if (enabled_) {
    std::ofstream("/proc/self/autogroup") << previous_;
  }
}

void AutogroupPriority::Raise(pid_t pid) const {
  if (enabled_) {
    std::ofstream(absl::StrCat("/proc/", pid, "/autogroup")) << "-19";
  }
}

std::string AutogroupPriority::Describe() const {
  return enabled_ ? "autogroup nice -19 (BENCH_PRIORITY=1)" : "normal priority";
}

CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s) {
  CommandResult result;
  double start = SteadyNow();
  absl::StatusOr<process::SpawnedProcess> child =
      process::Spawn(process::SpawnRequest{argv, "", {}, {}, "", false, true});
  if (!child.ok()) {
    result.err = std::string(child.status().message());
    return result;
  }
  pollfd fds[2] = {{child->stdout_fd, POLLIN, 0}, {child->stderr_fd, POLLIN, 0}};
  int open_fds = 2;
  char buf[8192];
  double deadline = start + timeout_s;
  while (open_fds > 0) {
    int left_ms = static_cast<int>((deadline - SteadyNow()) * 1000);
    if (left_ms <= 0) {
      kill(-child->pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, left_ms) <= 0) {
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
        } else {
          (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
        }
      }
    }
  }
  for (pollfd& fd : fds) {
    if (fd.fd >= 0) {
      close(fd.fd);
    }
  }
  result.exit_code = Reap(child->pid, 10);
  result.seconds = SteadyNow() - start;
  return result;
}

absl::StatusOr<std::unique_ptr<TempDir>> TempDir::Make(const std::string& prefix) {
  std::string pattern = "/tmp/" + prefix + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<TempDir>(new TempDir(pattern));
}

TempDir::~TempDir() {
  if (keep_) {
    std::fprintf(stderr, "kept %s\n", path_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

absl::StatusOr<std::unique_ptr<LineChild>> LineChild::Spawn(
    std::string name, const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& env) {
  absl::StatusOr<process::SpawnedProcess> child =
      process::Spawn(process::SpawnRequest{argv, "", env, {}, "", false, true});
  if (!child.ok()) {
    return child.status();
  }
  for (int fd : {child->stdout_fd, child->stderr_fd}) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return std::unique_ptr<LineChild>(
      new LineChild(std::move(name), child->pid, child->stdout_fd, child->stderr_fd));
}

LineChild::~LineChild() {
  if (!reaped_) {
    kill(-pid_, SIGKILL);
    Wait(5);
  }
  for (int fd : {out_fd_, err_fd_}) {
    if (fd >= 0) {
      close(fd);
    }
  }
}

void LineChild::Poll(const std::vector<LineChild*>& children, int timeout_ms) {
  std::vector<pollfd> fds;
  for (LineChild* child : children) {
    for (int fd : {child->out_fd_, child->err_fd_}) {
      if (fd >= 0) {
        fds.push_back({fd, POLLIN, 0});
      }
    }
  }
  if (fds.empty() || poll(fds.data(), fds.size(), timeout_ms) <= 0) {
    return;
  }
  for (LineChild* child : children) {
    child->ReadAvailable(&child->out_fd_, &child->out_buffer_, false);
    child->ReadAvailable(&child->err_fd_, &child->err_buffer_, true);
  }
}

void LineChild::ReadAvailable(int* fd, std::string* buffer, bool is_stderr) {
  char buf[8192];
  while (*fd >= 0) {
    ssize_t n = read(*fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      break;
    }
    if (n <= 0) {
      close(*fd);
      *fd = -1;
      break;
    }
    buffer->append(buf, static_cast<size_t>(n));
  }
  if (!is_stderr) {
    return;
  }
  size_t end;
  while ((end = buffer->find('\n')) != std::string::npos) {
    std::fprintf(stderr, "  [%s] %s\n", name_.c_str(), buffer->substr(0, end).c_str());
    buffer->erase(0, end + 1);
  }
}

std::vector<std::string> LineChild::TakeLines() {
  std::vector<std::string> lines;
  size_t end;
  while ((end = out_buffer_.find('\n')) != std::string::npos) {
    lines.push_back(out_buffer_.substr(0, end));
    out_buffer_.erase(0, end + 1);
  }
  return lines;
}

int LineChild::Wait(double timeout_s) {
  reaped_ = true;
  return Reap(pid_, timeout_s);
}

absl::StatusOr<std::unique_ptr<Taed>> Taed::Up(const std::string& home) {
  std::unique_ptr<Taed> taed(new Taed(home));
  CommandResult up = taed->Taectl({"up", "--agents", "0"}, 60);
  if (up.exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("taectl up --agents 0 failed: ", up.out, up.err,
                                               "\nthe end of taed.log:\n", taed->LogTail()));
  }
  taed->up_ = true;
  taed->agent_address_ = std::string(absl::StripAsciiWhitespace(ReadFile(home + "/agent.addr")));
  taed->agent_token_ = std::string(absl::StripAsciiWhitespace(ReadFile(home + "/agent.token")));
  taed->pid_ = std::atoi(ReadFile(home + "/taed.pid").c_str());
  if (taed->agent_address_.empty() || taed->agent_token_.empty() || taed->pid_ <= 0) {
    return absl::InternalError(
        absl::StrCat("taed on ", home, " left no agent.addr, agent.token or taed.pid"));
  }
  return taed;
}

Taed::~Taed() { Down().IgnoreError(); }

absl::Status Taed::Down() {
  if (!up_) {
    return absl::OkStatus();
  }
  up_ = false;
  CommandResult down = Taectl({"down"}, 60);
  if (down.exit_code != 0) {
    return absl::InternalError(absl::StrCat("taectl down: ", down.out, down.err));
  }
  return absl::OkStatus();
}

std::string Taed::LogTail() const {
  std::string log = ReadFile(home_ + "/logs/taed.log");
  return log.size() > 2000 ? log.substr(log.size() - 2000) : log;
}

CommandResult Taed::Taectl(std::vector<std::string> args, double timeout_s) const {
  std::vector<std::string> argv = {BinDir() + "/taectl", "--home", home_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout_s);
}

}  // namespace tae::bench
