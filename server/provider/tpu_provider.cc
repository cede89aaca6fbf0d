#include "server/provider/tpu_provider.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock/clock.h"
#include "common/fs/fs.h"
#include "nlohmann/json.hpp"
#include "server/provider/cli_call.h"
#include "spdlog/spdlog.h"

namespace tae::provider {
namespace {

// obj[key] when it is a string (or a number, as text), else "": gcloud's JSON is read without
// trusting its types (nlohmann's value() throws on a mismatch).
std::string Text(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) {
    return "";
  }
  auto it = obj.find(key);
  if (it == obj.end()) {
    return "";
  }
  if (it->is_string()) {
    return it->get<std::string>();
  }
  return it->is_number() ? it->dump() : "";
}

}  // namespace

TpuProvider::TpuProvider(TpuProviderOptions options) : options_(std::move(options)) {}

TpuProvider::~TpuProvider() { Stop(); }

void TpuProvider::Start() {
  loop_.Start(options_.poll_s, [this] { Round(); });
}

void TpuProvider::Stop() {
  loop_.Stop();
  // Creates in flight end at once: their gcloud calls see the loop aborted (the VM may still come
  // up; the next taed lists it).
  for (auto& [name, creator] : creators_) {
    creator.thread.join();
  }
  creators_.clear();
}

bool TpuProvider::CallsAborted() { return loop_.Aborted(); }

int TpuProvider::DeleteAll() {
  loop_.AllowCalls();  // these calls are wanted; each still has call_timeout_s
  int deleted = 0;
  for (const TpuPool& pool : options_.pools) {
    const Listing listing = List(pool);
    if (!listing.complete) {
      spdlog::warn(
          "gcloud-tpu: pool {}: a zone could not be listed, so its VMs may be left running "
          "(deploy/tpu/teardown.sh)",
          pool.name);
    }
    std::set<std::string> requests_done;
    for (const Vm& vm : listing.vms) {
      requests_done.insert(vm.queued_resource);
      if (vm.state != "DELETING" && DeleteVm(pool, vm)) {
        ++deleted;
      }
    }
    for (const Queued& request : listing.queued) {
      if (requests_done.count(request.name) == 0 && request.state != "DELETING" &&
          Gcloud(request.name, "delete", TpuQueuedDeleteArgs(pool, request.name, request.zone))
              .ok) {
        ++deleted;
      }
    }
  }
  return deleted;
}

TpuProvider::Result TpuProvider::Run(const std::string& subject, const std::string& event,
                                     std::vector<std::string> argv, bool gcloud) {
  if (gcloud) {
    argv.insert(argv.begin(), options_.gcloud);
  }
  CliResult called = RunCli(argv, "", options_.call_timeout_s, [this] { return CallsAborted(); });
  const std::string command =
      gcloud ? absl::StrCat("gcloud ", absl::StrJoin(argv.begin() + 1, argv.end(), " "))
             : absl::StrJoin(argv, " ");
  const std::string outcome = CallOutcome(called);
  spdlog::info("gcloud-tpu: {} -> {}", command, outcome);
  if (options_.log) {
    options_.log(subject, event, absl::StrCat(command, " -> ", outcome));
  }
  return called;
}

TpuProvider::Listing TpuProvider::List(const TpuPool& pool) {
  Listing listing;
  for (const std::string& zone : pool.zones) {
    Result listed = Gcloud(pool.name, "list", TpuListArgs(pool, zone));
    nlohmann::json nodes = nlohmann::json::parse(listed.out, nullptr, false);
    if (!listed.ok || !nodes.is_array()) {
      listing.complete = false;  // logged; the next round tries again
      continue;
    }
    for (const nlohmann::json& node : nodes) {
      if (!node.is_object()) {
        continue;
      }
      const std::string full = Text(node, "name");
      const std::string queued = Text(node, "queuedResource");
      Vm vm{full.substr(full.rfind('/') + 1),    zone, Text(node, "state"), Text(node, "id"), {},
            queued.substr(queued.rfind('/') + 1)};
      auto endpoints = node.find("networkEndpoints");
      if (endpoints != node.end() && endpoints->is_array()) {
        for (const nlohmann::json& endpoint : *endpoints) {
          vm.ips.push_back(Text(endpoint, "ipAddress"));
        }
      }
      listing.vms.push_back(std::move(vm));
    }
    if (!pool.queued) {
      continue;
    }
    Result queued = Gcloud(pool.name, "list", TpuQueuedListArgs(pool, zone));
    nlohmann::json requests = nlohmann::json::parse(queued.out, nullptr, false);
    if (!queued.ok || !requests.is_array()) {
      listing.complete = false;
      continue;
    }
    const std::string prefix = absl::StrCat("tae-", pool.name, "-");
    for (const nlohmann::json& request : requests) {
      if (!request.is_object()) {
        continue;
      }
      const std::string full = Text(request, "name");
      const std::string name = full.substr(full.rfind('/') + 1);
      // Only this pool's, by the exact name it gives: tae-POOL-N (a pool "v4-big" is not pool
      // "v4"'s, and "tae-v4-01" is nobody's).
      int index = 0;
      if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() ||
          name.find_first_not_of("0123456789", prefix.size()) != std::string::npos ||
          name.size() - prefix.size() > 6 ||
          !absl::SimpleAtoi(name.substr(prefix.size()), &index) ||
          absl::StrCat(prefix, index) != name) {
        continue;
      }
      auto state = request.find("state");
      listing.queued.push_back({name, zone, state != request.end() ? Text(*state, "state") : ""});
    }
  }
  return listing;
}

