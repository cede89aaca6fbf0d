#include "server/provider/gke_provider.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock/clock.h"
#include "nlohmann/json.hpp"
#include "server/provider/cli_call.h"
#include "server/provider/gke_status.h"
#include "spdlog/spdlog.h"

namespace tae::provider {
namespace {

std::string Selector(const GkePool& pool) {
  return absl::StrCat(kTaeLabel, "=true,", kPoolLabel, "=", pool.name);
}

}  // namespace

GkeProvider::GkeProvider(GkeProviderOptions options) : options_(std::move(options)) {}

GkeProvider::~GkeProvider() { Stop(); }

void GkeProvider::Start() {
  loop_.Start(options_.poll_s, [this] { Round(); });
}

void GkeProvider::Stop() { loop_.Stop(); }

bool GkeProvider::CallsAborted() { return loop_.Aborted(); }

GkeProvider::Result GkeProvider::Kubectl(const GkePool& pool, const std::string& subject,
                                         const std::string& event,
                                         const std::vector<std::string>& args,
                                         const std::string& input) {
  std::vector<std::string> argv = {options_.kubectl};
  if (!pool.context.empty()) {
    argv.insert(argv.end(), {"--context", pool.context});
  }
  argv.insert(argv.end(), {"--namespace", pool.namespace_, "--request-timeout",
                           absl::StrCat(static_cast<int>(options_.call_timeout_s), "s")});
  argv.insert(argv.end(), args.begin(), args.end());
  CliResult called =
      RunCli(argv, input, options_.call_timeout_s, [this] { return CallsAborted(); });
  const std::string command =
      absl::StrCat("kubectl ", absl::StrJoin(argv.begin() + 1, argv.end(), " "));
  const std::string outcome = CallOutcome(called);
  spdlog::info("gke: {} -> {}", command, outcome);
  if (options_.log) {
    options_.log(subject, event, absl::StrCat(command, " -> ", outcome));
  }
  return called;
}

void GkeProvider::Round() {
  if (!options_.demand) {
    return;
  }
  std::optional<TpuDemand> demand = options_.demand();
  if (!demand.has_value()) {
    return;  // without taed's word every slice would look idle and nothing wanted
  }
  for (const GkePool& pool : options_.pools) {
    if (CallsAborted()) {
      return;
    }
    RoundPool(pool, *demand, clock::SteadyNow());
  }
}

void GkeProvider::RoundPool(const GkePool& pool, const TpuDemand& demand, double now) {
  Result listed = Kubectl(pool, pool.name, "list",
                          {"get", "jobsets.jobset.x-k8s.io", "-l", Selector(pool), "-o", "json"});
  const std::optional<std::vector<nlohmann::json>> jobsets = ListItems(listed.out);
  if (!listed.ok || !jobsets.has_value()) {
    return;  // logged; the next round tries again
  }
  // Only the Workloads of these JobSets (Kueue labels each with its job's uid), not the
  // namespace's: a few calls of at most kUidsPerCall uids each.
  std::vector<nlohmann::json> workloads;
  const std::vector<std::string> selectors = WorkloadSelectors(*jobsets, kUidsPerCall);
  for (const std::string& selector : selectors) {
    Result wl = Kubectl(pool, pool.name, "list",
                        {"get", "workloads.kueue.x-k8s.io", "-l", selector, "-o", "json"});
    std::optional<std::vector<nlohmann::json>> items = ListItems(wl.out);
    if (!wl.ok || !items.has_value()) {
      return;  // without them an evicted slice would read as waiting
    }
    workloads.insert(workloads.end(), std::make_move_iterator(items->begin()),
                     std::make_move_iterator(items->end()));
  }
  std::vector<GkeSlice> slices;
  std::vector<CloudVm> shown;
  std::set<std::string> names;
  for (ListedSlice& listed_slice : ReadSlices(pool, *jobsets, workloads)) {
    const std::string name = listed_slice.name;
    names.insert(name);
    GkeSlice slice;
    slice.name = name;
    slice.index = listed_slice.index;
    slice.status = std::move(listed_slice.status);
    auto busy = demand.busy_vms.find(name);
    slice.busy_slots = busy == demand.busy_vms.end() ? 0 : busy->second;
    double& idle_since = idle_since_.try_emplace(name, now).first->second;
    if (slice.busy_slots > 0) {
      idle_since = now;
    }
    slice.idle_since = idle_since;
    auto agents = demand.agents.find(name);
    slice.agents = agents == demand.agents.end() ? 0 : agents->second;
    if (slice.status.state == SliceState::kAdmitted) {
      double& admitted = admitted_since_.try_emplace(name, now).first->second;
      if (slice.agents >= pool.hosts) {
        admitted = 0;  // started: from now on a missing agent is the cluster's or taed's to tell
      }
      slice.admitted_since = admitted;
    }
    shown.push_back({"gke", pool.name, name, pool.namespace_, SliceStateName(slice.status.state),
                     slice.status.reason});
    slices.push_back(std::move(slice));
  }
  for (auto* kept : {&idle_since_, &admitted_since_}) {
    for (auto it = kept->begin(); it != kept->end();) {
      it = SliceIndex(pool, it->first) > 0 && names.count(it->first) == 0 ? kept->erase(it)
                                                                          : std::next(it);
    }
  }
  if (swept_.insert(pool.name).second) {
    DeleteOrphanSecrets(pool, names);
  }
  auto waiting = demand.waiting.find(pool.name);
  for (const GkeAction& action :
       PlanGkePool(pool, slices, waiting == demand.waiting.end() ? 0 : waiting->second, now)) {
    if (CallsAborted()) {
      return;
    }
    // What taed shows follows what was done: a slice just asked for waits for Kueue's word, one
    // deleted is gone.
    if (action.kind == GkeAction::Kind::kCreate) {
      if (CreateSlice(pool, action)) {
        shown.push_back({"gke", pool.name, action.name, pool.namespace_,
                         SliceStateName(SliceState::kWaiting),
                         "asked for; waiting for Kueue to queue it"});
      }
    } else if (DeleteSlice(pool, action)) {
      shown.erase(std::remove_if(shown.begin(), shown.end(),
                                 [&](const CloudVm& vm) { return vm.name == action.name; }),
                  shown.end());
    }
  }
  if (options_.slices) {
    options_.slices(pool.name, std::move(shown));
  }
}

namespace {

// The agent ids of a slice's pods: SLICE-w0 ... (the JobSet's AgentScript).
std::vector<std::string> SliceAgentIds(const GkePool& pool, const std::string& slice) {
  std::vector<std::string> ids;
  for (int w = 0; w < pool.hosts; ++w) {
    ids.push_back(absl::StrCat(slice, "-w", w));
  }
  return ids;
}

}  // namespace

bool GkeProvider::CreateSlice(const GkePool& pool, const GkeAction& action) {
  const std::vector<std::string> ids = SliceAgentIds(pool, action.name);
  std::vector<std::map<std::string, std::string>> labels;
  for (int w = 0; w < pool.hosts; ++w) {
    labels.push_back(SliceAgentLabels(pool, action.name, w));
  }
  absl::StatusOr<std::vector<std::string>> credentials =
      options_.mint ? options_.mint(ids, labels)
                    : absl::StatusOr<std::vector<std::string>>(
                          absl::FailedPreconditionError("no credentials can be made"));
  if (!credentials.ok() || credentials->size() != ids.size()) {
    const std::string why =
        credentials.ok() ? std::string("too few") : std::string(credentials.status().message());
    spdlog::warn("gke: {}: its agents' credentials: {}", action.name, why);
    if (options_.log) {
      options_.log(action.name, "create", absl::StrCat("not made: its agents' credentials: ", why));
    }
    return false;
  }
  if (options_.log) {
    options_.log(action.name, "create", action.why);
  }
  // A Secret of an earlier life of this name goes first: `create` then makes it afresh.
  DeleteSecret(pool, action.name);
  if (!Kubectl(pool, action.name, "secret", {"create", "-f", "-", "-o", "name"},
               SecretManifest(pool, action.name, *credentials).dump())
           .ok) {
    return false;  // logged; the next round asks again
  }
  if (!Kubectl(pool, action.name, "create", {"apply", "-f", "-", "-o", "name"},
               JobSetManifest(pool, action.name).dump())
           .ok) {
    DeleteSecret(pool, action.name);
    return false;
  }
  idle_since_[action.name] = clock::SteadyNow();
  return true;
}

bool GkeProvider::DeleteSlice(const GkePool& pool, const GkeAction& action) {
  if (options_.log) {
    options_.log(action.name, "delete",
                 action.failed_to_start ? absl::StrCat(action.why, PodReasons(pool, action.name))
                                        : action.why);
  }
  if (Kubectl(
          pool, action.name, "delete",
          {"delete", "jobsets.jobset.x-k8s.io", action.name, "--ignore-not-found", "--wait=false"})
          .ok) {
    DeleteSecret(pool, action.name);
    if (options_.retire) {
      options_.retire(SliceAgentIds(pool, action.name));
    }
    idle_since_.erase(action.name);
    return true;
  }
  return false;
}

std::string GkeProvider::PodReasons(const GkePool& pool, const std::string& slice) {
  Result listed = Kubectl(
      pool, slice, "list",
      {"get", "pods", "-l", absl::StrCat("jobset.sigs.k8s.io/jobset-name=", slice), "-o", "json"});
  const std::optional<std::vector<nlohmann::json>> pods = ListItems(listed.out);
  return listed.ok && pods.has_value() ? DescribePods(*pods) : "";
}

void GkeProvider::DeleteSecret(const GkePool& pool, const std::string& name) {
  Kubectl(pool, name, "secret", {"delete", "secret", name, "--ignore-not-found", "--wait=false"});
}

void GkeProvider::DeleteOrphanSecrets(const GkePool& pool, const std::set<std::string>& jobsets) {
  Result listed =
      Kubectl(pool, pool.name, "list", {"get", "secrets", "-l", Selector(pool), "-o", "json"});
  const std::optional<std::vector<nlohmann::json>> items = ListItems(listed.out);
  if (!listed.ok || !items.has_value()) {
    swept_.erase(pool.name);  // the next round looks again
    return;
  }
  for (const nlohmann::json& secret : *items) {
    const std::string name = ObjectName(secret);
    if (SliceIndex(pool, name) > 0 && jobsets.count(name) == 0) {
      DeleteSecret(pool, name);
    }
  }
}

int GkeProvider::DeleteAll() {
  loop_.AllowCalls();  // these calls are wanted; each still has call_timeout_s
  int deleted = 0;
  for (const GkePool& pool : options_.pools) {
    Result gone = Kubectl(pool, pool.name, "delete",
                          {"delete", "jobsets.jobset.x-k8s.io,secrets", "-l", Selector(pool),
                           "--ignore-not-found", "--wait=false", "-o", "name"});
    if (!gone.ok) {
      spdlog::warn(
          "gke: pool {}: its JobSets could not be deleted, so they may hold the queue's quota: "
          "kubectl --namespace {} delete jobsets,secrets -l {}",
          pool.name, pool.namespace_, Selector(pool));
      continue;
    }
    size_t start = 0;
    while (start < gone.out.size()) {
      size_t end = gone.out.find('\n', start);
      if (end == std::string::npos) {
        end = gone.out.size();
      }
      if (gone.out.compare(start, 7, "jobset.") == 0) {
        ++deleted;
        // "jobset.jobset.x-k8s.io/NAME": the slice's agents' credentials die with it.
        const size_t slash = gone.out.find('/', start);
        if (options_.retire && slash != std::string::npos && slash < end) {
          options_.retire(SliceAgentIds(pool, gone.out.substr(slash + 1, end - slash - 1)));
        }
      }
      start = end + 1;
    }
  }
  return deleted;
}

}  // namespace tae::provider
