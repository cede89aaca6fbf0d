#pragma once

// Content-addressed code snapshots: a directory becomes a manifest, a sorted list of (mode, size,
// SHA-256, path) lines, and the snapshot's id is the SHA-256 of that manifest text, so two trees
// with the same file contents, permission bits and names have the same id whatever their mtimes.
//
// This library talks to no network and keeps no hidden state: it reads the file system (WalkTree)
// and, only through an explicit HashCache, reads and writes one cache file. Paths are always
// relative to the snapshot root, '/'-separated and valid UTF-8.

#include <sys/stat.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/text/utf8.h"

namespace tae::snapshot {

// One regular file of a snapshot.
struct Entry {
  std::string path;    // relative, '/'-separated, valid UTF-8, passes CheckRelativePath
  uint32_t mode = 0;   // permission bits, normalised like git: 0755 if owner-executable, else 0644
  uint64_t size = 0;   // bytes
  std::string sha256;  // 64 lowercase hex digits
};

// The result of walking a directory.
struct Walk {
  std::vector<Entry> files;           // sorted by path (byte order)
  std::vector<std::string> excluded;  // sorted paths left out by ignore rules (and .git);
                                      // directories end with '/'; for --dry-run
  uint64_t total_bytes = 0;           // sum of files[].size
  uint64_t hashed_bytes = 0;          // bytes actually read to hash in this walk (the rest of
                                      // total_bytes came from WalkOptions::cache)
};

// A file's stat identity as the cache keys it: a file whose identity is unchanged is assumed to
// have unchanged content (unless the entry is racy, see HashCache::Lookup).
struct StatIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // nanoseconds since the epoch
  int64_t ctime_ns = 0;
  uint32_t mode = 0;  // st_mode, file type bits included

  static StatIdentity Of(const struct stat& st);
  friend bool operator==(const StatIdentity& a, const StatIdentity& b) {
    return a.dev == b.dev && a.ino == b.ino && a.size == b.size && a.mtime_ns == b.mtime_ns &&
           a.ctime_ns == b.ctime_ns && a.mode == b.mode;
  }
  friend bool operator!=(const StatIdentity& a, const StatIdentity& b) { return !(a == b); }
};

// A stat-keyed cache of file hashes, like git's index, so that re-walking an unchanged tree reads
// no file contents. Identity stays by content: the cache only decides whether a file must be
// re-read, never what a snapshot is.
//
// The racy rule (git's "racy clean" rule, made stricter). The cache carries a reference time R:
// the wall-clock time at which it was loaded (or constructed), i.e. taken before any file of the
// walk that uses it is read; Save stores R. A recorded entry is trusted only if its mtime is
// earlier than R - 1 s. Rationale: a file modified after R (so possibly after it was hashed) gets
// an mtime of at least R minus the file system's timestamp granularity and clock lag (the coarse
// kernel clock, 1 s on ext3, a slightly skewed NFS server; FAT's 2 s is not covered), so an entry
// whose mtime is older than R - 1 s would show a different mtime after any such change, and equal
// stat data means equal content. Entries at or after R - 1 s (including mtimes in the future) are
// "racy": Lookup reports them as misses and the walker re-hashes them (and records them again;
// they become trusted once a later cache's R is over a second after their mtime). Git compares
// with the index file's mtime, taken when the index is written; using the load time instead also
// covers a file modified between being hashed and the cache being saved. As in git, ctime takes
// part in the equality check only, not in the racy check (it cannot be set into the past, so
// including it would make every file touched in the last second before a walk racy, and adds
// little: any write sets mtime too). The one change this misses, as git does, is a same-size
// content change whose mtime is then restored (utimensat) and whose new ctime lands on the very
// timestamp recorded; with multigrain timestamps (Linux 6.13+, observed on ext4) a ctime change
// after a stat always gets a new timestamp, so even that is detected.
//
// Not thread-safe (Lookup updates the hit/miss counters).
class HashCache {
 public:
  // An empty cache whose reference time is now.
  HashCache();

  // Loads a cache file written by Save. A missing, truncated, corrupt or wrong-version file gives
  // an empty cache (never an error): the cache is only an optimisation. The new cache's own
  // reference time (the one Save will write) is now; the loaded entries keep the file's.
  static HashCache Load(const std::string& path);