void TpuProvider::StartCreate(const TpuPool& pool, const std::set<std::string>& taken) {
  std::string name;
  for (int i = 1; name.empty(); ++i) {
    std::string candidate = absl::StrCat("tae-", pool.name, "-", i);
    if (taken.count(candidate) == 0 && creators_.count(candidate) == 0) {
      name = candidate;
    }
  }
  // A create waits for the VM (minutes on the real service): on a thread of its own, so the
  // rounds go on (preemptions, agents, other pools) meanwhile.
  {
    absl::MutexLock lock(&mu_);
    creating_.insert(name);
  }
  creators_[name] = {pool.name, std::thread([this, &pool, name] {
                       CreateVm(pool, name);
                       absl::MutexLock lock(&mu_);
                       creating_.erase(name);
                     })};
}

void TpuProvider::JoinFinishedCreates() {
  std::vector<std::string> finished;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, creator] : creators_) {
      if (creating_.count(name) == 0) {
        finished.push_back(name);
      }
    }
  }
  for (const std::string& name : finished) {
    creators_[name].thread.join();
    creators_.erase(name);
  }
}

int TpuProvider::CreatesInFlight(const std::string& pool) const {
  // creators_, not creating_: a create that ends during this round's listing may be missing from
  // it, so it counts until the next round starts (JoinFinishedCreates, before the listing).
  int n = 0;
  for (const auto& [name, creator] : creators_) {
    n += creator.pool == pool ? 1 : 0;
  }
  return n;
}

void TpuProvider::CreateVm(const TpuPool& pool, const std::string& name) {
  for (const std::string& zone : pool.zones) {
    Result created = pool.queued ? Gcloud(name, "create", TpuQueuedCreateArgs(pool, name, zone))
                                 : Gcloud(name, "create", TpuCreateArgs(pool, name, zone));
    if (created.ok) {
      return;
    }
    if (!IsCapacityError(created.err + created.out)) {
      return;  // not a stockout (quota, auth, a bad flag): the next round tries again, logged
    }
    // No capacity there: the next zone, as check_zones would.
  }
}

bool TpuProvider::DeleteVm(const TpuPool& pool, const Vm& vm) {
  StopAgents(vm.name);
  idle_since_.erase(vm.name);
  if (!vm.queued_resource.empty()) {
    // A queued resource's VM goes with it (deleting the VM alone would leave the request).
    return Gcloud(vm.name, "delete", TpuQueuedDeleteArgs(pool, vm.queued_resource, vm.zone)).ok;
  }
  return Gcloud(vm.name, "delete", TpuDeleteArgs(pool, vm.name, vm.zone)).ok;
}

bool TpuProvider::EnsureSshKey() {
  const std::string dir = options_.ssh_home + "/.ssh";
  const std::string key = dir + "/google_compute_engine";
  if (access(key.c_str(), R_OK) == 0 && access((key + ".pub").c_str(), R_OK) == 0) {
    return true;
  }
  // Made once here: sessions starting together would each have gcloud generate one.
  if (options_.ssh_keygen.empty()) {
    if (options_.log) {
      options_.log("ssh key", "keygen",
                   "ssh-keygen is not on taed's PATH, so no agents can be started on TPU VMs: "
                   "apt-get install openssh-client");
    }
    return false;
  }
  mkdir(options_.ssh_home.c_str(), 0700);
  mkdir(dir.c_str(), 0700);
  unlink(key.c_str());
  unlink((key + ".pub").c_str());
  return Run("ssh key", "keygen",
             {options_.ssh_keygen, "-q", "-t", "rsa", "-b", "3072", "-N", "", "-C", "taed", "-f",
              key},
             false)
      .ok;
}

