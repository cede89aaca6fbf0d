#include "server/scheduler/scheduler.h"

namespace tae::scheduler {

bool LabelsMatch(const store::Labels& wanted, const store::Labels& offered) {
  for (const auto& [key, value] : wanted) {
    auto it = offered.find(key);
    if (it == offered.end() || it->second != value) {
      return false;
    }
  }
  return true;
}

std::vector<Placement> Place(const std::vector<QueuedRun>& queue,
                             std::vector<AgentCapacity> agents) {
  std::vector<Placement> placements;
  for (const QueuedRun& run : queue) {
    AgentCapacity* best = nullptr;
    for (AgentCapacity& agent : agents) {
      if (agent.free_slots < run.slots || !LabelsMatch(run.labels, agent.labels)) {
        continue;
      }
      if (best == nullptr || agent.free_slots > best->free_slots) {
        best = &agent;
      }
    }
    if (best != nullptr) {
      best->free_slots -= run.slots;
      placements.push_back({run.run_id, best->id});
    }
  }
  return placements;
}

}  // namespace tae::scheduler
