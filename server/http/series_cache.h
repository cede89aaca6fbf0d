#pragma once

// The metric series the dashboard draws, kept in memory between requests: a live experiment's
// curves are asked for again at every change, and reading 750,000 points from SQLite each time
// would take the core a quarter of a second. An ended run's series is kept as its pack (about 13
// bytes a point, query::StoredSeries), a live run's as points. A run's series is read again only
// where its summary (attempt, last step, count) moved, and then only its new steps; a series
// whose count does not add up (points replaced by a later attempt) is read whole. Core thread
// only, like the Query it reads through.

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/query/query.h"

namespace tae::http {

class SeriesCache {
 public:
  // What an entry is counted as costing: its packs' bytes and its other points, a bookkeeping
  // row per run, and a fixed part plus its key, so that series without any points (a metric name
  // nobody reports, asked for again and again) are bounded too.
  static constexpr int64_t kBytesPerPoint = sizeof(model::SeriesPoint);
  static constexpr int64_t kBytesPerPackedPoint = 13;  // about: store/series_pack.h
  static constexpr int64_t kBytesPerRun = 64;
  static constexpr int64_t kBytesPerEntry = 256;

  // At most `max_bytes` (as counted above) are kept; the least recently asked
  // (experiment, metric) goes first.
  SeriesCache(query::Query* query, int64_t max_bytes);

  // The series of `key` of every run in `runs` (the experiment's, with their summaries), by run
  // id; a run without the metric has no entry.
  absl::StatusOr<const std::map<int64_t, query::StoredSeries>*> Get(
      int64_t experiment, const std::vector<query::RunView>& runs, const std::string& key);

  int64_t points() const { return points_; }
  int64_t bytes() const { return bytes_; }
  size_t entries() const { return entries_.size(); }
  // Statements run to refresh series, for tests: 0 when nothing changed.
  int64_t reads() const { return reads_; }

 private:
  struct Entry {
    std::map<int64_t, query::StoredSeries> series;
    std::map<int64_t, std::pair<int, int64_t>> attempt_count;  // run -> (attempt, count)
    int64_t points = 0;
    int64_t bytes = 0;
  };
  using Key = std::pair<int64_t, std::string>;

  // Drops the least recently asked entries, never the one just asked for, until at most
  // `keep_bytes` are kept.
  void Evict(int64_t keep_bytes);

  query::Query* query_;
  int64_t max_bytes_;
  int64_t points_ = 0;
  int64_t bytes_ = 0;
  int64_t reads_ = 0;
  std::map<Key, Entry> entries_;
  std::list<Key> recent_;  // most recent first
};

}  // namespace tae::http
