#pragma once

// The scheduler's pass as it was before the heap (server/scheduler, Decide): for each queued run
// it scans every experiment with pending runs for the one whose turn it is, O(queue x
// experiments). Kept as the definition of the fair-share order, which the unit test checks the
// heap pass against on random queues, and as the benchmark's reference.

#include "server/scheduler/scheduler.h"

namespace tae::scheduler {

Decision ReferenceDecide(const std::vector<QueuedRun>& queue, std::vector<AgentCapacity> agents,
                         Context context);

}  // namespace tae::scheduler
