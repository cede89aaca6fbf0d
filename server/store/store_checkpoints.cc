// Store: the checkpoints runs upload (docs/checkpoints.md; migration 0008) and the artifacts that
// share their rows and blobs (docs/profiles.md; migration 0009).

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status/macros.h"
#include "server/store/store.h"

namespace tae::store {
namespace {

constexpr char kCheckpointColumns[] =
    "id, run_id, attempt, step, manifest_id, files, bytes, complete, created_at, artifact";

model::CheckpointRecord ReadCheckpoint(const Statement& stmt) {
  model::CheckpointRecord c;
  c.id = stmt.Int(0);
  c.run_id = stmt.Int(1);
  c.attempt = static_cast<int>(stmt.Int(2));
  c.step = stmt.Int(3);
  c.manifest_id = stmt.Text(4);
  c.files = stmt.Int(5);
  c.bytes = stmt.Int(6);
  c.complete = stmt.Int(7) != 0;
  c.created_at = stmt.Double(8);
  c.artifact = stmt.Text(9);
  return c;
}

// Deletes the rows of `ids` and returns their blobs that no remaining row names. Inside the
// caller's transaction.
absl::StatusOr<model::CheckpointsDropped> DeleteRows(Db* db, const std::vector<int64_t>& ids) {
  model::CheckpointsDropped dropped;
  ASSIGN_OR_RETURN(Statement blobs,
                   db->Prepare("SELECT hash FROM checkpoint_blobs WHERE checkpoint_id = ?"));
  ASSIGN_OR_RETURN(Statement unlink_blobs,
                   db->Prepare("DELETE FROM checkpoint_blobs WHERE checkpoint_id = ?"));
  ASSIGN_OR_RETURN(Statement remove, db->Prepare("DELETE FROM checkpoints WHERE id = ?"));
  std::set<std::string> candidates;
  for (int64_t id : ids) {
    blobs.Bind(1, id);
    while (true) {
      ASSIGN_OR_RETURN(bool more, blobs.Step());
      if (!more) {
        break;
      }
      candidates.insert(blobs.Text(0));
    }
    blobs.Reset();
    unlink_blobs.Bind(1, id);
    RETURN_IF_ERROR(unlink_blobs.Run());
    unlink_blobs.Reset();
    remove.Bind(1, id);
    RETURN_IF_ERROR(remove.Run());
    dropped.checkpoints += db->Changes() > 0 ? 1 : 0;
    remove.Reset();
  }
  ASSIGN_OR_RETURN(Statement named,
                   db->Prepare("SELECT 1 FROM checkpoint_blobs WHERE hash = ? LIMIT 1"));
  for (const std::string& hash : candidates) {
    named.Bind(1, hash);
    ASSIGN_OR_RETURN(bool still, named.Step());
    named.Reset();
    if (!still) {
      dropped.unreferenced.push_back(hash);
    }
  }
  return dropped;
}

}  // namespace

absl::StatusOr<int64_t> Store::BeginCheckpoint(const model::CheckpointRecord& checkpoint,
                                               const std::vector<std::string>& hashes) {
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(Statement insert,
                   db_.Prepare("INSERT INTO checkpoints (run_id, attempt, step, manifest_id, "
                               "manifest, files, bytes, complete, created_at, artifact) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)"));
  insert.Bind(1, checkpoint.run_id)
      .Bind(2, static_cast<int64_t>(checkpoint.attempt))
      .Bind(3, checkpoint.step)
      .Bind(4, checkpoint.manifest_id)
      .Bind(5, checkpoint.manifest)
      .Bind(6, checkpoint.files)
      .Bind(7, checkpoint.bytes)
      .Bind(8, checkpoint.created_at)
      .Bind(9, checkpoint.artifact);
  RETURN_IF_ERROR(insert.Run());
  const int64_t id = db_.LastInsertId();
  ASSIGN_OR_RETURN(Statement blob, db_.Prepare("INSERT OR IGNORE INTO checkpoint_blobs "
                                               "(checkpoint_id, hash) VALUES (?, ?)"));
  for (const std::string& hash : hashes) {
    blob.Bind(1, id).Bind(2, hash);
    RETURN_IF_ERROR(blob.Run());
    blob.Reset();
  }
  RETURN_IF_ERROR(tx.Commit());
  return id;
}

absl::StatusOr<model::CheckpointsDropped> Store::CompleteCheckpoint(int64_t id, int keep) {
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(Statement mark,
                   db_.Prepare("UPDATE checkpoints SET complete = 1 WHERE id = ? AND complete = 0 "
                               "RETURNING run_id, step, artifact"));
  mark.Bind(1, id);
  ASSIGN_OR_RETURN(bool found, mark.Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", id, ": no incomplete checkpoint"));
  }
  const int64_t run_id = mark.Int(0);
  const int64_t step = mark.Int(1);
  const std::string artifact = mark.Text(2);
  mark.Reset();
  if (!artifact.empty()) {
    // An artifact replaces only an older one of the same name (the same profile sent again).
    ASSIGN_OR_RETURN(Statement same,
                     db_.Prepare("SELECT id FROM checkpoints WHERE run_id = ? AND artifact = ? "
                                 "AND complete = 1 AND id != ?"));
    same.Bind(1, run_id).Bind(2, artifact).Bind(3, id);
    std::vector<int64_t> replaced;
    while (true) {
      ASSIGN_OR_RETURN(bool more, same.Step());
      if (!more) {
        break;
      }
      replaced.push_back(same.Int(0));
    }
    same.Reset();
    ASSIGN_OR_RETURN(model::CheckpointsDropped dropped, DeleteRows(&db_, replaced));
    RETURN_IF_ERROR(tx.Commit());
    return dropped;
  }
  // Older checkpoints of the same step (a later attempt saved that step again), then all but the
  // newest `keep`.
  ASSIGN_OR_RETURN(Statement older,
                   db_.Prepare("SELECT id, step FROM checkpoints WHERE run_id = ? AND complete = 1 "
                               "AND artifact = '' AND id != ? ORDER BY id DESC"));
  older.Bind(1, run_id).Bind(2, id);
  std::vector<int64_t> doomed;
  int kept = 1;
  while (true) {
    ASSIGN_OR_RETURN(bool more, older.Step());
    if (!more) {
      break;
    }
    if (older.Int(1) == step || kept >= keep) {
      doomed.push_back(older.Int(0));
    } else {
      kept += 1;
    }
  }
  older.Reset();
  ASSIGN_OR_RETURN(model::CheckpointsDropped dropped, DeleteRows(&db_, doomed));
  RETURN_IF_ERROR(tx.Commit());
  return dropped;
}

absl::StatusOr<model::CheckpointsDropped> Store::DeleteCheckpoints(
    const std::vector<int64_t>& ids) {
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(model::CheckpointsDropped dropped, DeleteRows(&db_, ids));
  RETURN_IF_ERROR(tx.Commit());
  return dropped;
}

absl::StatusOr<int> Store::DeleteIncompleteCheckpoints() {
  ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                   db_.QueryInts("SELECT id FROM checkpoints WHERE complete = 0"));
  ASSIGN_OR_RETURN(model::CheckpointsDropped dropped, DeleteCheckpoints(ids));
  return dropped.checkpoints;
}

