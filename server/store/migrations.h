#pragma once

// Numbered schema migrations (migrations/NNNN_name.sql, embedded at build time), applied in
// order under PRAGMA user_version, each in its own transaction.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/store/db.h"
#include "server/store/migration.h"

namespace tae::store {

// Brings db up to the last migration. A database whose user_version is newer than the last
// migration is refused: it was written by a newer taed.
absl::Status Migrate(Db* db, const std::vector<Migration>& migrations);

}  // namespace tae::store
