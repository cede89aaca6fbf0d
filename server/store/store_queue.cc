// The Store's queue side: what the scheduler reads of the queue (QueueRows, and the changes
// since it last read them), the reasons it writes back, active counts and pauses.

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/macros.h"
#include "server/store/rows.h"
#include "server/store/store.h"

namespace tae::store {

absl::StatusOr<std::vector<model::RunRecord>> Store::QueuedRuns() {
  return QueryRuns("WHERE state = 'queued' ORDER BY priority DESC, id", 0);
}

absl::StatusOr<std::vector<model::RunRecord>> Store::ActiveRuns() {
  return QueryRuns("WHERE state IN ('assigned', 'running') ORDER BY id", 0);
}

absl::Status Store::SetWaitingReasons(const std::vector<std::pair<int64_t, std::string>>& reasons) {
  if (reasons.empty()) {
    return absl::OkStatus();
  }
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("UPDATE runs SET reason = ?1 WHERE id = ?2 AND "
                                               "state = 'queued' AND reason != ?1"));
  for (const auto& [run_id, reason] : reasons) {
    stmt.Bind(1, reason).Bind(2, run_id);
    RETURN_IF_ERROR(stmt.Run());
    stmt.Reset();
  }
  return tx.Commit();
}

namespace {

constexpr char kQueueColumns[] =
    "SELECT id, experiment_id, priority, slots, labels, not_before, max_concurrent, hosts, "
    "reason FROM runs WHERE state = 'queued'";

model::QueueRow ReadQueueRow(const Statement& stmt) {
  model::QueueRow row;
  row.id = stmt.Int(0);
  row.experiment_id = stmt.Int(1);
  row.priority = static_cast<int>(stmt.Int(2));
  row.slots = static_cast<int>(stmt.Int(3));
  const std::string labels = stmt.Text(4);
  if (labels != "{}") {
    row.labels = rows::LabelsFromJson(labels);
  }
  row.not_before = stmt.Double(5);
  row.max_concurrent = static_cast<int>(stmt.Int(6));
  row.hosts = static_cast<int>(stmt.Int(7));
  row.reason = stmt.Text(8);
  return row;
}

}  // namespace

absl::StatusOr<std::vector<model::QueueRow>> Store::QueueRows() {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare(absl::StrCat(kQueueColumns, " ORDER BY priority DESC, id")));
  std::vector<model::QueueRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      return out;
    }
    out.push_back(ReadQueueRow(stmt));
  }
}

absl::StatusOr<std::vector<model::QueueRow>> Store::QueueRows(const std::set<int64_t>& ids) {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare(absl::StrCat(kQueueColumns, " AND id = ?")));
  std::vector<model::QueueRow> out;
  for (int64_t id : ids) {
    stmt.Reset();
    stmt.Bind(1, id);
    ASSIGN_OR_RETURN(bool found, stmt.Step());
    if (found) {
      out.push_back(ReadQueueRow(stmt));
    }
  }
  return out;
}

model::QueueChanges Store::TakeQueueChanges() {
  model::QueueChanges taken = std::move(queue_changes_);
  queue_changes_ = model::QueueChanges{};
  queue_changes_.all = false;
  return taken;
}

absl::StatusOr<std::map<int64_t, int>> Store::ActiveCounts() {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT experiment_id, COUNT(*) FROM runs WHERE state IN "
                               "('assigned', 'running') GROUP BY experiment_id"));
  std::map<int64_t, int> counts;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      return counts;
    }
    counts[stmt.Int(0)] = static_cast<int>(stmt.Int(1));
  }
}

absl::StatusOr<std::set<int64_t>> Store::PausedExperiments() {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("SELECT id FROM experiments WHERE paused != 0"));
  std::set<int64_t> ids;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    ids.insert(stmt.Int(0));
  }
  return ids;
}

}  // namespace tae::store
