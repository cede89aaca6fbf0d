#include "server/http/series_cache.h"

#include <algorithm>

namespace tae::http {

SeriesCache::SeriesCache(query::Query* query, int64_t max_bytes)
    : query_(query), max_bytes_(max_bytes) {}

absl::StatusOr<const std::map<int64_t, query::StoredSeries>*> SeriesCache::Get(
    int64_t experiment, const std::vector<query::RunView>& runs, const std::string& key) {
  const Key k{experiment, key};
  recent_.remove(k);
  recent_.push_front(k);
  auto [it, fresh] = entries_.try_emplace(k);
  Entry& entry = it->second;
  if (fresh) {
    ++reads_;
    std::map<int64_t, int64_t> expected;  // the summaries' counts: one allocation per run
    int64_t points = 0;
    for (const query::RunView& view : runs) {
      for (const model::MetricSummary& summary : view.summaries) {
        if (summary.key == key) {
          expected[view.run.id] = summary.count;
          points += summary.count;
        }
      }
    }
    // Room first, at the least it will take (all packed), so that what the entries going now
    // free is there to be used again by the one coming.
    Evict(max_bytes_ - points * kBytesPerPackedPoint);
    absl::StatusOr<std::map<int64_t, query::StoredSeries>> all =
        query_->ExperimentSeries(experiment, key, expected);
    if (!all.ok()) {
      entries_.erase(it);
      recent_.remove(k);
      return all.status();
    }
    entry.series = *std::move(all);
  }
  for (const query::RunView& view : runs) {
    auto summary = std::find_if(view.summaries.begin(), view.summaries.end(),
                                [&](const model::MetricSummary& s) { return s.key == key; });
    const int64_t count = summary == view.summaries.end() ? 0 : summary->count;
    auto known = entry.attempt_count.find(view.run.id);
    query::StoredSeries& series = entry.series[view.run.id];
    if (known == entry.attempt_count.end() && fresh) {
      // Read just now: what the summary says is what was read, unless ingest ran in between
      // (it cannot: both run on the core).
      entry.attempt_count[view.run.id] = {view.run.attempt, count};
      if (series.size() == 0) {
        entry.series.erase(view.run.id);
      }
      continue;
    }
    const std::pair<int, int64_t> now{view.run.attempt, count};
    if (known != entry.attempt_count.end() && known->second == now) {
      if (series.size() == 0) {
        entry.series.erase(view.run.id);
      }
      continue;
    }
    if (!series.pack.empty()) {
      // An ended run that moved since (a late point, a retry): its points from here on.
      absl::StatusOr<std::vector<model::SeriesPoint>> unpacked = series.Points();
      if (!unpacked.ok()) {
        return unpacked.status();
      }
      series = query::StoredSeries{};
      series.points = *std::move(unpacked);
    }
    std::vector<model::SeriesPoint>& points = series.points;
    const bool same_attempt =
        known != entry.attempt_count.end() && known->second.first == view.run.attempt;
    const int64_t after_step = same_attempt && !points.empty() ? points.back().step : -1;
    ++reads_;
    absl::StatusOr<std::vector<model::SeriesPoint>> more =
        query_->QueryMetricAfter(view.run.id, key, after_step);
    if (!more.ok()) {
      return more.status();
    }
    if (after_step < 0) {
      points = *std::move(more);
    } else {
      points.insert(points.end(), more->begin(), more->end());
      if (static_cast<int64_t>(points.size()) != count) {
        // Steps at or below the last one were replaced: read the whole series.
        ++reads_;
        absl::StatusOr<std::vector<model::SeriesPoint>> whole =
            query_->QueryMetricAfter(view.run.id, key, -1);
        if (!whole.ok()) {
          return whole.status();
        }
        points = *std::move(whole);
      }
    }
    entry.attempt_count[view.run.id] = now;
    if (points.empty()) {
      entry.series.erase(view.run.id);
    }
  }
  entry.points = 0;
  entry.bytes = static_cast<int64_t>(entry.attempt_count.size()) * kBytesPerRun + kBytesPerEntry +
                static_cast<int64_t>(key.size());
  for (const auto& [run, series] : entry.series) {
    entry.points += series.size();
    entry.bytes += static_cast<int64_t>(series.pack.size() + series.points.size() * kBytesPerPoint);
  }
  points_ = 0;
  bytes_ = 0;
  for (const auto& [key_, e] : entries_) {
    points_ += e.points;
    bytes_ += e.bytes;
  }
  Evict(max_bytes_);
  return &entries_.at(k).series;
}

void SeriesCache::Evict(int64_t keep_bytes) {
  // Never the one just asked for (at the front).
  while (bytes_ > keep_bytes && recent_.size() > 1) {
    const Key victim = recent_.back();
    recent_.pop_back();
    points_ -= entries_[victim].points;
    bytes_ -= entries_[victim].bytes;
    entries_.erase(victim);
  }
}

}  // namespace tae::http