  // The recorded SHA-256 (64 lowercase hex digits) of `rel` if StatIdentity::Of(st) equals the
  // recorded identity and the entry is not racy (see above). Counts a hit or a miss.
  std::optional<std::string> Lookup(const std::string& rel, const struct stat& st) const;

  // Lookup that, on a hit, also keeps the entry for Save (what the walker does for every file it
  // finds): one map probe and no hex round trip where Lookup + Record take two.
  std::optional<std::string> Take(const std::string& rel, const struct stat& st);

  // Take for walkers on several threads: counts into *stats instead of the cache, so calls for
  // different paths may run at the same time (each reads the map and writes only the entry of
  // `rel`), never at the same time as anything else. AddStats adds a walker's counts afterwards.
  struct TakeStats {
    size_t hits = 0;
    size_t misses = 0;
    size_t unchanged = 0;
  };
  std::optional<std::string> TakeShared(const std::string& rel, const struct stat& st,
                                        TakeStats* stats);
  void AddStats(const TakeStats& stats);

  // Records that `rel`, with stat data `st` taken before its content was read, hashes to `sha256`
  // (64 lowercase hex digits; anything else is ignored). Call it after reading the content (the
  // walker also re-checks the stat data after reading and records nothing if it changed).
  void Record(const std::string& rel, const struct stat& st, const std::string& sha256);

  // Writes the entries recorded since Load (so entries of files no longer walked are dropped), the
  // reference time and the snapshot id, atomically: a temp file in the same directory, then
  // rename. Not synced: after a crash the file is the old one, the new one, or one that fails its
  // checksum and loads empty. Creates missing parent directories with mode 0700.
  absl::Status Save(const std::string& path) const;

  // The SHA-256s (hex) of the loaded entries that Record has not changed since: contents of the
  // last walk that was saved (a mount saves only once taed has the snapshot), whenever called.
  std::vector<std::string> KnownHashes() const;

  // The snapshot id of the walk saved last (empty if none was set). SetSnapshotId stores the id of
  // the current walk for Save.
  const std::string& loaded_snapshot_id() const { return loaded_snapshot_id_; }
  void SetSnapshotId(const std::string& id) { snapshot_id_ = id; }

  // True when a walk of `walked_files` files that used this cache found exactly the loaded entries
  // with the same manifest lines (path, size, exec bit, hash; a racy entry re-hashed to the same
  // content counts), and the saved walk's id is known: the manifest, so the id, is that of the
  // saved walk, and the caller can skip building and hashing it.
  bool WalkMatchesLoaded(size_t walked_files) const {
    return !loaded_snapshot_id_.empty() && walked_files == loaded_count_ &&
           unchanged_ == loaded_count_;
  }

  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }
  // Entries Lookup can consult (loaded or recorded).
  size_t size() const { return items_.size(); }

 private:
  struct Item {
    StatIdentity stat;
    std::array<char, 32> digest{};  // raw SHA-256
    bool recorded = false;          // by Record or Take since Load (else only loaded)
    bool loaded = false;            // from the file, digest not changed by Record since
  };

  absl::flat_hash_map<std::string, Item> items_;
  int64_t loaded_reference_ns_ = 0;  // R of the loaded file, for entries not recorded since
  int64_t reference_ns_ = 0;         // R of this cache: when it was loaded or constructed
  std::string loaded_snapshot_id_;   // from the file (hex)
  size_t loaded_count_ = 0;          // entries in the file
  size_t unchanged_ = 0;             // loaded entries a walk found with the same manifest line
  std::string snapshot_id_;          // for Save (hex)
  mutable size_t hits_ = 0;
  mutable size_t misses_ = 0;
};

// Options for WalkTree.
struct WalkOptions {
  // When set: Take before hashing a file (a hit is not read and is kept for a later Save), Record
  // after hashing. For a symlink to a file inside the tree the stat
  // data is the target's (what is hashed), the key the link's path.
  HashCache* cache = nullptr;
};

