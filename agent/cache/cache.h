#pragma once

// SnapshotCache: each agent's content-addressed cache of code snapshots (DESIGN §7). Starting a run
// materialises its snapshot into the run directory by hard links, so an unchanged file is never
// fetched or copied twice; only missing blobs are fetched (by the caller, over the link).
//
// Layout below DIR:
//   blobs/ab/cdef...      a blobs::BlobStore; every blob is 0444
//   exec/ab/cdef...       0555 copies of the blobs some manifest needs with mode 0755 (hard links
//                         share one inode and so one mode, hence a second inode per such blob)
//   exec/tmp/, manifests/<id>.tmp   transient files, removed by Open
//   manifests/<id>        verified manifest texts (id = SHA-256 of the text)
//
// Limitation: a materialised file IS the cached inode. A job that writes to its source files in
// place (after chmod u+w; root ignores the 0444 mode altogether) corrupts the cache for every later
// run. Materialise detects a changed size before linking and discards such a blob so that it is
// fetched again, but a same-size in-place edit goes unnoticed. Jobs must not modify their source
// files in place (replacing them, i.e. write a new file and rename, is fine: that makes a new
// inode).
//
// Not thread-safe: the agent calls it from one thread.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/blobs/blob_store.h"
#include "common/snapshot/snapshot.h"

namespace tae::agent {

struct MaterialiseStats {
  int linked = 0;  // files created as hard links to the cache
  int copied = 0;  // files copied because link() failed with EXDEV or EMLINK
};

struct RemoveStats {
  int files_removed = 0;
  int files_kept = 0;  // entries whose file was changed, replaced or is not a regular file
  int dirs_removed = 0;
};

struct ScrapResult {
  int manifests_removed = 0;
  int blobs_removed = 0;
  int exec_copies_removed = 0;
  // Bytes of the cache files removed (what BlobBytes drops by). The disk space itself comes back
  // once no run directory holds a hard link to the same inode (see RemoveMaterialised).
  uint64_t bytes_freed = 0;
};

class SnapshotCache {
 public:
  // Creates DIR, DIR/blobs, DIR/exec and DIR/manifests if missing and removes transient files an
  // earlier process left behind.
  static absl::StatusOr<std::unique_ptr<SnapshotCache>> Open(const std::string& dir);

  SnapshotCache(const SnapshotCache&) = delete;
  SnapshotCache& operator=(const SnapshotCache&) = delete;

  bool HasManifest(const std::string& id) const;
  // Verifies that `text` parses (snapshot::ParseManifest) and that its SnapshotId equals `id`
  // (DataLoss naming the id otherwise; InvalidArgument when `id` is not 64 lowercase hex digits),
  // then stores it atomically (temporary file, fsync, rename). Storing a present id again is OK.
  absl::Status PutManifest(const std::string& id, const std::string& text);
  // NotFound when not cached.
  absl::StatusOr<std::vector<snapshot::Entry>> GetManifest(const std::string& id) const;
  // Sorted.
  std::vector<std::string> ManifestIds() const;

  // The distinct blob hashes of `entries` that are not cached, in manifest order.
  std::vector<std::string> MissingBlobs(const std::vector<snapshot::Entry>& entries) const;
  // blobs::BlobStore::WriteChunk; a completed blob is made 0444.
  absl::StatusOr<blobs::ChunkResult> WriteChunk(std::string_view hash, uint64_t offset,
                                                uint64_t total, std::string_view data);

  // Creates every file of `entries` below `dest_dir` (an existing directory, trusted: it may itself
  // be reached through a symlink) as a hard link to the cached blob (mode 0444), or for entries
  // with an execute bit to the blob's 0555 exec copy, falling back to a copy with the same mode
  // when link() fails with EXDEV or EMLINK. Missing parent directories are created (0755).
  //
  // Checked before anything is created: every path passes snapshot::CheckRelativePath
  // (InvalidArgument naming it) and every sha256 is a blob hash; every blob is cached
  // (FailedPrecondition naming path and hash); every cached blob has entry.size bytes (otherwise
  // the blob was modified through a hard link: it is discarded, so MissingBlobs reports it again,
  // and the call fails with DataLoss naming path and hash).
  //
  // Checked while creating, and nothing is ever created outside dest_dir: parent directories are
  // opened component by component with openat(O_NOFOLLOW | O_DIRECTORY) relative to the previous
  // directory's fd (created with mkdirat when missing), and files are created with linkat (or
  // openat(O_CREAT | O_EXCL)) relative to the parent's fd. A symlink or non-directory where a
  // parent directory should be is InvalidArgument naming the path; an existing destination
  // (including a symlink) is AlreadyExists naming the path. On such an error the files created so
  // far stay; the caller discards the run directory.
  absl::StatusOr<MaterialiseStats> Materialise(const std::vector<snapshot::Entry>& entries,
                                               const std::string& dest_dir);

  // Undoes Materialise to free the space a run directory holds when its snapshot is scrapped (call
  // it before Scrap). Removes each file of `entries` from `dir` if it is still a hard link to the
  // cached inode (blob or exec copy), or otherwise a regular file with the entry's size and
  // SHA-256 (a copy); files the job changed or replaced are kept. Never follows a symlink (walks
  // like Materialise, without creating). Then removes the directories of `entries` left empty,
  // deepest first; `dir` itself stays. InvalidArgument (before removing anything) for a path that
  // fails CheckRelativePath.
  absl::StatusOr<RemoveStats> RemoveMaterialised(const std::vector<snapshot::Entry>& entries,
                                                 const std::string& dir);

  // Removes the manifests of `ids` (every manifest when `all`; ids not cached are ignored;
  // InvalidArgument for an id that is not a hash), then every blob and exec copy that no remaining
  // manifest references and that is not in `keep` (hashes in use by a running job). A remaining
  // manifest that no longer parses is removed too (and counted), with a warning.
  absl::StatusOr<ScrapResult> Scrap(const std::vector<std::string>& ids, bool all,
                                    const std::set<std::string>& keep);

  // Bytes of blobs and exec copies on disk.
  uint64_t BlobBytes() const;

  // Paths of the cached files (for tests and diagnostics).
  std::string BlobPath(std::string_view hash) const { return blobs_.PathOf(hash); }
  std::string ExecPath(std::string_view hash) const;

  // Makes Materialise copy instead of linking, as if link() failed with EXDEV.
  void SetForceCopyForTest(bool force) { force_copy_ = force; }

 private:
  SnapshotCache(std::string dir, blobs::BlobStore blobs);

  std::string ManifestPath(const std::string& id) const;
  // The path of a 0444 blob (or, for `exec`, of its 0555 exec copy, made when missing) holding
  // `size` bytes, for entry `path`.
  absl::StatusOr<std::string> SourceFor(const snapshot::Entry& entry, bool exec);
  absl::StatusOr<std::string> EnsureExecCopy(const std::string& hash, uint64_t size);
  // Exec copies on disk: hash -> size.
  std::vector<std::pair<std::string, uint64_t>> ExecCopies() const;

  std::string dir_;
  blobs::BlobStore blobs_;
  bool force_copy_ = false;
};

}  // namespace tae::agent
