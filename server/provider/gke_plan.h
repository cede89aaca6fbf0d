#pragma once

// What the gke provider does with one pool in one round, decided from what it read (each slice's
// JobSet and Workload as gke_status.h describes them, its agents' busy slots) and what taed's
// queue wants (demand.h): a pure function, so every case is unit-tested
// (tests/unit/gke_plan_test.cc) and the provider only carries the actions out with kubectl.
//
// - A slice that finished, was evicted or preempted by Kueue, or failed (a pod failed, a node was
//   lost) is deleted, with its state's words; taed requeues the runs of its agents as the
//   worker's fault when they go, and the next rule asks for a new slice if runs still wait.
// - Runs wait beyond the room the live slices have (a slice Kueue still holds counts as room on
//   its way: its runs would wait for it): one more slice is asked for, at the lowest free index
//   from 1,
//   while the pool has fewer than max_slices. One a round, like the gcloud-tpu provider's VMs.
// - A live slice whose agents have had nothing to do for idle_timeout_s, while nothing waits
//   beyond the other slices' room, is deleted.
// - A slice admitted start_timeout_s ago with fewer agents connected than it has hosts is
//   deleted as failed to start (its pods' reasons are the provider's to add); like a failed one,
//   it is asked for again while runs wait.

#include <string>
#include <vector>

#include "server/provider/gke_pools.h"
#include "server/provider/gke_status.h"

namespace tae::provider {

struct GkeSlice {
  std::string name;  // SliceName(pool, index)
  int index = 0;
  SliceStatus status;
  int busy_slots = 0;     // its agents' busy slots (TpuDemand::busy_vms by its slice label)
  double idle_since = 0;  // when it was created or last had a busy slot (the provider keeps it)
  int agents = 0;         // its agents connected to taed (TpuDemand::agents)
  // When the provider first saw it admitted; 0 when not admitted, or once all its agents had
  // registered (a slice that started is never judged by start_timeout_s again).
  double admitted_since = 0;
};

struct GkeAction {
  enum class Kind { kCreate, kDelete };
  Kind kind = Kind::kCreate;
  std::string name;
  int index = 0;
  std::string why;               // for the provider log, taectl agents and the dashboard
  bool failed_to_start = false;  // a delete for start_timeout_s: the pods' reasons are worth adding
};

// `waiting`: queued runs whose labels the pool's agents satisfy (TpuDemand::waiting).
std::vector<GkeAction> PlanGkePool(const GkePool& pool, const std::vector<GkeSlice>& slices,
                                   int waiting, double now);

}  // namespace tae::provider
