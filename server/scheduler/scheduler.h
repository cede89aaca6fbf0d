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
  int total_slots = 0;  // 0 while draining or quarantined: it takes no runs until undrained
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

// What a provider says of the agents a pool of its will bring, e.g. "gke slice tae-v5e-1:
// waiting for quota: ..." while Kueue holds it: added to the reason of every waiting run the
// pool's agents (`labels`) would take.
struct PoolNote {
  model::Labels labels;
  std::string note;
};

// Everything Decide needs besides the queue and the agents.
struct Context {
  double now = 0;
  std::map<int64_t, int> active;  // experiment id -> its assigned + running runs
  std::vector<PoolNote> pool_notes;
};

// Why each run a pass did not place waits. A long queue has few distinct reasons (one per shape,
// pause or cap), so each is kept once and the runs point at it: filling this for 30,000 runs
// costs a few hundred microseconds, not 30,000 strings.
class Waiting {
 public:
  // Building (Decide): a reason's index, then the runs that wait for it, then Finish.
  int Reason(std::string text);
  void Add(int64_t run_id, int reason) { runs_.emplace_back(run_id, reason); }
  void Finish();  // orders the runs by id (a run added twice keeps its last reason)

  // Reading, as a std::map<int64_t, std::string> from run id to reason would.
  const std::string& at(int64_t run_id) const;  // std::out_of_range when not waiting
  size_t count(int64_t run_id) const;
  size_t size() const { return runs_.size(); }
  bool empty() const { return runs_.empty(); }
  class const_iterator {
   public:
    const_iterator(const Waiting* owner, size_t i) : owner_(owner), i_(i) {}
    std::pair<int64_t, const std::string&> operator*() const {
      return {owner_->runs_[i_].first, owner_->reasons_[owner_->runs_[i_].second]};
    }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const const_iterator& other) const { return i_ != other.i_; }

   private:
    const Waiting* owner_;
    size_t i_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, runs_.size()}; }
  bool operator==(const Waiting& other) const;
  bool operator!=(const Waiting& other) const { return !(*this == other); }

 private:
  std::vector<std::string> reasons_;
  std::vector<std::pair<int64_t, int>> runs_;  // (run id, index into reasons_)
};

struct Decision {
  std::vector<Placement> placements;
  Waiting waiting;     // every queued run not placed, and why
  double wake_at = 0;  // earliest backoff end among waiting runs; 0: none
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
