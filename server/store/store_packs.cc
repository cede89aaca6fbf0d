// Store: packed series (series_pack.h, migration 0019), written when runs end.

#include <algorithm>
#include <chrono>
#include <optional>
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
// Run ids looked at per statement: a store whose runs are all packed is gone through in steps of
// a few ms.
constexpr int64_t kWindow = 64;

}  // namespace

absl::Status Store::PackRun(int64_t run_id) {
  ASSIGN_OR_RETURN(Statement * drop, db_.Cached(kDropRunPacks));
  drop->Bind(1, run_id);
  RETURN_IF_ERROR(drop->Run());
  ASSIGN_OR_RETURN(Statement * points, db_.Cached(kRunPoints));
  ASSIGN_OR_RETURN(Statement * put, db_.Cached(kPutPack));
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
    absl::StatusOr<bool> more = points->Step();
    if (!more.ok()) {
      points->Reset();
      return more.status();
    }
    if (!*more) {
      break;
    }
    if (points->Int(0) != key) {
      if (absl::Status s = flush(); !s.ok()) {
        points->Reset();
        return s;
      }
      key = points->Int(0);
    }
    series.push_back({points->Int(1), points->Double(2), points->Double(3)});
  }
  points->Reset();
  return flush();
}

absl::Status Store::PackEnded() {
  std::set<int64_t> due = std::move(packs_due_);
  packs_due_.clear();
  for (int64_t run_id : due) {
    RETURN_IF_ERROR(PackRun(run_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<int64_t>> Store::PackEndedRuns(int64_t after, double budget_s) {
  const auto start = std::chrono::steady_clock::now();
  const auto spent = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(int64_t newest, db_.QueryInt("SELECT COALESCE(MAX(id), 0) FROM runs"));
  bool done = after >= newest;
  // At least one window when there is any time at all: every call with time goes forward.
  for (bool first = true; !done && (first ? budget_s > 0 : spent() < budget_s); first = false) {
    ASSIGN_OR_RETURN(Statement * unpacked, db_.Cached(kUnpackedRuns));
    const int64_t window_end = std::min(after + kWindow, newest);
    unpacked->Bind(1, after).Bind(2, window_end);
    std::vector<int64_t> runs;
    while (true) {
      absl::StatusOr<bool> more = unpacked->Step();
      if (!more.ok()) {
        unpacked->Reset();
        return more.status();
      }
      if (!*more) {
        break;
      }
      runs.push_back(unpacked->Int(0));
    }
    unpacked->Reset();
    bool whole_window = true;
    for (int64_t run_id : runs) {
      RETURN_IF_ERROR(PackRun(run_id));
      after = run_id;
      if (spent() >= budget_s) {
        whole_window = run_id == runs.back();
        break;
      }
    }
    if (whole_window) {
      after = window_end;
    }
    done = after >= newest;
  }
  RETURN_IF_ERROR(tx.Commit());
  return done ? std::nullopt : std::optional<int64_t>(after);
}

}  // namespace tae::store
