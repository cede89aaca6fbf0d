#pragma once

// File helpers every program shares: an owned descriptor, errno as a Status, reading a whole
// file, and replacing a file atomically with a stated durability. Errors name the path and
// the operation; the status code follows errno (ENOENT -> NotFound, ENOSPC -> ResourceExhausted,
// EACCES -> PermissionDenied, ...).

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tae::fs {

// An owned file descriptor, closed when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);
  // close() with its result (a failed close can mean lost writes on NFS).
  absl::Status Close(std::string_view path);

 private:
  int fd_ = -1;
};

// "cannot <what> <path>: <strerror>" with the status code for `error`.
absl::Status ErrnoStatus(int error, std::string_view what, std::string_view path);

// The verb ("open") and the reason ("No such file or directory") of an ErrnoStatus message, for
// callers that frame the error their own way; both empty when `status` is not one.
struct ErrnoParts {
  std::string verb;
  std::string reason;
};
ErrnoParts SplitErrnoStatus(const absl::Status& status);

// The whole file. A file that grows or shrinks while read is read to its end as it was then.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes all of `data` at the descriptor's offset, retrying short writes and EINTR.
absl::Status WriteAll(int fd, std::string_view data, std::string_view path);

enum class Durability {
  kNone,       // rename only: readers see old or new, a crash may leave either (or an empty file)
  kFile,       // fsync the data before the rename: after a crash, old or new, never partial
  kFileAndDir  // and fsync the directory: the new file survives a crash once this returns
};

struct WriteOptions {
  mode_t mode = 0600;
  Durability durability = Durability::kFile;
};

// Appends `data` to `path` (created with `mode` if missing) and fsyncs it, and its directory when
// the file was created: once this returns the bytes survive a crash. A crash during the call may
// leave part of `data` at the end; a failed call may have appended part of it.
absl::Status AppendDurably(const std::string& path, std::string_view data, mode_t mode = 0600);

// fsyncs the directory that holds `path`.
absl::Status SyncDirOf(const std::string& path);

// Replaces `path` with `content` through a unique path.tmp.XXXXXX and rename(2): a reader never
// sees a partial file, and concurrent writers of one path do not clobber each other's temporary
// file (the last rename wins). On failure the temporary file is removed and `path` is left as it
// was.
absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 const WriteOptions& options = {});

}  // namespace tae::fs
