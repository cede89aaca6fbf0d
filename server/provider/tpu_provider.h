#pragma once

// The gcloud-tpu provider's VM lifecycle (tpu_pools.h): on a thread of its own, every poll
// interval it lists each pool's VMs in each zone with the gcloud CLI, deletes PREEMPTED (and
// TERMINATED) ones, creates one when runs wait for the pool and it has fewer than max_vms
// (trying the zones in order, the next one on a capacity error), and deletes a READY VM that has
// had nothing to do for idle_timeout_s. gcloud calls block this thread only; what it needs from
// taed (how many queued runs want a pool, which VMs' agents are busy) comes from the core thread
// through `demand`, and every gcloud call goes to `log` (ProviderLog, on the core thread too).
//
// Not done yet: starting the agents on a READY VM's workers (`gcloud compute tpus tpu-vm ssh
// NAME --worker=all`), so a VM's runs do not start by themselves; the runs wait, and the VM is
// kept while they do.

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/provider/tpu_pools.h"

namespace tae::provider {

// What the provider asks taed each round (answered on the core thread).
struct TpuDemand {
  std::map<std::string, int> waiting;   // pool -> queued runs whose labels its agents satisfy
  std::map<std::string, int> busy_vms;  // VM name (agents' slice label) -> busy slots
};

struct TpuProviderOptions {
  std::vector<TpuPool> pools;
  std::string gcloud;           // path of the gcloud binary
  double poll_s = 10;           // between rounds
  double call_timeout_s = 900;  // one gcloud call (a create waits for the VM)
  // Called from the provider thread; must return what the core thread says (blocks until then).
  std::function<TpuDemand()> demand;
  // Called from the provider thread for every gcloud call: (subject, event, detail).
  std::function<void(std::string, std::string, std::string)> log;
};

class TpuProvider {
 public:
  explicit TpuProvider(TpuProviderOptions options);
  ~TpuProvider();  // Stop()
  void Start();
  // Ends the current round's wait (not a gcloud call in flight: that ends by itself or times
  // out) and joins the thread. VMs are left as they are (they keep costing: `taectl down` says so).
  void Stop();

 private:
  struct Vm {
    std::string name;
    std::string zone;
    std::string state;
  };
  struct Result {
    bool ok = false;
    std::string out;
    std::string err;
  };
  void Loop();
  void Round();
  Result Gcloud(const std::string& subject, const std::string& event,
                const std::vector<std::string>& args);
  std::vector<Vm> ListVms(const TpuPool& pool);
  void CreateVm(const TpuPool& pool, const std::vector<Vm>& existing);

  TpuProviderOptions options_;
  std::map<std::string, double> idle_since_;  // VM -> when it was first seen with nothing to do
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tae::provider
