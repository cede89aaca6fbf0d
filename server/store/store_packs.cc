// Store: packed series (series_pack.h, migration 0019), written when runs end.

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "common/status/macros.h"
#include "server/store/series_pack.h"
#include "server/store/store.h"

namespace tae::store {
namespace {

// In primary key order: one pass, no sort.
constexpr char kRunPoints[] =
    "SELECT key_id, step, value, wall_time FROM metrics WHERE run_id = ? ORDER BY key_id, step";
constexpr char kPutPack[] =
    "INSERT OR REPLACE INTO metric_packs (run_id, key_id, data) VALUES (?, ?, ?)";
constexpr char kDropRunPacks[] = "DELETE FROM metric_packs WHERE run_id = ?";
// Ended runs with ids in (?1, ?2] with a series (a summary) that has no pack, in id order.
constexpr char kUnpackedRuns[] =
    "SELECT r.id FROM runs r WHERE r.id > ?1 AND r.id <= ?2 AND r.state IN ('succeeded', "
    "'failed', 'cancelled') AND EXISTS (SELECT 1 FROM run_summaries s WHERE s.run_id = r.id AND "
    "NOT EXISTS (SELECT 1 FROM metric_packs p WHERE p.run_id = s.run_id AND p.key_id = "
    "s.key_id)) ORDER BY r.id";
constexpr char kEnded[] =
    "SELECT 1 FROM runs WHERE id = ? AND state IN ('succeeded', 'failed', 'cancelled')";
// Run ids looked at per statement: a store whose runs are all packed is gone through in steps of
// a few ms.
constexpr int64_t kWindow = 64;

}  // namespace

absl::Status Store::DropPacks(int64_t run_id) {
  ASSIGN_OR_RETURN(CachedStatement drop, db_.Cached(kDropRunPacks));
  drop->Bind(1, run_id);
  return drop->Run();
}

absl::Status Store::PackRun(int64_t run_id) {
  RETURN_IF_ERROR(DropPacks(run_id));
  ASSIGN_OR_RETURN(CachedStatement points, db_.Cached(kRunPoints));
  ASSIGN_OR_RETURN(CachedStatement put, db_.Cached(kPutPack));
  points->Bind(1, run_id);
  std::vector<model::SeriesPoint> series;
  int64_t key = -1;
  auto flush = [&]() -> absl::Status {
    if (series.empty()) {
      return absl::OkStatus();
    }
    put->Bind(1, run_id).Bind(2, key).BindBlob(3, PackSeries(series));
    series.clear();
    return put->Run();
  };
  while (true) {
    ASSIGN_OR_RETURN(bool more, points->Step());
    if (!more) {
      break;
    }
    if (points->Int(0) != key) {
      RETURN_IF_ERROR(flush());
      key = points->Int(0);
    }
    series.push_back({points->Int(1), points->Double(2), points->Double(3)});
  }
  return flush();
}

absl::StatusOr<bool> Store::PackSome(double budget_s) {
  const auto start = std::chrono::steady_clock::now();
  const auto spent = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (budget_s <= 0) {
    return packs_due();
  }
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  // The runs that ended since the store was opened, oldest end first; one requeued since is not
  // packed (its next end is).
  bool worked = false;  // every call with time goes forward: one run or one window at least
  while (!packs_due_.empty()) {
    worked = true;
    const int64_t run_id = packs_due_.front();
    packs_due_.pop_front();
    ASSIGN_OR_RETURN(CachedStatement ended, db_.Cached(kEnded));
    ended->Bind(1, run_id);
    ASSIGN_OR_RETURN(bool still_ended, ended->Step());
    if (still_ended) {
      RETURN_IF_ERROR(PackRun(run_id));
      RETURN_IF_ERROR(ColumnsMayBeDue(run_id));  // its experiment's columns, once all are packed
    }
    if (spent() >= budget_s) {
      break;
    }
  }
  // Then those that ended before packs existed, by run id in windows.
  if (!pack_scan_done_ && (!worked || spent() < budget_s)) {
    ASSIGN_OR_RETURN(int64_t newest, db_.QueryInt("SELECT COALESCE(MAX(id), 0) FROM runs"));
    pack_scan_done_ = pack_scan_after_ >= newest;
    while (!pack_scan_done_ && (!worked || spent() < budget_s)) {
      worked = true;
      ASSIGN_OR_RETURN(CachedStatement unpacked, db_.Cached(kUnpackedRuns));
      const int64_t window_end = std::min(pack_scan_after_ + kWindow, newest);
      unpacked->Bind(1, pack_scan_after_).Bind(2, window_end);
      std::vector<int64_t> runs;
      while (true) {
        ASSIGN_OR_RETURN(bool more, unpacked->Step());
        if (!more) {
          break;
        }
        runs.push_back(unpacked->Int(0));
      }
      bool whole_window = true;
      for (int64_t run_id : runs) {
        RETURN_IF_ERROR(PackRun(run_id));
        RETURN_IF_ERROR(ColumnsMayBeDue(run_id));
        pack_scan_after_ = run_id;
        if (spent() >= budget_s) {
          whole_window = run_id == runs.back();
          break;
        }
      }
      if (whole_window) {
        pack_scan_after_ = window_end;
      }
      pack_scan_done_ = pack_scan_after_ >= newest;
    }
  }
  RETURN_IF_ERROR(tx.Commit());
  return packs_due();
}

}  // namespace tae::store