// Walks `root` recursively and hashes every regular file (SHA-256, streamed in 1 MiB chunks), or,
// with options.cache, every regular file the cache does not trust. The result does not depend on
// the cache (beyond Walk::hashed_bytes).
//
// Ignore rules come from `.gitignore` and `.taeignore` files in the root and in any subdirectory
// (read in that order, so in one directory .taeignore wins); a rule applies below the directory of
// its file. Supported subset of gitignore: blank lines and `#` comments, `!` negation, trailing `/`
// (directories only), a leading or inner `/` anchors the pattern to its file's directory
// (otherwise it matches the name at any depth), `*`, `?`, `**` (leading, trailing or inner),
// `[abc]`/`[a-z]`/`[!a]` classes, `\` escapes; the last matching rule wins. As in git, a file
// inside an excluded directory cannot be re-included. Entries named `.git` are always excluded.
//
// Fails with InvalidArgument naming the relative path and the reason for: a symlink whose target
// resolves outside root, a dangling symlink, a symlink to a directory, a device file, fifo or
// socket, a name that is not valid UTF-8 or contains a newline. A symlink to a file inside the
// tree is stored as a regular file with the target's content and mode. Ignored entries are never
// rejected. I/O failures give Internal/PermissionDenied/NotFound.
absl::StatusOr<Walk> WalkTree(const std::string& root);
absl::StatusOr<Walk> WalkTree(const std::string& root, const WalkOptions& options);

// The canonical manifest: one line per entry, `mode size sha256 path\n`, mode as four octal digits
// (e.g. `0644`), size in decimal. Entries are written in the given order (WalkTree sorts them).
std::string ManifestText(const std::vector<Entry>& entries);

// SHA-256 (lowercase hex) of ManifestText(entries): the snapshot's id.
std::string SnapshotId(const std::vector<Entry>& entries);

// Inverse of ManifestText. Validates every field (mode 0000..0777 as four octal digits, decimal
// size without leading zeros, 64 lowercase hex digits, a path passing CheckRelativePath), that
// paths are strictly increasing, and that the text ends with a newline. Errors name the 1-based
// line number. ManifestText(*ParseManifest(t)) == t for any accepted t.
absl::StatusOr<std::vector<Entry>> ParseManifest(std::string_view text);

// Accepts a relative path that is safe to join under a directory: rejects an empty path, an
// absolute one, empty, `.` or `..` components, backslashes, NUL, newlines and invalid UTF-8.
// InvalidArgument names the (escaped) path and the reason.
absl::Status CheckRelativePath(std::string_view path);

// True if `bytes` is well-formed UTF-8 (common/text).
using text::IsValidUtf8;

// SHA-256 of `data` as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view data);

// SHA-256 of data given in pieces (e.g. a blob arriving in chunks).
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void Update(std::string_view data);
  // 64 lowercase hex digits of everything given since construction or the last Finish, which
  // starts over.
  std::string FinishHex();

 private:
  void* ctx_;  // EVP_MD_CTX
};

// SHA-256 of the file at `path` (read in 1 MiB chunks) as 64 lowercase hex digits.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

// Matches one gitignore glob against a '/'-separated path: `*` and `?` do not cross '/', `**/`
// matches zero or more directories, a trailing `/**` everything below, `[...]` a class, `\` escapes
// the next character. Exposed for tests.
bool GlobMatch(std::string_view pattern, std::string_view path);

// One parsed ignore rule.
struct IgnoreRule {
  std::string base;     // directory of the ignore file relative to root, "" for root, no '/' at end
  std::string pattern;  // without `!`, leading `/` and trailing `/`
  bool negate = false;
  bool dir_only = false;
  bool anchored = false;  // match against the path below `base`, not just the last name
};

// The rules of a stack of ignore files; later rules win.
class IgnoreMatcher {
 public:
  // Adds the rules of one ignore file whose directory is `base` (relative to root, "" for root).
  void AddRules(std::string_view base, std::string_view file_text);

  // Whether `path` (relative to root; `is_dir` says if it is a directory) is ignored by the last
  // rule that matches it. Paths outside a rule's base are not affected by it.
  bool Ignored(std::string_view path, bool is_dir) const;

  const std::vector<IgnoreRule>& rules() const { return rules_; }

 private:
  std::vector<IgnoreRule> rules_;
};

}  // namespace tae::snapshot
