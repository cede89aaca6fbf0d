#pragma once

// TreeFill: makes a directory hold the files of a manifest, from blob bytes that arrive as chunks
// (a checkpoint an agent restores before a run starts, or that `taectl pull` fetches).
//
// Start looks at what is already there: a regular file with the entry's size and SHA-256 is kept
// (so an agent that still has the checkpoint fetches nothing); everything else is "missing".
// Write takes the missing blobs' chunks, each blob's in order from offset 0 (what FetchBlobs
// sends), into a temporary file in the directory, hashing as it goes; a complete blob whose bytes
// do not hash to its name is DataLoss, and is never put in place. A verified blob is renamed
// onto its first path (replacing what was there) and copied to any other path with the same
// content. Finish checks that every missing blob arrived and removes the temporary file.
//
// Nothing is written outside the directory: a symlink or file where one of the manifest's
// directories should be is removed first, and files are opened with O_NOFOLLOW. With
// remove_others, files and directories the manifest does not name are removed, so the directory
// ends up exactly the manifest. Not thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/snapshot/snapshot.h"

namespace tae::snapshot {

struct FillOptions {
  bool remove_others = false;
};

struct FillStats {
  int files = 0;
  uint64_t bytes = 0;     // of the manifest
  int files_kept = 0;     // already there with the right content
  int blobs_written = 0;  // arrived through Write
  uint64_t bytes_written = 0;
  int removed = 0;  // files and directories the manifest does not name (remove_others)
};

class TreeFill {
 public:
  // `dest` is created if missing. InvalidArgument for a path that fails CheckRelativePath.
  static absl::StatusOr<std::unique_ptr<TreeFill>> Start(std::vector<Entry> entries,
                                                         std::string dest,
                                                         FillOptions options = {});
  ~TreeFill();
  TreeFill(const TreeFill&) = delete;
  TreeFill& operator=(const TreeFill&) = delete;

  // The distinct hashes to fetch, in manifest order.
  const std::vector<std::string>& missing() const { return missing_; }

  // One chunk of blob `hash` (of `total` bytes). InvalidArgument for a blob not missing, a chunk
  // out of order or a total that differs from the manifest's size; DataLoss for content that
  // does not hash to `hash`.
  absl::Status Write(std::string_view hash, uint64_t offset, uint64_t total, std::string_view data);
  // DataLoss naming the first blob that did not arrive; OK once all did.
  absl::Status Finish();

  const FillStats& stats() const { return stats_; }

 private:
  TreeFill(std::vector<Entry> entries, std::string dest);
  absl::Status Prepare(const FillOptions& options);
  absl::Status Place(const std::string& hash);
  void Discard();

  std::vector<Entry> entries_;
  std::string dest_;
  std::vector<std::string> missing_;
  std::map<std::string, std::vector<size_t>, std::less<>> wanted_;  // hash -> entries to fill
  FillStats stats_;
  // The blob being written.
  std::string current_;
  int fd_ = -1;
  uint64_t written_ = 0;
  Sha256Stream sha_;
};

}  // namespace tae::snapshot
