#include "server/store/migrations.h"

#include "absl/strings/str_cat.h"

namespace tae::store {

absl::Status Migrate(Db* db, const std::vector<Migration>& migrations) {
  absl::StatusOr<int64_t> current = db->QueryInt("PRAGMA user_version");
  if (!current.ok()) {
    return current.status();
  }
  int latest = migrations.empty() ? 0 : migrations.back().version;
  if (*current > latest) {
    return absl::FailedPreconditionError(absl::StrCat("database schema version ", *current,
                                                      " is newer than this taed supports (", latest,
                                                      "); use a newer taed or another TAE_HOME"));
  }
  for (const Migration& migration : migrations) {
    if (migration.version <= *current) {
      continue;
    }
    Transaction tx(db);
    if (!tx.begin_status().ok()) {
      return tx.begin_status();
    }
    if (absl::Status s = db->Exec(migration.sql); !s.ok()) {
      return absl::InternalError(absl::StrCat("migration ", migration.version, "_", migration.name,
                                              " failed: ", s.message()));
    }
    if (absl::Status s = db->Exec(absl::StrCat("PRAGMA user_version = ", migration.version));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = tx.Commit(); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace tae::store
