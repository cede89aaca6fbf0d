#include "common/fs/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tae::fs {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset(other.release());
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) {
    ::close(fd_);
  }
  fd_ = fd;
}

absl::Status Fd::Close(std::string_view path) {
  const int fd = release();
  if (fd >= 0 && ::close(fd) != 0) {
    return ErrnoStatus(errno, "close", path);
  }
  return absl::OkStatus();
}

absl::Status ErrnoStatus(int error, std::string_view what, std::string_view path) {
  return absl::ErrnoToStatus(
      error, absl::StrCat("cannot ", absl::string_view(what.data(), what.size()), " ",
                          absl::string_view(path.data(), path.size())));
}

ErrnoParts SplitErrnoStatus(const absl::Status& status) {
  const absl::string_view message = status.message();
  constexpr absl::string_view kCannot = "cannot ";
  const size_t verb_end = message.find(' ', kCannot.size());
  const size_t reason = message.rfind(": ");  // absl::ErrnoToStatus appends ": <strerror>"
  if (!absl::StartsWith(message, kCannot) || verb_end == absl::string_view::npos ||
      reason == absl::string_view::npos || reason < verb_end) {
    return {};
  }
  return {std::string(message.substr(kCannot.size(), verb_end - kCannot.size())),
          std::string(message.substr(reason + 2))};
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return ErrnoStatus(errno, "open", path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return ErrnoStatus(errno, "stat", path);
  }
  // Read straight into the string; /proc files report size 0, so grow as needed.
  std::string data(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t size = 0;
  while (true) {
    if (size == data.size()) {
      data.resize(data.size() * 2 + 4096);
    }
    const ssize_t n = ::read(fd.get(), data.data() + size, data.size() - size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return ErrnoStatus(errno, "read", path);
    }
    if (n == 0) {
      break;
    }
    size += static_cast<size_t>(n);
  }
  data.resize(size);
  return data;
}

absl::Status WriteAll(int fd, std::string_view data, std::string_view path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return ErrnoStatus(errno, "write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status SyncDirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    return ErrnoStatus(errno, "open directory", dir);
  }
  if (::fsync(fd.get()) != 0) {
    return ErrnoStatus(errno, "fsync directory", dir);
  }
  return absl::OkStatus();
}

absl::Status AppendDurably(const std::string& path, std::string_view data, mode_t mode) {
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  Fd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, mode));
  if (!fd.valid()) {
    return ErrnoStatus(errno, "open", path);
  }
  if (absl::Status written = WriteAll(fd.get(), data, path); !written.ok()) {
    return written;
  }
  if (::fsync(fd.get()) != 0) {
    return ErrnoStatus(errno, "fsync", path);
  }
  return existed ? absl::OkStatus() : SyncDirOf(path);
}

namespace {

// Creates a unique path.tmp.XXXXXX (two processes may replace the same file at once) and writes
// `content` there; *temp is its name.
absl::Status WriteTemp(const std::string& path, std::string_view content,
                       const WriteOptions& options, std::string* temp) {
  std::string name = path + ".tmp.XXXXXX";
  Fd fd(::mkostemp(name.data(), O_CLOEXEC));
  if (!fd.valid()) {
    return ErrnoStatus(errno, "create", name);
  }
  *temp = name;
  if (::fchmod(fd.get(), options.mode) != 0) {
    return ErrnoStatus(errno, "chmod", name);
  }
  if (absl::Status s = WriteAll(fd.get(), content, name); !s.ok()) {
    return s;
  }
  if (options.durability != Durability::kNone && ::fsync(fd.get()) != 0) {
    return ErrnoStatus(errno, "fsync", name);
  }
  return fd.Close(name);
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 const WriteOptions& options) {
  std::string temp;
  absl::Status status = WriteTemp(path, content, options, &temp);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, "rename over", path);
  }
  if (!status.ok()) {
    if (!temp.empty()) {
      ::unlink(temp.c_str());
    }
    return status;
  }
  return options.durability == Durability::kFileAndDir ? SyncDirOf(path) : absl::OkStatus();
}

}  // namespace tae::fs
