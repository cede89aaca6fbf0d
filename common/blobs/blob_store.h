#pragma once

// BlobStore: a content-addressed store of file contents, for whatever manifests name them: taed's
// code snapshots ($TAE_HOME/blobs; docs/design.md §7), taed's checkpoints and run artifacts
// ($TAE_HOME/checkpoints; docs/checkpoints.md), each owned by a BlobWorker (server/blobs), and
// each agent's snapshot cache (agent/cache). Which blobs are referenced is the caller's to know.
// A blob is the bytes of one file, named by its SHA-256 (64 lowercase hex digits) and kept at
// ROOT/ab/cdef... (the first two hex digits as a directory). Uploads arrive in chunks at any
// offset into ROOT/tmp/<hash>.part; the blob appears, atomically by rename, only when every byte
// is there and the content hashes to its name (snapshot::Sha256OfFile). Not thread-safe: one
// owner thread calls it.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tae::blobs {

// True when `hash` is 64 lowercase hex digits.
bool IsBlobHash(std::string_view hash);

struct ChunkResult {
  bool complete = false;  // the blob is now stored
  uint64_t bytes_written = 0;
};

class BlobStore {
 public:
  // Creates ROOT (0700) and ROOT/tmp if missing; stale partial uploads from an earlier process
  // are removed.
  static absl::StatusOr<BlobStore> Open(const std::string& root);

  bool Has(std::string_view hash) const;
  // The hashes of `hashes` that are not stored, in the given order, without repeats.
  std::vector<std::string> Missing(const std::vector<std::string>& hashes) const;

  // Writes `data` at `offset` of the blob `hash` of `total_size` bytes. When the chunks written so
  // far cover [0, total_size) the content is verified: a blob whose bytes do not hash to `hash` is
  // discarded with DataLoss. A chunk of a blob already stored is accepted and ignored.
  // InvalidArgument for a bad hash, a chunk past total_size, or a total_size that differs from
  // an earlier chunk's.
  // `uploader`: whose upload this is. Each uploader's chunks of a blob make their own partial
  // upload, so one uploader's bytes never mix with another's (a wrong chunk from one cannot spoil
  // or finish another's upload); empty: one shared partial per blob (a single trusted writer).
  absl::StatusOr<ChunkResult> WriteChunk(std::string_view hash, uint64_t offset,
                                         uint64_t total_size, std::string_view data,
                                         std::string_view uploader = {});

  // Up to `length` bytes of a stored blob from `offset` (NotFound if not stored).
  absl::StatusOr<std::string> Read(std::string_view hash, uint64_t offset, uint64_t length) const;
  absl::StatusOr<uint64_t> Size(std::string_view hash) const;

  // Removes a stored blob; OK if it was not there.
  absl::Status Remove(std::string_view hash);
  // Forgets `uploader`'s partial upload of `hash` and removes its part file (nothing if there is
  // none).
  void DropPartial(std::string_view hash, std::string_view uploader = {});
  // How many partial uploads are open (for tests).
  size_t partial_uploads() const { return partial_.size(); }
  // Every stored blob's hash (for garbage collection against the snapshots' manifests).
  absl::StatusOr<std::vector<std::string>> List() const;
  // Removes every stored blob not in `keep`.
  struct Removed {
    int blobs = 0;
    uint64_t bytes = 0;
  };
  absl::StatusOr<Removed> RemoveAllBut(const std::set<std::string>& keep);

  std::string PathOf(std::string_view hash) const;

  // true (the default): every blob is fsync'ed before it appears. false: blobs appear unsynced
  // and Sync() makes everything written so far durable at once (one syncfs instead of one fsync
  // per file: a 10,000-file upload would otherwise spend seconds in fsync).
  void set_fsync_each(bool on) { fsync_each_ = on; }
  // true: WriteChunk writes and answers a blob that is stored already exactly as one that is not
  // (its bytes hashed, its ranges counted, stored again over the same content), so an uploader
  // learns nothing from the answer about what others stored (checkpoints: docs/security.md).
  // false (the default): a chunk of a stored blob is answered complete at once, unwritten.
  void set_answer_as_missing(bool on) { answer_as_missing_ = on; }
  // Makes the blobs stored since the last Sync durable: a few are fsync'ed one by one (with
  // their directories), many with one syncfs.
  absl::Status Sync();
  // Keeps the set of stored hashes in memory (listed once now), so Has and Missing cost no
  // system call: for an owner that is the only one changing ROOT (taed's blob worker).
  absl::Status EnableIndex();

 private:
  explicit BlobStore(std::string root) : root_(std::move(root)) {}
  // The partial upload's key: the hash, and for a named uploader a digest of its name.
  static std::string PartialKey(std::string_view hash, std::string_view uploader);
  std::string PartPath(std::string_view key) const;
  absl::StatusOr<ChunkResult> WriteWhole(std::string_view hash, std::string_view key,
                                         std::string_view data);
  // Optionally syncs the verified part file, then renames it into place.
  absl::Status Publish(std::string_view hash, const std::string& part);

  static constexpr size_t kFsyncEachUpTo = 64;
  std::string root_;
  bool fsync_each_ = true;
  bool answer_as_missing_ = false;
  std::vector<std::string> unsynced_;  // blobs stored since the last Sync (when !fsync_each_)
  std::unique_ptr<std::unordered_set<std::string>> index_;
  // Per partial upload (by PartialKey): total size and the byte ranges received so far (merged).
  struct Partial {
    uint64_t total = 0;
    std::map<uint64_t, uint64_t> ranges;  // begin -> end: [begin, end), disjoint, not touching
  };
  std::map<std::string, Partial, std::less<>> partial_;
};

}  // namespace tae::blobs
