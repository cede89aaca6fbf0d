#pragma once

// The gcloud-tpu provider's VM lifecycle (tpu_pools.h): on a thread of its own, every poll
// interval it lists each pool's VMs in each zone with the gcloud CLI, deletes PREEMPTED (and
// TERMINATED) ones, creates one when runs wait for the pool and it has fewer than max_vms
// (trying the zones in order, the next one on a capacity error), and deletes a READY VM that has
// had nothing to do for idle_timeout_s. A create, which waits for the VM, runs on a thread of
// its own so that the rounds go on meanwhile. gcloud calls block these threads only; what it needs
// from taed (how many queued runs want a pool, which VMs' agents are busy) comes from the core
// thread through `demand`, and every gcloud call goes to `log` (ProviderLog, on the core thread
// too).
//
// With `queued = true` a pool asks through queued resources instead: `queued-resources create`
// (the next zone only when the create itself fails for capacity; an accepted request waits for
// capacity, and no second one is made meanwhile), and its VMs are deleted through their queued
// resource (`queued-resources delete --force`), as are SUSPENDED or FAILED requests.
//
// Agents: for each READY VM it reads the workers' ssh host keys from the guest attributes, pins
// them in google_compute_known_hosts under a HOME of its own (ssh_home, which also holds taed's
// ssh key), and has one `gcloud compute tpus tpu-vm ssh VM --worker=W
// --strict-host-key-checking=yes --command 'exec tae-agent --stdin ...' -- -R ...` session per
// worker started (start_sessions: LocalProvider supervises them on the core thread). A VM that
// is deleted, recreated (a new node id), or no longer READY has its sessions removed first.

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/provider/cli_call.h"
#include "server/provider/demand.h"
#include "server/provider/provider_log.h"
#include "server/provider/round_loop.h"
#include "server/provider/session.h"
#include "server/provider/tpu_pools.h"

namespace tae::provider {

struct TpuProviderOptions {
  std::vector<TpuPool> pools;
  std::string gcloud;           // path of the gcloud binary
  double poll_s = 10;           // between rounds
  double call_timeout_s = 900;  // one gcloud call (a create waits for the VM)
  // Called from the provider thread at the start of each round; must not block on the core
  // (taed reads its DemandBoard). No answer (nothing recent from the core): the round is skipped.
  std::function<std::optional<TpuDemand>()> demand;
  // Called from the provider thread for every gcloud call: (subject, event, detail).
  std::function<void(std::string, std::string, std::string)> log;
  // Agents on the workers (all unset: VMs only, no agents).
  std::string ssh_home;         // HOME of the ssh sessions (.ssh: taed's key, pinned host keys)
  std::string cloudsdk_config;  // CLOUDSDK_CONFIG of the sessions (gcloud's, HOME aside)
  std::string ssh_keygen;       // path of ssh-keygen ("": not found, no agents)
  std::string tunnel_target;    // taed's loopback agent address, the -R forwards' target
  // Called from the provider thread; must hand over to the core thread and return.
  std::function<void(std::vector<AgentSession>)> start_sessions;
  std::function<void(std::vector<std::string>)> stop_sessions;  // agent ids
  // Called from the provider thread after each complete listing of a pool: its VMs.
  std::function<void(std::string pool, std::vector<CloudVm>)> vms;
};

class TpuProvider {
 public:
  explicit TpuProvider(TpuProviderOptions options);
  ~TpuProvider();  // Stop()
  void Start();
  // Ends the current round's wait (not a gcloud call in flight: that ends by itself or times
  // out) and joins the thread. VMs are left as they are (they keep costing: `taectl down` says so).
  void Stop();
  // After Stop(), on the calling thread: deletes every VM (and queued resource) of every pool,
  // as a fresh listing finds them; returns how many it asked gcloud to delete.
  int DeleteAll();

 private:
  struct Vm {
    std::string name;
    std::string zone;
    std::string state;
    std::string id;                // the numeric node id (new for a recreated VM)
    std::vector<std::string> ips;  // per worker: its internal address
    std::string queued_resource;   // the queued resource that made it, if one did
  };
  struct Queued {
    std::string name;
    std::string zone;
    std::string state;
  };
  struct Listing {
    std::vector<Vm> vms;
    std::vector<Queued> queued;  // the pool's queued resources (queued pools)
    bool complete = true;        // every list call worked (so a VM missing from it is gone)
  };
  struct Agents {
    std::string pool;
    std::string node_id;
    std::vector<std::string> ids;
  };
  using Result = CliResult;
  void Round();
  // Runs argv (gcloud's when `gcloud`), logged as `subject` `event` with its outcome.
  Result Run(const std::string& subject, const std::string& event, std::vector<std::string> argv,
             bool gcloud = true);
  Result Gcloud(const std::string& subject, const std::string& event,
                const std::vector<std::string>& args) {
    return Run(subject, event, args);
  }
  Listing List(const TpuPool& pool);
  void StartCreate(const TpuPool& pool, const std::set<std::string>& taken);
  void CreateVm(const TpuPool& pool, const std::string& name);  // on a creator thread
  void JoinFinishedCreates();
  int CreatesInFlight(const std::string& pool) const;
  bool CallsAborted();
  bool DeleteVm(const TpuPool& pool, const Vm& vm);  // true: gcloud deleted it
  void StartAgents(const TpuPool& pool, const Vm& vm);
  void StopAgents(const std::string& vm);
  bool EnsureSshKey();
  void WriteKnownHosts();

  TpuProviderOptions options_;
  std::map<std::string, double> idle_since_;  // VM -> when it was first seen with nothing to do
  std::map<std::string, Agents> agents_;      // VM -> the sessions started for it
  std::map<std::string, std::vector<std::string>> known_hosts_;  // VM -> pinned host key lines
  struct Creator {
    std::string pool;
    std::thread thread;
  };
  std::map<std::string, Creator> creators_;  // VM -> its create (provider thread)
  absl::Mutex mu_;
  std::set<std::string> creating_ ABSL_GUARDED_BY(mu_);  // VMs whose create has not returned
  RoundLoop loop_;  // last: its thread stops before the members it reads go
};

}  // namespace tae::provider
