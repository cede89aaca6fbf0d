#include "server/provider/tpu_provider.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/process/spawn.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace tae::provider {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What gcloud said went wrong: its "ERROR:" line (progress lines like "Create request issued"
// come first), else its last non-empty line.
std::string ErrorLine(const std::string& text) {
  std::string last;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string line = text.substr(start, end - start);
    if (line.rfind("ERROR:", 0) == 0) {
      return line;
    }
    if (line.find_first_not_of(" \r") != std::string::npos) {
      last = line;
    }
    start = end + 1;
  }
  return last;
}

}  // namespace

TpuProvider::TpuProvider(TpuProviderOptions options) : options_(std::move(options)) {}

TpuProvider::~TpuProvider() { Stop(); }

void TpuProvider::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void TpuProvider::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void TpuProvider::Loop() {
  // No signal handler of taed's may run on this thread (it spawns gcloud).
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  while (true) {
    Round();
    std::unique_lock<std::mutex> lock(mu_);
    if (wake_.wait_for(lock, std::chrono::duration<double>(options_.poll_s),
                       [this] { return stopping_; })) {
      return;
    }
  }
}

TpuProvider::Result TpuProvider::Gcloud(const std::string& subject, const std::string& event,
                                        const std::vector<std::string>& args) {
  Result result;
  process::SpawnRequest request;
  request.argv = {options_.gcloud};
  request.argv.insert(request.argv.end(), args.begin(), args.end());
  request.env_remove = {"TAE_AGENT_TOKEN", "TAE_TLS_KEY"};
  const double start = Now();
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  if (!spawned.ok()) {
    result.err = std::string(spawned.status().message());
  } else {
    // Both pipes until EOF (or the deadline), then the exit status of this very pid.
    std::string* sinks[2] = {&result.out, &result.err};
    int fds[2] = {spawned->stdout_fd, spawned->stderr_fd};
    const double deadline = start + options_.call_timeout_s;
    bool timed_out = false;
    while (fds[0] >= 0 || fds[1] >= 0) {
      pollfd pfds[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
      const double left = deadline - Now();
      if (left <= 0) {
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
        } else if (sinks[i]->size() < (16 << 20)) {
          sinks[i]->append(buf, static_cast<size_t>(n));
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
    result.ok = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (timed_out) {
      result.err = absl::StrCat("no answer within ", options_.call_timeout_s, " s; ", result.err);
    }
  }
  const std::string command = absl::StrCat("gcloud ", absl::StrJoin(args, " "));
  const std::string outcome =
      result.ok ? absl::StrFormat("ok in %.1f s", Now() - start)
                : absl::StrCat("failed: ", ErrorLine(result.err.empty() ? result.out : result.err));
  spdlog::info("gcloud-tpu: {} -> {}", command, outcome);
  if (options_.log) {
    options_.log(subject, event, absl::StrCat(command, " -> ", outcome));
  }
  return result;
}

std::vector<TpuProvider::Vm> TpuProvider::ListVms(const TpuPool& pool) {
  std::vector<Vm> vms;
  for (const std::string& zone : pool.zones) {
    Result listed = Gcloud(pool.name, "list", TpuListArgs(pool, zone));
    nlohmann::json nodes = nlohmann::json::parse(listed.out, nullptr, false);
    if (!listed.ok || !nodes.is_array()) {
      continue;  // logged; the next round tries again
    }
    for (const nlohmann::json& node : nodes) {
      const std::string full = node.value("name", "");
      vms.push_back({full.substr(full.rfind('/') + 1), zone, node.value("state", "")});
    }
  }
  return vms;
}

void TpuProvider::CreateVm(const TpuPool& pool, const std::vector<Vm>& existing) {
  std::set<std::string> taken;
  for (const Vm& vm : existing) {
    taken.insert(vm.name);
  }
  std::string name;
  for (int i = 1; name.empty(); ++i) {
    std::string candidate = absl::StrCat("tae-", pool.name, "-", i);
    if (taken.count(candidate) == 0) {
      name = candidate;
    }
  }
  for (const std::string& zone : pool.zones) {
    Result created = Gcloud(name, "create", TpuCreateArgs(pool, name, zone));
    if (created.ok) {
      return;
    }
    if (!IsCapacityError(created.err + created.out)) {
      return;  // not a stockout (quota, auth, a bad flag): the next round tries again, logged
    }
    // No capacity there: the next zone, as check_zones would.
  }
}

void TpuProvider::Round() {
  const TpuDemand demand = options_.demand ? options_.demand() : TpuDemand{};
  const double now = Now();
  for (const TpuPool& pool : options_.pools) {
    std::vector<Vm> vms = ListVms(pool);
    std::vector<Vm> live;
    bool creating = false;
    for (const Vm& vm : vms) {
      if (vm.state == "PREEMPTED" || vm.state == "TERMINATED") {
        // Its agents are gone; their runs come back to the queue after the grace period, and a
        // new VM is created for them below or in the next round.
        Gcloud(vm.name, "delete", TpuDeleteArgs(pool, vm.name, vm.zone));
        idle_since_.erase(vm.name);
        continue;
      }
      creating = creating || vm.state == "CREATING";
      live.push_back(vm);
    }
    auto waiting_it = demand.waiting.find(pool.name);
    const int waiting = waiting_it == demand.waiting.end() ? 0 : waiting_it->second;
    if (waiting > 0 && !creating && static_cast<int>(live.size()) < pool.max_vms) {
      CreateVm(pool, live);  // a deleted VM's name is free again
    }
    for (const Vm& vm : live) {
      auto busy = demand.busy_vms.find(vm.name);
      const bool idle = vm.state == "READY" && waiting == 0 &&
                        (busy == demand.busy_vms.end() || busy->second == 0);
      if (!idle) {
        idle_since_.erase(vm.name);
        continue;
      }
      auto it = idle_since_.emplace(vm.name, now).first;
      if (now - it->second >= pool.idle_timeout_s) {
        Gcloud(vm.name, "delete", TpuDeleteArgs(pool, vm.name, vm.zone));
        idle_since_.erase(vm.name);
      }
    }
  }
}

}  // namespace tae::provider