absl::StatusOr<std::optional<model::CheckpointRecord>> Store::GetCheckpoint(int64_t id) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare(absl::StrCat("SELECT ", kCheckpointColumns,
                                            ", manifest FROM checkpoints WHERE id = ? AND "
                                            "complete = 1")));
  stmt.Bind(1, id);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::nullopt;
  }
  model::CheckpointRecord c = ReadCheckpoint(stmt);
  c.manifest = stmt.Text(10);
  return c;
}

absl::StatusOr<std::optional<model::CheckpointRecord>> Store::LatestCheckpoint(int64_t run_id) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT id FROM checkpoints WHERE run_id = ? AND complete = 1 "
                               "AND artifact = '' ORDER BY id DESC LIMIT 1"));
  stmt.Bind(1, run_id);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::nullopt;
  }
  return GetCheckpoint(stmt.Int(0));
}

absl::StatusOr<std::vector<model::CheckpointRecord>> Store::ListCheckpoints(int64_t run_id,
                                                                            bool artifacts) {
  ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(absl::StrCat("SELECT ", kCheckpointColumns,
                               " FROM checkpoints WHERE complete = 1 AND (? = 0 OR run_id = ?) "
                               "AND (artifact != '') = ? ORDER BY id DESC")));
  stmt.Bind(1, run_id).Bind(2, run_id).Bind(3, static_cast<int64_t>(artifacts ? 1 : 0));
  std::vector<model::CheckpointRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    out.push_back(ReadCheckpoint(stmt));
  }
  return out;
}

absl::StatusOr<std::optional<model::CheckpointRecord>> Store::FindArtifact(
    int64_t run_id, const std::string& name) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT id FROM checkpoints WHERE run_id = ? AND artifact = ? AND "
                               "complete = 1 ORDER BY id DESC LIMIT 1"));
  stmt.Bind(1, run_id).Bind(2, name);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::nullopt;
  }
  return GetCheckpoint(stmt.Int(0));
}

absl::StatusOr<std::set<std::string>> Store::CheckpointBlobs() {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("SELECT DISTINCT hash FROM checkpoint_blobs"));
  std::set<std::string> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    out.insert(stmt.Text(0));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Store::UnnamedCheckpointBlobs(
    const std::vector<std::string>& hashes) {
  ASSIGN_OR_RETURN(CachedStatement stmt,
                   db_.Cached("SELECT 1 FROM checkpoint_blobs WHERE hash = ? LIMIT 1"));
  std::vector<std::string> out;
  for (const std::string& hash : hashes) {
    stmt->Reset();
    stmt->Bind(1, hash);
    ASSIGN_OR_RETURN(bool named, stmt->Step());
    if (!named) {
      out.push_back(hash);
    }
  }
  return out;
}

absl::StatusOr<std::set<std::string>> Store::RunCheckpointBlobs(int64_t run_id) {
  ASSIGN_OR_RETURN(CachedStatement stmt,
                   db_.Cached("SELECT DISTINCT b.hash FROM checkpoints c JOIN checkpoint_blobs b "
                              "ON b.checkpoint_id = c.id WHERE c.run_id = ? AND c.complete = 1"));
  stmt->Bind(1, run_id);
  std::set<std::string> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    out.insert(stmt->Text(0));
  }
  return out;
}

}  // namespace tae::store
