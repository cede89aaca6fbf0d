#pragma once

// Placement: which queued run goes to which agent. A pure function of the queue and the agents'
// free capacity, so every decision is unit-testable without processes or clocks.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "server/model/records.h"

namespace tae::scheduler {

struct AgentCapacity {
  std::string id;
  int free_slots = 0;
  int total_slots = 0;
  model::Labels labels;
};

struct QueuedRun {
  int64_t run_id = 0;
  int priority = 0;
  int slots = 1;
  model::Labels labels;  // every one must be present on the agent with the same value
  int64_t experiment_id = 0;
  double not_before = 0;   // backoff: not started before this time
  int max_concurrent = 0;  // cap on the experiment's active runs; 0: none
  bool paused = false;     // its experiment is paused
  int hosts = 1;           // > 1: a gang of this many agents of one slice, `slots` on each
};

struct Placement {
  int64_t run_id = 0;
  std::string agent_id;  // rank 0's
  // A gang: every rank's agent, rank order (agent_id is gang[0]); empty for one host.
  std::vector<std::string> gang;
};

// The label that puts agents in one slice (the hosts of a TPU pod slice), and the one that
// orders them in it (the TPU worker index): a gang takes agents of one slice, ranks in worker
// order (then id).
inline constexpr char kSliceLabel[] = "slice";
inline constexpr char kWorkerLabel[] = "worker";

// Everything Decide needs besides the queue and the agents.
struct Context {
  double now = 0;
  std::map<int64_t, int> active;  // experiment id -> its assigned + running runs
};

struct Decision {
  std::vector<Placement> placements;
  std::map<int64_t, std::string> waiting;  // run id -> why it was not placed
  double wake_at = 0;                      // earliest backoff end among waiting runs; 0: none
};

bool LabelsMatch(const model::Labels& wanted, const model::Labels& offered);

// Why `run` cannot be placed on any of `agents` (given their total slots), e.g. "no agent has
// accelerator=v4-8"; "waiting for a free slot" when one could take it once it frees up.
std::string WhyWaiting(const QueuedRun& run, const std::vector<AgentCapacity>& agents);

// Places runs onto the matching agent with the most free slots; a gang (hosts > 1) all at once
// on `hosts` matching agents of one slice with `slots` free each, or not at all. `queue` is sorted
// by priority (highest first), then age. Within one priority, experiments take turns (fair share):
// the next run comes from the experiment with the fewest active runs, ties to the one whose next
// run is oldest. A run is skipped, with its reason in `waiting`, while its experiment is paused,
// its backoff has not ended, or its experiment is at max_concurrent; a run that fits on no agent
// now does not block smaller runs behind it.
Decision Decide(const std::vector<QueuedRun>& queue, std::vector<AgentCapacity> agents,
                Context context);

// Decide's placements only (no pauses, caps or backoff in the queue).
std::vector<Placement> Place(const std::vector<QueuedRun>& queue,
                             std::vector<AgentCapacity> agents);

}  // namespace tae::scheduler
