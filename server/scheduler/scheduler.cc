#include "server/scheduler/scheduler.h"

#include <algorithm>

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

std::string WhyWaiting(const QueuedRun& run, const std::vector<AgentCapacity>& agents) {
  if (agents.empty()) {
    return "waiting for an agent to connect";
  }
  int largest = 0;
  bool labels_ok = false;
  for (const AgentCapacity& agent : agents) {
    if (LabelsMatch(run.labels, agent.labels)) {
      labels_ok = true;
      largest = std::max(largest, agent.total_slots);
    }
  }
  if (!labels_ok) {
    std::string wanted;
    for (const auto& [key, value] : run.labels) {
      wanted += (wanted.empty() ? "" : ",") + key + "=" + value;
    }
    return "waiting: no connected agent has " + wanted;
  }
  if (largest < run.slots) {
    return "waiting: needs " + std::to_string(run.slots) +
           " slots, the largest matching agent has " + std::to_string(largest);
  }
  return "waiting for a free slot";
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