void TpuProvider::WriteKnownHosts() {
  const std::string path = options_.ssh_home + "/.ssh/google_compute_known_hosts";
  std::string text;
  for (const auto& [vm, lines] : known_hosts_) {
    for (const std::string& line : lines) {
      absl::StrAppend(&text, line, "\n");
    }
  }
  // O_CLOEXEC throughout (sessions are forked meanwhile); ssh only reads it.
  if (absl::Status s = fs::WriteFileAtomically(path, text, {0644, fs::Durability::kNone});
      !s.ok()) {
    spdlog::warn("gcloud-tpu: {}", s.ToString());
  }
}

void TpuProvider::StartAgents(const TpuPool& pool, const Vm& vm) {
  auto it = agents_.find(vm.name);
  if (it != agents_.end() && it->second.node_id == vm.id) {
    return;  // running (or being restarted by their supervisor)
  }
  if (it != agents_.end()) {
    StopAgents(vm.name);  // the same name, a new VM
  }
  if (!options_.start_sessions || vm.ips.empty()) {
    return;
  }
  // The workers' host keys, from the guest attributes (the API, not the network): pinned, so
  // the sessions check them strictly instead of trusting whatever answers first.
  Result attributes =
      Gcloud(vm.name, "get-guest-attributes", TpuGuestAttributesArgs(pool, vm.name, vm.zone));
  nlohmann::json items = nlohmann::json::parse(attributes.out, nullptr, false);
  std::map<int, std::string> keys;
  for (const nlohmann::json& item : items.is_array() ? items : nlohmann::json::array()) {
    if (!item.is_object() || Text(item, "key") != "ssh-ed25519" ||
        (item.contains("namespace") && Text(item, "namespace") != "hostkeys") ||
        !item.contains("worker_id")) {
      continue;
    }
    const nlohmann::json& worker = item["worker_id"];
    // gcloud's answer, read as data: a worker id out of int's range is no worker (it once went to
    // std::stoi, whose out_of_range left the round thread and ended taed).
    int index = -1;
    if (worker.is_number_integer()) {
      const int64_t wide = worker.get<int64_t>();
      index = wide >= 0 && wide <= 4096 ? static_cast<int>(wide) : -1;
    } else if (worker.is_string() && !worker.get<std::string>().empty() &&
               worker.get<std::string>().find_first_not_of("0123456789") == std::string::npos) {
      if (!absl::SimpleAtoi(worker.get<std::string>(), &index) || index > 4096) {
        index = -1;
      }
    }
    const std::string value = Text(item, "value");
    if (index >= 0 && !value.empty() && value.find_first_of(" \n") == std::string::npos) {
      keys[index] = value;
    }
  }
  std::vector<std::string> lines;
  for (size_t w = 0; w < vm.ips.size(); ++w) {
    auto key = keys.find(static_cast<int>(w));
    if (key == keys.end()) {
      if (options_.log) {
        options_.log(vm.name, "agents",
                     absl::StrCat("worker ", w,
                                  " has not published its ssh host key in the guest attributes "
                                  "yet; agents start when every worker has"));
      }
      return;
    }
    lines.push_back(TpuKnownHostsLine(vm.id, static_cast<int>(w), "ssh-ed25519", key->second));
  }
  if (!EnsureSshKey()) {
    return;  // logged
  }
  known_hosts_[vm.name] = lines;
  WriteKnownHosts();
  Agents started{pool.name, vm.id, {}};
  std::vector<AgentSession> sessions;
  for (size_t w = 0; w < vm.ips.size(); ++w) {
    const TpuWorker worker{vm.name, vm.zone, static_cast<int>(w), vm.ips[w]};
    AgentSession session;
    session.id = TpuAgentId(worker);
    session.provider = "gcloud-tpu";
    session.argv = TpuSshArgs(pool, worker, options_.tunnel_target);
    session.labels = TpuAgentLabels(pool, worker);
    session.argv.insert(session.argv.begin(), options_.gcloud);
    session.env = {{"HOME", options_.ssh_home}};
    if (!options_.cloudsdk_config.empty()) {
      session.env.emplace_back("CLOUDSDK_CONFIG", options_.cloudsdk_config);
    }
    started.ids.push_back(session.id);
    sessions.push_back(std::move(session));
  }
  if (options_.log) {
    options_.log(vm.name, "agents",
                 absl::StrCat("starting ", sessions.size(), " agent(s) on node ", vm.id, ": ",
                              absl::StrJoin(started.ids, ", ")));
  }
  agents_[vm.name] = std::move(started);
  options_.start_sessions(std::move(sessions));
}

void TpuProvider::StopAgents(const std::string& vm) {
  auto it = agents_.find(vm);
  if (it == agents_.end()) {
    return;
  }
  if (options_.stop_sessions) {
    options_.stop_sessions(it->second.ids);
  }
  if (options_.log) {
    options_.log(vm, "agents", absl::StrCat("stopping ", absl::StrJoin(it->second.ids, ", ")));
  }
  agents_.erase(it);
  if (known_hosts_.erase(vm) > 0) {
    WriteKnownHosts();
  }
}

