#pragma once

// POSIX file helpers of the journal: internal to agent/journal. Errors carry the path and errno.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tae::agent::journal_internal {

absl::Status ErrnoError(int error, const char* what, const std::string& path);

absl::StatusOr<std::string> ReadWholeFile(const std::string& path);
// Writes all of `data` at `offset` (retrying short writes and EINTR).
absl::Status PWriteAll(int fd, std::string_view data, uint64_t offset, const std::string& path);
absl::Status DataSync(int fd, const std::string& path);
absl::Status Truncate(int fd, uint64_t size, const std::string& path);
// fsyncs a directory, making created, renamed and deleted entries in it durable.
absl::Status SyncDir(const std::string& dir);
// Creates `dir` (mode 0700) unless it exists, making the new entry durable in its parent.
absl::Status MakeDir(const std::string& dir);
// Writes `content` to path.tmp and renames it over `path` (no fsync).
absl::Status ReplaceFile(const std::string& path, std::string_view content);

}  // namespace tae::agent::journal_internal
