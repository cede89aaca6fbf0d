#include "bench/metrics/sql.h"

#include "absl/strings/str_cat.h"

namespace tae::bench {

SqlFile::~SqlFile() {
  for (sqlite3_stmt* stmt : statements_) {
    sqlite3_finalize(stmt);
  }
  sqlite3_close_v2(db_);
}

absl::Status SqlFile::Open(const std::string& path, bool read_only) {
  int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    return Error(absl::StrCat("open ", path));
  }
  sqlite3_busy_timeout(db_, 5000);
  return absl::OkStatus();
}

absl::Status SqlFile::Exec(const std::string& sql) {
  return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK ? absl::OkStatus()
                                                                                : Error(sql);
}

absl::StatusOr<sqlite3_stmt*> SqlFile::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    return Error(sql);
  }
  statements_.push_back(stmt);
  return stmt;
}

absl::Status SqlFile::Run(sqlite3_stmt* stmt) {
  int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  return rc == SQLITE_DONE ? absl::OkStatus() : Error(sqlite3_sql(stmt));
}

absl::StatusOr<int64_t> SqlFile::Int(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    return Error(sql);
  }
  int rc = sqlite3_step(stmt);
  int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW) {
    return absl::NotFoundError(absl::StrCat("no row: ", sql));
  }
  return value;
}

absl::Status SqlFile::Error(const std::string& what) const {
  return absl::InternalError(
      absl::StrCat("sqlite: ", what, ": ", db_ ? sqlite3_errmsg(db_) : "out of memory"));
}

}  // namespace tae::bench