void TpuProvider::Round() {
  JoinFinishedCreates();
  const std::optional<TpuDemand> asked =
      options_.demand ? options_.demand() : std::optional<TpuDemand>(TpuDemand{});
  if (!asked) {
    // Without it every VM would look idle and nothing would look wanted.
    spdlog::warn("gcloud-tpu: taed's core did not say what runs wait; round skipped");
    return;
  }
  const TpuDemand& demand = *asked;
  const double now = clock::SteadyNow();
  for (const TpuPool& pool : options_.pools) {
    Listing listing = List(pool);
    std::vector<Vm> live;
    std::set<std::string> seen;
    std::set<std::string> taken;  // names in use (a VM or request deleted this round frees its)
    bool creating = false;
    for (const Vm& vm : listing.vms) {
      seen.insert(vm.name);
      if (vm.state == "PREEMPTED" || vm.state == "TERMINATED") {
        // Its agents are gone; their runs come back to the queue after the grace period, and a
        // new VM is created for them below or in the next round. Its name is free once it is.
        if (!DeleteVm(pool, vm)) {
          taken.insert(vm.name);
        }
        continue;
      }
      creating = creating || vm.state == "CREATING";
      taken.insert(vm.name);
      live.push_back(vm);
    }
    // Queued resources still waiting (or provisioning) count as VMs on their way; those that
    // ended without a VM to show for it are deleted.
    int on_the_way = 0;
    for (const Queued& request : listing.queued) {
      seen.insert(request.name);
      const bool has_vm = std::any_of(live.begin(), live.end(), [&](const Vm& vm) {
        return vm.queued_resource == request.name;
      });
      const bool deleted_vm =
          !has_vm && std::any_of(listing.vms.begin(), listing.vms.end(), [&](const Vm& vm) {
            return vm.queued_resource == request.name && taken.count(vm.name) == 0;
          });
      if (request.state == "SUSPENDED" || request.state == "FAILED") {
        if (!has_vm && !deleted_vm) {
          StopAgents(request.name);
          Gcloud(request.name, "delete", TpuQueuedDeleteArgs(pool, request.name, request.zone));
        }
        if (has_vm) {
          taken.insert(request.name);
        }
        continue;
      }
      if (!deleted_vm) {
        taken.insert(request.name);
      }
      if (!has_vm && request.state != "DELETING" && request.state != "SUSPENDING") {
        ++on_the_way;
      }
    }
    auto waiting_it = demand.waiting.find(pool.name);
    const int waiting = waiting_it == demand.waiting.end() ? 0 : waiting_it->second;
    // Only on a complete listing: a zone whose list failed may hold a VM of that name.
    if (listing.complete && waiting > 0 && !creating && on_the_way == 0 &&
        CreatesInFlight(pool.name) == 0 && static_cast<int>(live.size()) < pool.max_vms) {
      StartCreate(pool, taken);  // a deleted VM's name is free again
    }
    std::set<std::string> idle_deleted;
    for (const Vm& vm : live) {
      if (vm.state == "READY") {
        StartAgents(pool, vm);
      } else {
        StopAgents(vm.name);  // STOPPING, REPAIRING, ...: the sessions would only fail
      }
      auto busy = demand.busy_vms.find(vm.name);
      const bool idle = vm.state == "READY" && waiting == 0 &&
                        (busy == demand.busy_vms.end() || busy->second == 0);
      if (!idle) {
        idle_since_.erase(vm.name);
        continue;
      }
      auto it = idle_since_.emplace(vm.name, now).first;
      if (now - it->second >= pool.idle_timeout_s && DeleteVm(pool, vm)) {
        idle_deleted.insert(vm.name);
      }
    }
    if (listing.complete && options_.vms) {
      std::vector<CloudVm> shown;
      for (const Vm& vm : live) {
        if (idle_deleted.count(vm.name) == 0) {
          shown.push_back({"gcloud-tpu", pool.name, vm.name, vm.zone, vm.state, ""});
        }
      }
      options_.vms(pool.name, std::move(shown));
    }
    if (listing.complete) {
      // VMs deleted behind taed's back (the console, teardown.sh): their sessions go too.
      std::vector<std::string> gone;
      for (const auto& [vm, agents] : agents_) {
        if (agents.pool == pool.name && seen.count(vm) == 0) {
          gone.push_back(vm);
        }
      }
      for (const std::string& vm : gone) {
        StopAgents(vm);
        idle_since_.erase(vm);
      }
    }
  }
}

}  // namespace tae::provider
