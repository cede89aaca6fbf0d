#pragma once

// What a gke slice is doing, read from the JobSet and its Kueue Workload as `kubectl get -o json`
// prints them: a pure function, so each Kueue and JobSet state is unit-tested with the objects
// the controllers write (tests/unit/gke_status_test.cc), and the provider only acts on the
// answer. Kueue decides when a slice runs and the cluster what fails; TAE shows their words.
//
// Kueue (kueue.x-k8s.io/v1beta1 Workload, one per JobSet, labelled kueue.x-k8s.io/job-uid with
// the JobSet's uid): conditions QuotaReserved, Admitted, Evicted (reason Preempted,
// PodsReadyTimeout, InactiveWorkload, ...), Preempted, Finished. JobSet
// (jobset.x-k8s.io/v1alpha2): spec.suspend, conditions Completed, Failed, Suspended.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/provider/gke_pools.h"

namespace tae::provider {

enum class SliceState {
  kWaiting,   // Kueue holds it: no quota reserved yet (or no Workload yet)
  kAdmitted,  // Kueue admitted it; its pods start (their agents register with taed)
  kEvicted,   // Kueue evicted or preempted it: its runs are requeued as infra faults, and the
              // JobSet is replaced
  kFailed,    // the JobSet failed (a pod failed, a node was lost): the same as evicted
  kFinished,  // it completed (its agents exited): deleted
};

struct SliceStatus {
  SliceState state = SliceState::kWaiting;
  // For taectl queue, taectl agents and the dashboard: Kueue's or the JobSet's own words, e.g.
  // "waiting for quota: couldn't assign flavors to pod set slice: insufficient unused quota for
  // google.com/tpu in flavor v5e, 16 more needed".
  std::string reason;
};

const char* SliceStateName(SliceState state);

// The items of a `kubectl get -o json` answer (a List), or nothing when the text is not one.
std::optional<std::vector<nlohmann::json>> ListItems(const std::string& text);

// object.metadata.name when it is a string, else "".
std::string ObjectName(const nlohmann::json& object);

// Why a slice's pods have not started, from a `kubectl get pods -o json` listing's items: for
// each, "; pod NAME: PHASE" with its first container's waiting reason and message
// (ErrImagePull, ...) and its first false condition's (Unschedulable, ...). Never throws.
std::string DescribePods(const std::vector<nlohmann::json>& pods);

struct ListedSlice {
  std::string name;
  int index = 0;
  SliceStatus status;
};

// The pool's slices among `jobsets` (a listing's items), each read with its Kueue Workload from
// `workloads` (the one labelled kueue.x-k8s.io/job-uid with the JobSet's uid). A JobSet whose
// name is not one TAE gives the pool's slices (SliceIndex) is left out, as is an item that is
// not an object with a name; what a cluster answered is never trusted (never throws).
std::vector<ListedSlice> ReadSlices(const GkePool& pool, const std::vector<nlohmann::json>& jobsets,
                                    const std::vector<nlohmann::json>& workloads);

// Label selectors that list the Workloads Kueue made for `jobsets` (a listing's items) and no
// others: "kueue.x-k8s.io/job-uid in (UID,...)", at most `per_selector` uids each, in listing
// order. A uid that is not 1-63 of [A-Za-z0-9-] (what the API server gives) is left out, so
// nothing a cluster answered can change a selector's meaning; no jobsets: no selectors.
inline constexpr size_t kUidsPerCall = 100;
std::vector<std::string> WorkloadSelectors(const std::vector<nlohmann::json>& jobsets,
                                           size_t per_selector);

// `jobset`: the JobSet object; `workload`: its Workload, or null when Kueue has not made one
// yet. Malformed parts read as absent (never throws).
SliceStatus DescribeSlice(const nlohmann::json& jobset, const nlohmann::json& workload);

}  // namespace tae::provider
