#include "server/daemon/home.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/auth/credential.h"
#include "common/fs/fs.h"

namespace tae::daemon {

absl::Status EnsurePrivateDir(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", path, ": ", ec.message()));
  }
  if (chmod(path.c_str(), 0700) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("chmod 0700 ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<HomeLock> HomeLock::Acquire(const std::string& home) {
  std::string path = absl::StrCat(home, "/taed.pid");
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {0};
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    std::string pid = n > 0 ? std::string(absl::StripAsciiWhitespace(buf)) : "?";
    return absl::AlreadyExistsError(absl::StrCat("another taed (pid ", pid, ") is running on ",
                                                 home, "; stop it with `taectl down`"));
  }
  std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
  }
  return HomeLock(fd, path);
}

HomeLock::HomeLock(HomeLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

HomeLock::~HomeLock() {
  if (fd_ >= 0) {
    unlink(path_.c_str());
    close(fd_);
  }
}

absl::StatusOr<std::string> LoadOrCreateToken(const std::string& home, const std::string& name) {
  std::string path = absl::StrCat(home, "/", name);
  if (absl::StatusOr<std::string> text = fs::ReadFile(path); text.ok()) {
    std::string token(absl::StripAsciiWhitespace(*text));
    if (!token.empty()) {
      return token;
    }
  }
  absl::StatusOr<std::string> fresh = auth::NewSecret();
  if (!fresh.ok()) {
    return absl::InternalError(absl::StrCat(fresh.status().message(), " (", name, ")"));
  }
  const std::string token = *std::move(fresh);
  if (absl::Status s = fs::WriteFileAtomically(path, token + "\n", {0600, fs::Durability::kFile});
      !s.ok()) {
    return s;
  }
  return token;
}

}  // namespace tae::daemon
