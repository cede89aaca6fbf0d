#include "client/watch/watcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tae::client {
namespace {

using Clock = std::chrono::steady_clock;

// Events on the watched directories' entries, plus the directory's own deletion or move (only
// acted on for ROOT; a subdirectory's are seen through its parent).
constexpr uint32_t kEvents = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM |
                             IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : absl::StrCat(dir, "/", name);
}

std::string BaseName(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? rel : rel.substr(slash + 1);
}

// " (now N)" with the current value of a /proc/sys setting, or "" when it cannot be read.
std::string CurrentSysctl(const char* path) {
  std::ifstream in(path);
  long value = 0;
  if (!(in >> value)) {
    return "";
  }
  return absl::StrCat(" (now ", value, ")");
}

absl::Status WatchError(const std::string& path, int error) {
  if (error == ENOSPC) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot watch ", path, ": the per-user inotify watch limit fs.inotify.max_user_watches",
        CurrentSysctl("/proc/sys/fs/inotify/max_user_watches"),
        " is reached; raise it with `sudo sysctl fs.inotify.max_user_watches=524288` (add a file "
        "to /etc/sysctl.d/ to keep it) or skip large directories"));
  }
  return absl::ErrnoToStatus(error, absl::StrCat("cannot watch ", path));
}

bool IsDirectory(DIR* dir, const dirent* entry) {
  if (entry->d_type != DT_UNKNOWN) {
    return entry->d_type == DT_DIR;
  }
  struct stat st;
  return fstatat(dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

int MillisSince(Clock::time_point start) {
  return static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

}  // namespace

absl::StatusOr<std::unique_ptr<TreeWatcher>> TreeWatcher::Start(
    const std::string& root, std::function<bool(const std::string& rel_dir)> skip_dir) {
  std::string trimmed = root;
  while (trimmed.size() > 1 && trimmed.back() == '/') {
    trimmed.pop_back();
  }
  struct stat st;
  if (stat(trimmed.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot watch ", root));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot watch ", root, ": not a directory"));
  }
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    if (error == EMFILE) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot watch ", root, ": the per-user inotify instance limit ",
          "fs.inotify.max_user_instances", CurrentSysctl("/proc/sys/fs/inotify/max_user_instances"),
          " is reached; raise it with `sudo sysctl fs.inotify.max_user_instances=1024`"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("cannot watch ", root, ": inotify_init1"));
  }
  std::unique_ptr<TreeWatcher> watcher(new TreeWatcher(trimmed, std::move(skip_dir), fd));
  if (absl::Status status = watcher->WatchTree("", /*report=*/false); !status.ok()) {
    return status;
  }
  return watcher;
}

TreeWatcher::TreeWatcher(std::string root, std::function<bool(const std::string&)> skip_dir, int fd)
    : root_(std::move(root)), skip_dir_(std::move(skip_dir)), fd_(fd) {}

TreeWatcher::~TreeWatcher() { close(fd_); }

int TreeWatcher::watched_dirs() const { return static_cast<int>(dirs_.size()); }

bool TreeWatcher::Skipped(const std::string& rel_dir) const {
  return BaseName(rel_dir) == ".git" || (skip_dir_ && skip_dir_(rel_dir));
}

std::string TreeWatcher::Full(const std::string& rel) const {
  return rel.empty() ? root_ : absl::StrCat(root_, "/", rel);
}

absl::Status TreeWatcher::WatchTree(const std::string& rel_dir, bool report) {
  std::vector<std::string> todo = {rel_dir};
  while (!todo.empty()) {
    std::string dir = std::move(todo.back());
    todo.pop_back();
    std::string full = Full(dir);
    // ROOT may be a symlink to a directory; below it, symlinks are entries, not directories.
    uint32_t mask = kEvents | IN_ONLYDIR | IN_EXCL_UNLINK | (dir.empty() ? 0 : IN_DONT_FOLLOW);
    int wd = inotify_add_watch(fd_, full.c_str(), mask);
    if (wd < 0) {
      int error = errno;
      if (!dir.empty() && (error == ENOENT || error == ENOTDIR)) {
        continue;  // gone (or replaced by a file) since it was seen; its events say so
      }
      return WatchError(full, error);
    }
    // The same directory watched again (seen twice while it was being filled) gets its old
    // descriptor back; the path is the newest one.
    dirs_[wd] = dir;
    if (dir.empty()) {
      root_wd_ = wd;
    }
    // Entries made before the watch existed have no events: report what is there now.
    DIR* handle = opendir(full.c_str());
    if (handle == nullptr) {
      int error = errno;
      if (!dir.empty() && (error == ENOENT || error == ENOTDIR)) {
        continue;
      }
      return absl::ErrnoToStatus(error, absl::StrCat("cannot list ", full));
    }
    while (const dirent* entry = readdir(handle)) {
      std::string name = entry->d_name;
      if (name == "." || name == "..") {
        continue;
      }
      std::string rel = Join(dir, name);
      if (IsDirectory(handle, entry)) {
        if (Skipped(rel)) {
          continue;
        }
        todo.push_back(rel);
      }
      if (report) {
        pending_.insert(rel);
      }
    }
    closedir(handle);
  }
  return absl::OkStatus();
}

