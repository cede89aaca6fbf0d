#pragma once

// taed's data dir ($TAE_HOME): created 0700; taed.pid holds the pid under an exclusive lock so a
// second taed on the same dir is refused; agent.token is generated at first start (0600).

#include <string>

#include "absl/status/statusor.h"

namespace tae::daemon {

class HomeLock {
 public:
  // Takes the lock and writes our pid, or explains who holds it.
  static absl::StatusOr<HomeLock> Acquire(const std::string& home);
  HomeLock(HomeLock&& other) noexcept;
  HomeLock& operator=(HomeLock&&) = delete;
  HomeLock(const HomeLock&) = delete;
  ~HomeLock();

 private:
  HomeLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

absl::Status EnsurePrivateDir(const std::string& path);
// Reads home/NAME (agent.token: the agent link's; http.token: the dashboard's sign-in), creating
// it (0600) with 32 random bytes (hex) when missing.
absl::StatusOr<std::string> LoadOrCreateToken(const std::string& home,
                                              const std::string& name = "agent.token");

}  // namespace tae::daemon
