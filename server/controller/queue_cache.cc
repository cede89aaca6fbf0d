#include "server/controller/queue_cache.h"

#include <algorithm>

namespace tae::controller {
namespace {

bool QueueOrder(const scheduler::QueuedRun& a, const scheduler::QueuedRun& b) {
  return a.priority != b.priority ? a.priority > b.priority : a.run_id < b.run_id;
}

}  // namespace

void QueueCache::Reset(std::vector<model::QueueRow> rows) {
  rows_.clear();
  rows_.reserve(rows.size());
  for (model::QueueRow& row : rows) {
    const int64_t id = row.id;
    rows_[id] = std::move(row);
  }
  loaded_ = true;
  rebuild_ = true;
}

void QueueCache::Update(const std::set<int64_t>& changed, std::vector<model::QueueRow> rows) {
  for (int64_t id : changed) {
    if (rows_.erase(id) > 0) {
      taken_out_.insert(id);
      put_in_.erase(id);
    }
  }
  for (model::QueueRow& row : rows) {
    const int64_t id = row.id;
    rows_[id] = std::move(row);
    put_in_.insert(id);
  }
}

void QueueCache::SetPaused(std::set<int64_t> paused) {
  if (paused != paused_) {
    paused_ = std::move(paused);
    repause_ = true;
  }
}

void QueueCache::Invalidate() {
  rows_.clear();
  runs_.clear();
  loaded_ = false;
  rebuild_ = true;
}

scheduler::QueuedRun QueueCache::ToRun(const model::QueueRow& row) const {
  scheduler::QueuedRun run;
  run.run_id = row.id;
  run.priority = row.priority;
  run.slots = row.slots;
  run.labels = row.labels;
  run.experiment_id = row.experiment_id;
  run.not_before = row.not_before;
  run.max_concurrent = row.max_concurrent;
  run.hosts = row.hosts;
  run.paused = paused_.count(row.experiment_id) > 0;
  return run;
}

const std::vector<scheduler::QueuedRun>& QueueCache::Runs() {
  if (rebuild_) {
    runs_.clear();
    runs_.reserve(rows_.size());
    for (const auto& [id, row] : rows_) {
      runs_.push_back(ToRun(row));
    }
    std::sort(runs_.begin(), runs_.end(), QueueOrder);
  } else {
    if (!taken_out_.empty()) {
      runs_.erase(std::remove_if(runs_.begin(), runs_.end(),
                                 [&](const scheduler::QueuedRun& run) {
                                   return taken_out_.count(run.run_id) > 0;
                                 }),
                  runs_.end());
    }
    if (!put_in_.empty()) {
      const size_t middle = runs_.size();
      for (int64_t id : put_in_) {
        runs_.push_back(ToRun(rows_.at(id)));
      }
      std::sort(runs_.begin() + static_cast<std::ptrdiff_t>(middle), runs_.end(), QueueOrder);
      std::inplace_merge(runs_.begin(), runs_.begin() + static_cast<std::ptrdiff_t>(middle),
                         runs_.end(), QueueOrder);
    }
    if (repause_) {
      for (scheduler::QueuedRun& run : runs_) {
        run.paused = paused_.count(run.experiment_id) > 0;
      }
    }
  }
  rebuild_ = false;
  repause_ = false;
  taken_out_.clear();
  put_in_.clear();
  return runs_;
}

std::vector<std::pair<int64_t, std::string>> QueueCache::ChangedReasons(
    const scheduler::Waiting& waiting) {
  std::vector<std::pair<int64_t, std::string>> changed;
  for (const auto& [run_id, why] : waiting) {
    auto it = rows_.find(run_id);
    if (it != rows_.end() && it->second.reason != why) {
      it->second.reason = why;
      changed.emplace_back(run_id, why);
    }
  }
  return changed;
}

}  // namespace tae::controller
