#include "common/log/rotate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace tae::log {

bool RotateStderr(uint64_t max_bytes, int keep) {
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) < max_bytes) {
    return false;
  }
  char link[4096];
  const ssize_t n = readlink("/proc/self/fd/2", link, sizeof(link) - 1);
  if (n <= 0) {
    return false;
  }
  const std::string path(link, static_cast<size_t>(n));
  struct stat named {};
  if (path.empty() || path[0] != '/' || stat(path.c_str(), &named) != 0 ||
      named.st_ino != st.st_ino || named.st_dev != st.st_dev) {
    return false;  // renamed or removed by someone else: not ours to rotate
  }
  for (int i = keep - 1; i >= 1; --i) {
    std::rename((path + "." + std::to_string(i)).c_str(),
                (path + "." + std::to_string(i + 1)).c_str());
  }
  if (keep <= 0) {
    std::remove(path.c_str());
  } else if (std::rename(path.c_str(), (path + ".1").c_str()) != 0) {
    return false;
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, st.st_mode & 0777);
  if (fd < 0) {
    return false;  // stderr stays the renamed file: still bounded by the next look
  }
  dup2(fd, STDERR_FILENO);  // dup2 clears close-on-exec on fd 2
  close(fd);
  return true;
}

StderrRotation::StderrRotation(boost::asio::io_context* io, uint64_t max_bytes, int keep,
                               double every_s)
    : timer_(*io), max_bytes_(max_bytes), keep_(keep), every_s_(every_s) {
  Schedule();
}

StderrRotation::~StderrRotation() { timer_.cancel(); }

void StderrRotation::Schedule() {
  timer_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(every_s_ * 1000)));
  timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) {
      RotateStderr(max_bytes_, keep_);
      Schedule();
    }
  });
}

}  // namespace tae::log
