#pragma once

// The queued runs as scheduling passes read them, kept between passes so that a pass costs what
// changed, not the queue: the store's rows (model::QueueRow) are applied as the store says they
// changed (Store::TakeQueueChanges), the pass's input (scheduler::QueuedRun in queue order) is
// rebuilt only after a change, and the waiting reasons are kept as stored, so a pass writes only
// those that differ. Holds no store: the controller reads the rows and hands them in.

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/model/records.h"
#include "server/scheduler/scheduler.h"

namespace tae::controller {

class QueueCache {
 public:
  // Every queued run (Store::QueueRows()).
  void Reset(std::vector<model::QueueRow> rows);
  // `changed`: runs that may have changed; `rows`: those of them queued now (the others left
  // the queue).
  void Update(const std::set<int64_t>& changed, std::vector<model::QueueRow> rows);
  // The experiments that are paused now.
  void SetPaused(std::set<int64_t> paused);
  // Forgets everything: loaded() is false until the next Reset.
  void Invalidate();
  bool loaded() const { return loaded_; }

  // The pass's input: highest priority first, then oldest; paused experiments' runs marked.
  const std::vector<scheduler::QueuedRun>& Runs();
  // The reasons of `waiting` that differ from those stored, in run id order; they are taken as
  // stored from now on (Invalidate if writing them fails).
  std::vector<std::pair<int64_t, std::string>> ChangedReasons(const scheduler::Waiting& waiting);

  size_t size() const { return rows_.size(); }

 private:
  scheduler::QueuedRun ToRun(const model::QueueRow& row) const;

  bool loaded_ = false;
  std::unordered_map<int64_t, model::QueueRow> rows_;  // by run id
  std::set<int64_t> paused_;
  // runs_ is rows_ in queue order once the changes since the last Runs() are applied: all of
  // them again (rebuild_), or only those runs taken out and put in, and the pauses marked again.
  std::vector<scheduler::QueuedRun> runs_;
  bool rebuild_ = true;
  bool repause_ = false;
  std::set<int64_t> taken_out_;
  std::set<int64_t> put_in_;
};

}  // namespace tae::controller