void TreeWatcher::UnwatchTree(const std::string& rel_dir) {
  std::string prefix = rel_dir + "/";
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    if (it->second == rel_dir || absl::StartsWith(it->second, prefix)) {
      inotify_rm_watch(fd_, it->first);  // its IN_IGNORED then finds no mapping
      it = dirs_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::Status TreeWatcher::Resync() {
  std::map<int, std::string> old;
  old.swap(dirs_);
  absl::Status status = WatchTree("", /*report=*/false);
  for (const auto& [wd, rel] : old) {
    if (dirs_.count(wd) == 0) {
      inotify_rm_watch(fd_, wd);  // may already be gone; nothing to do then
    }
  }
  return status;
}

absl::Status TreeWatcher::Handle(int wd, uint32_t mask, const std::string& name) {
  if (mask & IN_Q_OVERFLOW) {
    overflow_ = true;
    return absl::OkStatus();
  }
  if (mask & IN_IGNORED) {  // the directory was deleted, unmounted or unwatched by us
    dirs_.erase(wd);
    if (wd == root_wd_) {
      root_gone_ = true;
    }
    return absl::OkStatus();
  }
  auto it = dirs_.find(wd);
  if (it == dirs_.end()) {
    return absl::OkStatus();  // queued before its directory was unwatched
  }
  if (name.empty()) {  // the watched directory itself
    if (wd == root_wd_ && (mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT))) {
      root_gone_ = true;
    }
    return absl::OkStatus();
  }
  std::string rel = Join(it->second, name);
  bool is_dir = (mask & IN_ISDIR) != 0;
  if (is_dir && Skipped(rel)) {
    return absl::OkStatus();
  }
  pending_.insert(rel);
  if (is_dir && (mask & IN_MOVED_FROM)) {
    UnwatchTree(rel);  // its paths are wrong now; a move within the tree re-adds it below
  }
  if (is_dir && (mask & (IN_CREATE | IN_MOVED_TO))) {
    return WatchTree(rel, /*report=*/true);
  }
  return absl::OkStatus();
}

absl::Status TreeWatcher::Drain() {
  // Large enough for hundreds of events per read(); the kernel never splits an event.
  constexpr size_t kBufferSize = 64 * 1024;
  std::vector<char> buffer(kBufferSize);
  for (;;) {
    ssize_t n = read(fd_, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      }
      return absl::ErrnoToStatus(errno, absl::StrCat("reading inotify events for ", root_));
    }
    if (n == 0) {
      break;
    }
    for (size_t offset = 0; offset + sizeof(inotify_event) <= static_cast<size_t>(n);) {
      inotify_event event;
      std::memcpy(&event, buffer.data() + offset, sizeof(event));
      const char* name_start = buffer.data() + offset + sizeof(event);
      // The name is NUL-padded to event.len bytes.
      std::string name(name_start, strnlen(name_start, event.len));
      if (absl::Status status = Handle(event.wd, event.mask, name); !status.ok()) {
        return status;
      }
      offset += sizeof(event) + event.len;
    }
  }
  return root_gone_ ? RootGone() : absl::OkStatus();
}

absl::StatusOr<bool> TreeWatcher::PollReadable(int timeout_ms) {
  Clock::time_point start = Clock::now();
  int wait_ms = timeout_ms;
  for (;;) {
    pollfd entry = {fd_, POLLIN, 0};
    int ready = poll(&entry, 1, wait_ms);
    if (ready > 0) {
      return true;
    }
    if (ready == 0) {
      return false;
    }
    if (errno != EINTR) {
      return absl::ErrnoToStatus(errno, absl::StrCat("waiting for changes in ", root_));
    }
    if (timeout_ms >= 0) {
      wait_ms = std::max(0, timeout_ms - MillisSince(start));
    }
  }
}

absl::Status TreeWatcher::RootGone() const {
  return absl::FailedPreconditionError(
      absl::StrCat("the watched directory ", root_, " was deleted or moved away"));
}

absl::StatusOr<bool> TreeWatcher::WaitForFirstChange(int timeout_ms) {
  Clock::time_point start = Clock::now();
  while (pending_.empty() && !overflow_) {
    int wait_ms = timeout_ms < 0 ? -1 : std::max(0, timeout_ms - MillisSince(start));
    absl::StatusOr<bool> ready = PollReadable(wait_ms);
    if (!ready.ok() || !*ready) {
      return ready;
    }
    if (absl::Status status = Drain(); !status.ok()) {
      return status;
    }
    // Only events of directories no longer watched: not a change; keep waiting.
    if (pending_.empty() && !overflow_ && timeout_ms >= 0 && MillisSince(start) >= timeout_ms) {
      return false;
    }
  }
  return true;
}

absl::Status TreeWatcher::CollectBatch(int quiet_ms, int max_batch_ms) {
  Clock::time_point start = Clock::now();
  for (;;) {
    int left_ms = max_batch_ms - MillisSince(start);
    if (left_ms <= 0) {
      return absl::OkStatus();
    }
    absl::StatusOr<bool> ready = PollReadable(std::clamp(quiet_ms, 0, left_ms));
    if (!ready.ok()) {
      return ready.status();
    }
    if (!*ready) {
      return absl::OkStatus();
    }
    if (absl::Status status = Drain(); !status.ok()) {
      return status;
    }
  }
}

absl::StatusOr<std::vector<std::string>> TreeWatcher::WaitForChanges(int quiet_ms, int timeout_ms,
                                                                     int max_batch_ms) {
  pending_.clear();
  overflow_ = false;
  if (root_gone_) {
    return RootGone();
  }
  absl::StatusOr<bool> changed = WaitForFirstChange(timeout_ms);
  if (!changed.ok()) {
    return changed.status();
  }
  if (!*changed) {
    return std::vector<std::string>();
  }
  if (absl::Status status = CollectBatch(quiet_ms, max_batch_ms); !status.ok()) {
    return status;
  }
  std::vector<std::string> changes(pending_.begin(), pending_.end());
  pending_.clear();
  if (overflow_) {
    // Events (directory creations among them) were lost: watch what exists now.
    if (absl::Status status = Resync(); !status.ok()) {
      return status;
    }
    return std::vector<std::string>{"*"};
  }
  return changes;
}

}  // namespace tae::client
