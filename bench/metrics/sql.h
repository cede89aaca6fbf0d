#pragma once

// A minimal sqlite3 handle for the benchmark's own SQL (references, data set, checks), so the
// figures measure SQLite and not a wrapper.

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::bench {

class SqlFile {
 public:
  SqlFile() = default;
  SqlFile(const SqlFile&) = delete;
  SqlFile& operator=(const SqlFile&) = delete;
  ~SqlFile();

  // Opens an existing database file read-write (or read-only).
  absl::Status Open(const std::string& path, bool read_only = false);
  absl::Status Exec(const std::string& sql);
  // Prepared once; finalized with the file.
  absl::StatusOr<sqlite3_stmt*> Prepare(const std::string& sql);
  // Steps a bound statement to its end and resets it.
  absl::Status Run(sqlite3_stmt* stmt);
  // The first column of the first row of sql.
  absl::StatusOr<int64_t> Int(const std::string& sql);

 private:
  absl::Status Error(const std::string& what) const;
  sqlite3* db_ = nullptr;
  std::vector<sqlite3_stmt*> statements_;
};

}  // namespace tae::bench
