#pragma once

// What the TPU pools are wanted for, decided from the queue and the agents: a pure function,
// called by the controller on the core thread, published to the provider through a DemandBoard.

#include <set>
#include <string>
#include <vector>

#include "server/model/records.h"
#include "server/provider/demand.h"
#include "server/provider/provider_log.h"
#include "server/registry/registry.h"
#include "server/scheduler/scheduler.h"

namespace tae::controller {

// A pool as the controller sees it: its name and the labels its agents carry.
struct DemandPool {
  std::string name;
  model::Labels labels;
};

// waiting[pool]: the queued runs, not paused, whose labels the pool's agents satisfy (every pool
// is listed, 0 included); busy_vms[slice]: busy slots of the agents labelled with that slice (a
// TPU VM's name).
// For the queue's reasons: per pool, its first slice a provider shows waiting (a gke slice Kueue
// holds), as "gke slice NAME: DETAIL".
std::vector<scheduler::PoolNote> PoolNotesOf(const std::vector<DemandPool>& pools,
                                             const std::vector<provider::CloudVm>& slices);

provider::TpuDemand TpuDemandOf(const std::vector<DemandPool>& pools,
                                const std::vector<scheduler::QueuedRun>& queued,
                                const registry::AgentRegistry& agents);

}  // namespace tae::controller
