#pragma once

// Recursive, debounced change watcher for `taectl sync DIR --watch` (Linux inotify).
//
// One inotify watch per directory: ROOT and every directory below it, except `.git` directories
// and those the caller's skip_dir() rejects (their contents are neither watched nor reported).
// Directories that appear later (created, `mkdir -p` in one go, or moved in) are watched as
// their creation is seen, and scanned at once so that entries made before the watch existed are
// reported too. Directories that are deleted or moved away lose their watches.
//
// Not thread-safe: one thread owns a TreeWatcher and calls WaitForChanges(), which blocks in
// poll(); no thread is started.

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tae::client {

class TreeWatcher {
 public:
  // rel_dir is relative to root with '/' separators ("a/b"); skip_dir is never asked about the
  // root itself nor about `.git`, which is always skipped. Errors: root missing or not a
  // directory, or inotify limits (the message names the sysctl to raise).
  static absl::StatusOr<std::unique_ptr<TreeWatcher>> Start(
      const std::string& root, std::function<bool(const std::string& rel_dir)> skip_dir = nullptr);
  ~TreeWatcher();
  TreeWatcher(const TreeWatcher&) = delete;
  TreeWatcher& operator=(const TreeWatcher&) = delete;

  // Waits up to timeout_ms (-1: forever) for a change; once one arrives keeps collecting until
  // quiet_ms pass without any further event (an editor's save storm or a `git checkout` is one
  // change), but never longer than max_batch_ms in total. Returns the relative paths that
  // changed (created, modified, deleted, moved in or out, attributes changed), sorted and
  // unique; for a new directory, the directory and everything found in it. Empty on timeout.
  // {"*"} after the kernel queue overflowed: something changed, rescan (watches are re-synced
  // with the tree before returning). FailedPrecondition once ROOT itself is deleted or moved.
  absl::StatusOr<std::vector<std::string>> WaitForChanges(int quiet_ms, int timeout_ms,
                                                          int max_batch_ms = 5000);

  // Directories currently watched, ROOT included.
  int watched_dirs() const;

 private:
  TreeWatcher(std::string root, std::function<bool(const std::string&)> skip_dir, int fd);

  bool Skipped(const std::string& rel_dir) const;
  std::string Full(const std::string& rel) const;
  // Watches rel_dir and, recursively, every non-skipped directory below it. When `report` is
  // set, every entry found below rel_dir goes into pending_. A directory that vanished in the
  // meantime is not an error.
  absl::Status WatchTree(const std::string& rel_dir, bool report);
  // Removes the watches of rel_dir and everything below it (it was moved away).
  void UnwatchTree(const std::string& rel_dir);
  // After an overflow: re-walks the tree, watches what is missing, drops stale watches.
  absl::Status Resync();
  // Reads and handles every queued event. Fails once ROOT is gone.
  absl::Status Drain();
  absl::Status RootGone() const;
  // Until the first change (true) or timeout_ms (false); -1 waits forever.
  absl::StatusOr<bool> WaitForFirstChange(int timeout_ms);
  // Debounce: collects until quiet_ms pass without an event, at most max_batch_ms.
  absl::Status CollectBatch(int quiet_ms, int max_batch_ms);
  absl::Status Handle(int wd, uint32_t mask, const std::string& name);
  // poll() for readability; false on timeout. Retries on EINTR with the remaining time.
  absl::StatusOr<bool> PollReadable(int timeout_ms);

  const std::string root_;
  const std::function<bool(const std::string&)> skip_dir_;
  const int fd_;
  int root_wd_ = -1;
  std::map<int, std::string> dirs_;  // watch descriptor -> relative directory ("" = root)
  std::set<std::string> pending_;    // changes of the batch being collected
  bool overflow_ = false;
  bool root_gone_ = false;
};

}  // namespace tae::client
