#include "server/scheduler/scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tae::scheduler {

bool LabelsMatch(const model::Labels& wanted, const model::Labels& offered) {
  for (const auto& [key, value] : wanted) {
    auto it = offered.find(key);
    if (it == offered.end() || it->second != value) {
      return false;
    }
  }
  return true;
}

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

std::string WhyGangWaits(const QueuedRun& run, std::vector<AgentCapacity> agents) {
  size_t largest = 0;
  for (const auto& [name, members] : Slices(run, agents, /*need_free=*/false)) {
    largest = std::max(largest, members.size());
  }
  if (largest >= static_cast<size_t>(run.hosts)) {
    return absl::StrCat("waiting for ", run.hosts, " hosts of one slice with ", run.slots,
                        " free slot(s) each");
  }
  return absl::StrCat("waiting: needs ", run.hosts, " hosts of one slice (agents labelled ",
                      kSliceLabel, "=NAME", run.labels.empty() ? "" : " and the run's labels",
                      "); the largest has ", largest);
}

}  // namespace

std::string WhyWaiting(const QueuedRun& run, const std::vector<AgentCapacity>& agents) {
  if (agents.empty()) {
    return "waiting for an agent to connect";
  }
  if (run.hosts > 1) {
    return WhyGangWaits(run, agents);
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
  if (largest == 0) {
    return "waiting: every matching agent is draining (taectl agents undrain ID)";
  }
  if (largest < run.slots) {
    return "waiting: needs " + std::to_string(run.slots) +
           " slots, the largest matching agent has " + std::to_string(largest);
  }
  return "waiting for a free slot";
}

Decision Decide(const std::vector<QueuedRun>& queue, std::vector<AgentCapacity> agents,
                Context context) {
  Decision decision;
  // Why a run of a shape waits depends only on the agents' labels and total slots, which a pass
  // does not change: computed once per shape (a long queue has few).
  std::map<std::tuple<int, int, model::Labels>, std::string> why_by_shape;
  auto why = [&](const QueuedRun& run) -> const std::string& {
    auto [it, inserted] = why_by_shape.try_emplace({run.slots, run.hosts, run.labels});
    if (inserted) {
      it->second = WhyWaiting(run, agents);
    }
    return it->second;
  };
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
    // The experiments with runs left, ordered by (active runs, position of the next run): the
    // first is the one whose turn it is. Each run costs O(log experiments), not a scan of all.
    std::map<int64_t, size_t> next;  // experiment -> index into pending[experiment]
    std::set<std::tuple<int, size_t, int64_t>> turns;
    for (const auto& [experiment, positions] : pending) {
      turns.emplace(context.active[experiment], positions.front(), experiment);
    }
    // Places `run` of experiment `chosen`, or says why it waits.
    auto decide = [&](const QueuedRun& run, int64_t chosen) {
      if (run.paused) {
        decision.waiting[run.run_id] = "experiment paused (taectl resume)";
        return;
      }
      if (run.not_before > context.now) {
        decision.waiting[run.run_id] = absl::StrFormat(
            "retry backoff after a lost attempt: starts in %.0fs", run.not_before - context.now);
        if (decision.wake_at == 0 || run.not_before < decision.wake_at) {
          decision.wake_at = run.not_before;
        }
        return;
      }
      if (run.max_concurrent > 0 && context.active[chosen] >= run.max_concurrent) {
        decision.waiting[run.run_id] =
            absl::StrCat("experiment e", chosen, " at its cap of ", run.max_concurrent,
                         " active runs (resources.max_concurrent)");
        return;
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
          decision.waiting[run.run_id] = why(run);
          return;
        }
        Placement placement{run.run_id, chosen_hosts[0]->id, {}};
        for (AgentCapacity* host : chosen_hosts) {
          host->free_slots -= run.slots;
          placement.gang.push_back(host->id);
        }
        context.active[chosen] += 1;
        decision.placements.push_back(std::move(placement));
        return;
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
        decision.waiting[run.run_id] = why(run);
        return;
      }
      best->free_slots -= run.slots;
      context.active[chosen] += 1;
      decision.placements.push_back({run.run_id, best->id, {}});
    };
    while (!turns.empty()) {
      const int64_t chosen = std::get<2>(*turns.begin());
      turns.erase(turns.begin());
      const std::vector<size_t>& positions = pending[chosen];
      size_t& k = next[chosen];
      decide(queue[positions[k++]], chosen);
      if (k < positions.size()) {
        turns.emplace(context.active[chosen], positions[k], chosen);
      }
    }
    begin = end;
  }
  return decision;
}

std::vector<Placement> Place(const std::vector<QueuedRun>& queue,
                             std::vector<AgentCapacity> agents) {
  return Decide(queue, std::move(agents), Context{}).placements;
}

}  // namespace tae::scheduler
