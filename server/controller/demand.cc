#include "server/controller/demand.h"

#include "absl/strings/str_cat.h"
#include "server/scheduler/scheduler.h"

namespace tae::controller {

std::vector<scheduler::PoolNote> PoolNotesOf(const std::vector<DemandPool>& pools,
                                             const std::vector<provider::CloudVm>& slices) {
  std::vector<scheduler::PoolNote> notes;
  for (const DemandPool& pool : pools) {
    for (const provider::CloudVm& slice : slices) {
      if (slice.pool == pool.name && slice.state == "waiting") {
        notes.push_back(
            {pool.labels, absl::StrCat(slice.provider, " slice ", slice.name, ": ",
                                       slice.detail.empty() ? slice.state : slice.detail)});
        break;
      }
    }
  }
  return notes;
}

provider::TpuDemand TpuDemandOf(const std::vector<DemandPool>& pools,
                                const std::vector<scheduler::QueuedRun>& queued,
                                const registry::AgentRegistry& agents) {
  provider::TpuDemand demand;
  for (const DemandPool& pool : pools) {
    int& waiting = demand.waiting[pool.name];
    for (const scheduler::QueuedRun& run : queued) {
      if (!run.paused && run.not_before < model::kHeldNotBefore &&
          scheduler::LabelsMatch(run.labels, pool.labels)) {
        ++waiting;
      }
    }
  }
  for (const auto& [id, agent] : agents.agents()) {
    auto slice = agent.labels.find("slice");
    if (slice != agent.labels.end()) {
      demand.busy_vms[slice->second] += agent.busy_slots();
      demand.agents[slice->second] += agent.connected ? 1 : 0;
    }
  }
  return demand;
}

}  // namespace tae::controller
