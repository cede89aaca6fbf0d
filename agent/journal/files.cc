#include "agent/journal/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/fs/fs.h"

namespace tae::agent::journal_internal {

absl::Status ErrnoError(int error, const char* what, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrCat("journal: cannot ", what, " ", path));
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoError(errno, "open", path);
  }
  std::string data;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return ErrnoError(error, "stat", path);
  }
  // Read straight into the string; the loop also copes with a file that grows or shrinks.
  data.resize(static_cast<size_t>(st.st_size) + 1);
  size_t size = 0;
  while (true) {
    if (size == data.size()) {
      data.resize(data.size() * 2);
    }
    const ssize_t n = ::read(fd, data.data() + size, data.size() - size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return ErrnoError(error, "read", path);
    }
    if (n == 0) {
      break;
    }
    size += static_cast<size_t>(n);
  }
  data.resize(size);
  ::close(fd);
  return data;
}

absl::Status PWriteAll(int fd, std::string_view data, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n =
        ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return ErrnoError(errno, "write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status DataSync(int fd, const std::string& path) {
  if (::fdatasync(fd) != 0) {
    return ErrnoError(errno, "fdatasync", path);
  }
  return absl::OkStatus();
}

absl::Status Truncate(int fd, uint64_t size, const std::string& path) {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return ErrnoError(errno, "truncate", path);
  }
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoError(errno, "open directory", dir);
  }
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0) {
    return ErrnoError(error, "fsync directory", dir);
  }
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) {
    const size_t slash = dir.find_last_of('/');
    return SyncDir(slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash));
  }
  if (errno != EEXIST) {
    return ErrnoError(errno, "create directory", dir);
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return ErrnoError(errno, "stat", dir);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("journal: ", dir, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status ReplaceFile(const std::string& path, std::string_view content) {
  return fs::WriteFileAtomically(path, content, {0600, fs::Durability::kNone});
}

}  // namespace tae::agent::journal_internal
