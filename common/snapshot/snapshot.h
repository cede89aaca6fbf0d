#pragma once

// Content-addressed code snapshots: a directory becomes a manifest, a sorted list of (mode, size,
// SHA-256, path) lines, and the snapshot's id is the SHA-256 of that manifest text, so two trees
// with the same file contents, permission bits and names have the same id whatever their mtimes.
//
// This library is pure: it reads the file system (WalkTree) but keeps no state and talks to no
// network. Paths are always relative to the snapshot root, '/'-separated and valid UTF-8.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

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
};

// Walks `root` recursively and hashes every regular file (SHA-256, streamed in 1 MiB chunks).
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

// True if `bytes` is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view bytes);

// SHA-256 of `data` as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view data);

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
