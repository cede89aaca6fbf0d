#include "bench/scheduler/reference.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tae::scheduler {
namespace {

// The worker index label as a number (agents without one sort after those with one).
long WorkerIndex(const AgentCapacity& agent) {
  auto it = agent.labels.find(kWorkerLabel);
  long index = 0;
  if (it == agent.labels.end() || !absl::SimpleAtoi(it->second, &index) || index < 0) {
    return std::numeric_limits<long>::max();
  }
  return index;
}

// Matching agents grouped by slice, each group in rank order. `need_free`: only agents with
// run.slots free (else every matching agent that is not draining).
std::map<std::string, std::vector<AgentCapacity*>> Slices(const QueuedRun& run,
                                                          std::vector<AgentCapacity>& agents,
                                                          bool need_free) {
  std::map<std::string, std::vector<AgentCapacity*>> slices;
  for (AgentCapacity& agent : agents) {
    auto slice = agent.labels.find(kSliceLabel);
    if (slice == agent.labels.end() || !LabelsMatch(run.labels, agent.labels) ||
        (need_free ? agent.free_slots < run.slots : agent.total_slots < run.slots)) {
      continue;
    }
    slices[slice->second].push_back(&agent);
  }
  for (auto& [name, members] : slices) {
    std::sort(members.begin(), members.end(), [](const AgentCapacity* a, const AgentCapacity* b) {
      const long wa = WorkerIndex(*a);
      const long wb = WorkerIndex(*b);
      return wa != wb ? wa < wb : a->id < b->id;
    });
  }
  return slices;
}

}  // namespace

Decision ReferenceDecide(const std::vector<QueuedRun>& queue, std::vector<AgentCapacity> agents,
                         Context context) {
  Decision decision;
  size_t begin = 0;
  while (begin < queue.size()) {
    // One priority level: [begin, end).
    size_t end = begin;
    while (end < queue.size() && queue[end].priority == queue[begin].priority) {
      ++end;
    }
    // Per experiment, its runs of this level in queue order (positions into `queue`).
    std::map<int64_t, std::vector<size_t>> pending;
    for (size_t i = begin; i < end; ++i) {
      pending[queue[i].experiment_id].push_back(i);
    }
    std::map<int64_t, size_t> next;  // experiment -> index into pending[experiment]
    while (true) {
      // The experiment with the fewest active runs; ties: the oldest next run.
      int64_t chosen = 0;
      bool found = false;
      for (const auto& [experiment, positions] : pending) {
        const size_t k = next[experiment];
        if (k >= positions.size()) {
          continue;
        }
        if (!found) {
          chosen = experiment;
          found = true;
          continue;
        }
        const int a = context.active[experiment];
        const int b = context.active[chosen];
        if (a < b || (a == b && positions[k] < pending[chosen][next[chosen]])) {
          chosen = experiment;
        }
      }
      if (!found) {
        break;
      }
      const QueuedRun& run = queue[pending[chosen][next[chosen]++]];
      if (run.paused) {
        decision.waiting.Add(run.run_id,
                             decision.waiting.Reason("experiment paused (taectl resume)"));
        continue;
      }
      if (run.not_before > context.now) {
        decision.waiting.Add(run.run_id, decision.waiting.Reason(absl::StrFormat(
                                             "retry backoff after a lost attempt: starts in %.0fs",
                                             run.not_before - context.now)));
        if (decision.wake_at == 0 || run.not_before < decision.wake_at) {
          decision.wake_at = run.not_before;
        }
        continue;
      }
      if (run.max_concurrent > 0 && context.active[chosen] >= run.max_concurrent) {
        decision.waiting.Add(run.run_id,
                             decision.waiting.Reason(absl::StrCat(
                                 "experiment e", chosen, " at its cap of ", run.max_concurrent,
                                 " active runs (resources.max_concurrent)")));
        continue;
      }
      if (run.hosts > 1) {
        // All or nothing: the first slice (by name) with enough free hosts, ranks in worker order.
        std::vector<AgentCapacity*> chosen_hosts;
        for (auto& [name, members] : Slices(run, agents, /*need_free=*/true)) {
          if (members.size() >= static_cast<size_t>(run.hosts)) {
            chosen_hosts.assign(members.begin(), members.begin() + run.hosts);
            break;
          }
        }
        if (chosen_hosts.empty()) {
          decision.waiting.Add(run.run_id, decision.waiting.Reason(WhyWaiting(run, agents)));
          continue;
        }
        Placement placement{run.run_id, chosen_hosts[0]->id, {}};
        for (AgentCapacity* host : chosen_hosts) {
          host->free_slots -= run.slots;
          placement.gang.push_back(host->id);
        }
        context.active[chosen] += 1;
        decision.placements.push_back(std::move(placement));
        continue;
      }
      AgentCapacity* best = nullptr;
      for (AgentCapacity& agent : agents) {
        if (agent.free_slots < run.slots || !LabelsMatch(run.labels, agent.labels)) {
          continue;
        }
        if (best == nullptr || agent.free_slots > best->free_slots) {
          best = &agent;
        }
      }
      if (best == nullptr) {
        decision.waiting.Add(run.run_id, decision.waiting.Reason(WhyWaiting(run, agents)));
        continue;
      }
      best->free_slots -= run.slots;
      context.active[chosen] += 1;
      decision.placements.push_back({run.run_id, best->id, {}});
    }
    begin = end;
  }
  decision.waiting.Finish();
  return decision;
}

}  // namespace tae::scheduler
