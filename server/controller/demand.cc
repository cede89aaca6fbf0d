#include "server/controller/demand.h"

#include "server/scheduler/scheduler.h"

namespace tae::controller {

provider::TpuDemand TpuDemandOf(const std::vector<DemandPool>& pools,
                                const std::vector<model::RunRecord>& queued,
                                const std::set<int64_t>& paused,
                                const registry::AgentRegistry& agents) {
  provider::TpuDemand demand;
  for (const DemandPool& pool : pools) {
    int& waiting = demand.waiting[pool.name];
    for (const model::RunRecord& run : queued) {
      if (paused.count(run.experiment_id) == 0 && scheduler::LabelsMatch(run.labels, pool.labels)) {
        ++waiting;
      }
    }
  }
  for (const auto& [id, agent] : agents.agents()) {
    auto slice = agent.labels.find("slice");
    if (slice != agent.labels.end()) {
      demand.busy_vms[slice->second] += agent.busy_slots();
    }
  }
  return demand;
}

}  // namespace tae::controller
