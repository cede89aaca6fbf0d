#include "server/provider/gke_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace tae::provider {
namespace {

bool Gone(SliceState state) {
  return state == SliceState::kFinished || state == SliceState::kEvicted ||
         state == SliceState::kFailed;
}

}  // namespace

std::vector<GkeAction> PlanGkePool(const GkePool& pool, const std::vector<GkeSlice>& slices,
                                   int waiting, double now) {
  std::vector<GkeAction> actions;
  const int capacity = std::max(1, pool.slots) * std::max(1, pool.hosts);
  std::vector<const GkeSlice*> live;
  std::set<int> taken;
  for (const GkeSlice& slice : slices) {
    taken.insert(slice.index);  // a slice being deleted keeps its name until it is gone
    if (slice.status.state == SliceState::kAdmitted && slice.admitted_since > 0 &&
        slice.agents < pool.hosts && now - slice.admitted_since >= pool.start_timeout_s) {
      actions.push_back({GkeAction::Kind::kDelete, slice.name, slice.index,
                         absl::StrCat("failed to start: ", slice.agents, " of its ", pool.hosts,
                                      " agents registered within start_timeout_s = ",
                                      pool.start_timeout_s, " s of its admission"),
                         /*failed_to_start=*/true});
    } else if (Gone(slice.status.state)) {
      actions.push_back(
          {GkeAction::Kind::kDelete, slice.name, slice.index,
           absl::StrCat(SliceStateName(slice.status.state), slice.status.reason.empty() ? "" : ": ",
                        slice.status.reason)});
    } else {
      live.push_back(&slice);
    }
  }
  // Room in slots: what the live slices' agents have free, a held slice's all of it.
  int room = 0;
  for (const GkeSlice* slice : live) {
    room += std::max(0, capacity - slice->busy_slots);
  }
  if (waiting > room && static_cast<int>(live.size()) < pool.max_slices) {
    int index = 1;  // tae-NAME-1, tae-NAME-2, ...
    while (taken.count(index) > 0) {
      ++index;
    }
    actions.push_back(
        {GkeAction::Kind::kCreate, SliceName(pool, index), index,
         absl::StrCat(waiting, " run(s) wait for pool ", pool.name, ", room for ", room)});
    return actions;  // nothing idle is deleted in a round that asks for more
  }
  for (const GkeSlice* slice : live) {
    const int others = room - std::max(0, capacity - slice->busy_slots);
    if (slice->busy_slots == 0 && waiting <= others &&
        now - slice->idle_since >= pool.idle_timeout_s) {
      actions.push_back({GkeAction::Kind::kDelete, slice->name, slice->index,
                         absl::StrCat("idle for ", static_cast<int64_t>(now - slice->idle_since),
                                      " s (idle_timeout_s = ", pool.idle_timeout_s, ")")});
      room = others;  // the next one is judged without this one
    }
  }
  return actions;
}

}  // namespace tae::provider
