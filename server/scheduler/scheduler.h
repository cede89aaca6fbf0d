#pragma once

// Placement: which queued run goes to which agent. A pure function of the queue and the agents'
// free capacity, so every decision is unit-testable without processes or clocks.

#include <cstdint>
#include <string>
#include <vector>

#include "server/store/records.h"

namespace tae::scheduler {

struct AgentCapacity {
  std::string id;
  int free_slots = 0;
  int total_slots = 0;
  store::Labels labels;
};

struct QueuedRun {
  int64_t run_id = 0;
  int priority = 0;
  int slots = 1;
  store::Labels labels;  // every one must be present on the agent with the same value
};

struct Placement {
  int64_t run_id = 0;
  std::string agent_id;
};

bool LabelsMatch(const store::Labels& wanted, const store::Labels& offered);

// Why `run` cannot be placed on any of `agents` (given their total slots), e.g. "no agent has
// accelerator=v4-8"; "waiting for a free slot" when one could take it once it frees up.
std::string WhyWaiting(const QueuedRun& run, const std::vector<AgentCapacity>& agents);

// Places runs in queue order (the caller sorts by priority, then age) onto the agent with the
// most free slots that matches; a run that fits nowhere does not block smaller runs behind it.
std::vector<Placement> Place(const std::vector<QueuedRun>& queue,
                             std::vector<AgentCapacity> agents);

}  // namespace tae::scheduler
