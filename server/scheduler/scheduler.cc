#include "server/scheduler/scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
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

int Waiting::Reason(std::string text) {
  reasons_.push_back(std::move(text));
  return static_cast<int>(reasons_.size() - 1);
}

void Waiting::Finish() {
  // Stable, so of a run added twice the last entry is kept.
  std::stable_sort(runs_.begin(), runs_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<int64_t, int>> unique;
  unique.reserve(runs_.size());
  for (const auto& entry : runs_) {
    if (!unique.empty() && unique.back().first == entry.first) {
      unique.back() = entry;
    } else {
      unique.push_back(entry);
    }
  }
  runs_ = std::move(unique);
}

const std::string& Waiting::at(int64_t run_id) const {
  auto it = std::lower_bound(runs_.begin(), runs_.end(), run_id,
                             [](const auto& entry, int64_t id) { return entry.first < id; });
  if (it == runs_.end() || it->first != run_id) {
    throw std::out_of_range(absl::StrCat("run ", run_id, " is not waiting"));
  }
  return reasons_[it->second];
}

size_t Waiting::count(int64_t run_id) const {
  auto it = std::lower_bound(runs_.begin(), runs_.end(), run_id,
                             [](const auto& entry, int64_t id) { return entry.first < id; });
  return it != runs_.end() && it->first == run_id ? 1 : 0;
}

bool Waiting::operator==(const Waiting& other) const {
  if (runs_.size() != other.runs_.size()) {
    return false;
  }
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (runs_[i].first != other.runs_[i].first ||
        reasons_[runs_[i].second] != other.reasons_[other.runs_[i].second]) {
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
    return "waiting: every matching agent is draining or quarantined (taectl agents undrain ID)";
  }
  if (largest < run.slots) {
    return "waiting: needs " + std::to_string(run.slots) +
           " slots, the largest matching agent has " + std::to_string(largest);
  }
  return "waiting for a free slot";
}

namespace {

// A run's shape: what decides which agents can take it. Orders runs by it.
struct ShapeLess {
  bool operator()(const QueuedRun* a, const QueuedRun* b) const {
    return std::tie(a->slots, a->hosts, a->labels) < std::tie(b->slots, b->hosts, b->labels);
  }
};

bool SameShape(const QueuedRun& a, const QueuedRun& b) {
  return a.slots == b.slots && a.hosts == b.hosts && a.labels == b.labels;
}

// Whether some agent (or, for a gang, some slice) has room for a run of this shape now.
bool Fits(const QueuedRun& run, std::vector<AgentCapacity>& agents) {
  if (run.hosts > 1) {
    for (const auto& [name, members] : Slices(run, agents, /*need_free=*/true)) {
      if (members.size() >= static_cast<size_t>(run.hosts)) {
        return true;
      }
    }
    return false;
  }
  for (const AgentCapacity& agent : agents) {
    if (agent.free_slots >= run.slots && LabelsMatch(run.labels, agent.labels)) {
      return true;
    }
  }
  return false;
}

}  // namespace

Decision Decide(const std::vector<QueuedRun>& queue, std::vector<AgentCapacity> agents,
                Context context) {
  Decision decision;
  // Why a run of a shape waits depends only on the agents' labels and total slots, which a pass
  // does not change: computed once per shape (a long queue has few).
  Waiting& waiting = decision.waiting;
  std::map<const QueuedRun*, int, ShapeLess> why_by_shape;  // a run of the shape -> its reason
  auto why = [&](const QueuedRun& run) {
    auto [it, inserted] = why_by_shape.try_emplace(&run, 0);
    if (inserted) {
      std::string reason = WhyWaiting(run, agents);
      for (const PoolNote& pool : context.pool_notes) {
        if (LabelsMatch(run.labels, pool.labels)) {
          absl::StrAppend(&reason, "; ", pool.note);
          break;
        }
      }
      it->second = waiting.Reason(std::move(reason));
    }
    return it->second;
  };
  // The same text for every run of a paused experiment, or of one at its cap.
  const int paused = waiting.Reason("experiment paused (taectl resume)");
  const int ladder_held = waiting.Reason(
      "held by scale.stop_if until the ladder's first rungs have ended and been judged");
  std::map<std::pair<int64_t, int>, int> capped;  // (experiment, cap) -> reason
  // The queue's shapes (one run of each): once no agent has room for any of them, nothing more
  // can be placed this pass, and every run left waits for a reason that needs no placement.
  std::set<const QueuedRun*, ShapeLess> shapes;
  const QueuedRun* previous = nullptr;
  for (const QueuedRun& run : queue) {
    if (previous == nullptr || !SameShape(*previous, run)) {  // runs of a study come together
      shapes.insert(&run);
      previous = &run;
    }
  }
  auto room = [&] {
    return std::any_of(shapes.begin(), shapes.end(),
                       [&](const QueuedRun* s) { return Fits(*s, agents); });
  };
  bool has_room = room();
  // Says why `run` waits when that needs no look at the agents (paused, backoff, cap).
  auto held = [&](const QueuedRun& run) {
    if (run.paused) {
      waiting.Add(run.run_id, paused);
      return true;
    }
    if (run.not_before >= model::kHeldNotBefore) {
      waiting.Add(run.run_id, ladder_held);
      return true;
    }
    if (run.not_before > context.now) {
      waiting.Add(run.run_id, waiting.Reason(absl::StrFormat(
                                  "retry backoff after a lost attempt: starts in %.0fs",
                                  run.not_before - context.now)));
      if (decision.wake_at == 0 || run.not_before < decision.wake_at) {
        decision.wake_at = run.not_before;
      }
      return true;
    }
    const int64_t experiment = run.experiment_id;
    if (run.max_concurrent > 0 && context.active[experiment] >= run.max_concurrent) {
      auto [it, inserted] = capped.try_emplace({experiment, run.max_concurrent}, 0);
      if (inserted) {
        it->second = waiting.Reason(absl::StrCat("experiment e", experiment, " at its cap of ",
                                                 run.max_concurrent,
                                                 " active runs (resources.max_concurrent)"));
      }
      waiting.Add(run.run_id, it->second);
      return true;
    }
    return false;
  };
  // A run the pass no longer tries to place: the same reason it would have been given.
  auto left = [&](const QueuedRun& run) {
    if (!held(run)) {
      waiting.Add(run.run_id, why(run));
    }
  };
  // Places `run`, or says why it waits.
  auto decide = [&](const QueuedRun& run) {
    if (held(run)) {
      return;
    }
    const int64_t chosen = run.experiment_id;
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
        waiting.Add(run.run_id, why(run));
        return;
      }
      Placement placement{run.run_id, chosen_hosts[0]->id, {}};
      for (AgentCapacity* host : chosen_hosts) {
        host->free_slots -= run.slots;
        placement.gang.push_back(host->id);
      }
      context.active[chosen] += 1;
      decision.placements.push_back(std::move(placement));
      has_room = room();
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
      waiting.Add(run.run_id, why(run));
      return;
    }
    best->free_slots -= run.slots;
    context.active[chosen] += 1;
    decision.placements.push_back({run.run_id, best->id, {}});
    has_room = room();
  };
  size_t begin = 0;
  while (begin < queue.size()) {
    // One priority level: [begin, end).
    size_t end = begin;
    while (end < queue.size() && queue[end].priority == queue[begin].priority) {
      ++end;
    }
    if (!has_room) {
      for (size_t i = begin; i < end; ++i) {
        left(queue[i]);
      }
      begin = end;
      continue;
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
    while (!turns.empty() && has_room) {
      const int64_t chosen = std::get<2>(*turns.begin());
      turns.erase(turns.begin());
      const std::vector<size_t>& positions = pending[chosen];
      size_t& k = next[chosen];
      decide(queue[positions[k++]]);
      if (k < positions.size()) {
        turns.emplace(context.active[chosen], positions[k], chosen);
      }
    }
    // No room left: the runs not reached wait (their reasons need no order).
    for (const auto& [active, position, experiment] : turns) {
      const std::vector<size_t>& positions = pending[experiment];
      for (size_t k = next[experiment]; k < positions.size(); ++k) {
        left(queue[positions[k]]);
      }
    }
    begin = end;
  }
  waiting.Finish();
  return decision;
}

std::vector<Placement> Place(const std::vector<QueuedRun>& queue,
                             std::vector<AgentCapacity> agents) {
  return Decide(queue, std::move(agents), Context{}).placements;
}

}  // namespace tae::scheduler
