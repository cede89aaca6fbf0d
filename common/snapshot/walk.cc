// WalkTree: the directory walk, ignore files, path safety and SHA-256 hashing.

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/snapshot/snapshot.h"

namespace tae::snapshot {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

absl::Status ErrnoError(int error, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status Rejected(const std::string& rel, absl::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot snapshot \"", absl::CHexEscape(rel), "\": ", reason));
}

struct EvpCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using EvpCtx = std::unique_ptr<EVP_MD_CTX, EvpCtxDeleter>;

struct DirCloser {
  void operator()(DIR* dir) const { closedir(dir); }
};

struct FdCloser {
  explicit FdCloser(int fd) : fd(fd) {}
  ~FdCloser() { close(fd); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int fd;
};

EvpCtx NewSha256() {
  EvpCtx ctx(EVP_MD_CTX_new());
  if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return nullptr;
  }
  return ctx;
}

std::string FinishHex(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

// Hashes the file at `full` into `entry` (sha256, size = bytes actually read). If `after` is set,
// it receives the open file's stat data once everything was read.
absl::Status HashFile(const std::string& full, const std::string& rel, Entry& entry,
                      struct stat* after = nullptr) {
  int fd = open(full.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoError(errno, absl::StrCat("open \"", absl::CHexEscape(rel), "\""));
  }
  FdCloser closer(fd);
  EvpCtx ctx = NewSha256();
  if (ctx == nullptr) {
    return absl::InternalError("OpenSSL SHA-256 initialisation failed");
  }
  std::vector<char> buffer(kChunkBytes);
  uint64_t size = 0;
  while (true) {
    ssize_t got = read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      return ErrnoError(errno, absl::StrCat("read \"", absl::CHexEscape(rel), "\""));
    }
    if (got == 0) {
      break;
    }
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(got));
    size += static_cast<uint64_t>(got);
  }
  if (after != nullptr && fstat(fd, after) != 0) {
    return ErrnoError(errno, absl::StrCat("stat \"", absl::CHexEscape(rel), "\""));
  }
  entry.size = size;
  entry.sha256 = FinishHex(ctx.get());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  Entry entry;
  if (absl::Status status = HashFile(path, path, entry); !status.ok()) {
    return status;
  }
  return entry.sha256;
}

namespace {

// Reads a (small) ignore file; a missing one is empty.
absl::StatusOr<std::string> ReadIgnoreFile(const std::string& full, const std::string& rel) {
  struct stat st;
  if (lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return std::string();
  }
  int fd = open(full.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoError(errno, absl::StrCat("open \"", absl::CHexEscape(rel), "\""));
  }
  FdCloser closer(fd);
  std::string text;
  char buffer[8192];
  while (true) {
    ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      return ErrnoError(errno, absl::StrCat("read \"", absl::CHexEscape(rel), "\""));
    }
    if (got == 0) {
      return text;
    }
    text.append(buffer, static_cast<size_t>(got));
  }
}

class Walker {
 public:
  // A top-level directory left for another walker (see set_defer_top_dirs).
  struct Deferred {
    size_t order = 0;  // its place among the root's sorted entries
    std::string rel;
    IgnoreMatcher matcher;
  };
  // A file hashed by this walker, for HashCache::Record once the walkers have joined.
  struct Pending {
    std::string rel;
    struct stat st;
    std::string sha256;
  };

  Walker(std::string root_real, HashCache* cache)
      : root_real_(std::move(root_real)), cache_(cache) {}

  // The root's directories are listed in deferred() instead of walked, so that walkers on other
  // threads can take them; the root's own files are handled here.
  void set_defer_top_dirs(bool on) { defer_top_dirs_ = on; }
  std::vector<Deferred>& deferred() { return deferred_; }
  // After WalkDir("") failed: the place among the root's entries of the one that failed.
  size_t stopped_at() const { return stopped_at_; }
  Walk& walk() { return walk_; }
  const HashCache::TakeStats& take_stats() const { return take_stats_; }
  std::vector<Pending>& pending() { return pending_; }

  // Walks the directory `rel` ("" for the root) with the rules that apply above it.
  absl::Status WalkDir(const std::string& rel, IgnoreMatcher matcher) {
    const std::string dir =
        rel.empty() ? (root_real_.empty() ? "/" : root_real_) : absl::StrCat(root_real_, "/", rel);
    const std::string prefix = rel.empty() ? "" : absl::StrCat(rel, "/");
    for (const char* name : {".gitignore", ".taeignore"}) {
      absl::StatusOr<std::string> text = ReadIgnoreFile(
          absl::StrCat(dir == "/" ? "" : dir, "/", name), absl::StrCat(prefix, name));
      if (!text.ok()) {
        return text.status();
      }
      matcher.AddRules(rel, *text);
    }
    std::unique_ptr<DIR, DirCloser> handle(opendir(dir.c_str()));
    if (handle == nullptr) {
      return ErrnoError(errno, absl::StrCat("open directory \"", absl::CHexEscape(rel), "\""));
    }
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* item = readdir(handle.get())) {
      std::string name = item->d_name;
      if (name != "." && name != "..") {
        names.push_back(std::move(name));
      }
    }
    if (errno != 0) {
      return ErrnoError(errno, absl::StrCat("read directory \"", absl::CHexEscape(rel), "\""));
    }
    // The directory stays open while its entries are visited: lstat relative to it (fstatat)
    // saves resolving the whole path for each of thousands of files. One descriptor per level.
    const int dir_fd = dirfd(handle.get());
    std::sort(names.begin(), names.end());
    for (size_t i = 0; i < names.size(); ++i) {
      if (rel.empty()) {
        root_index_ = i;
      }
      if (absl::Status status = Visit(dir_fd, dir, prefix, names[i], matcher); !status.ok()) {
        if (rel.empty()) {
          stopped_at_ = i;
        }
        return status;
      }
    }
    return absl::OkStatus();
  }

  Walk Finish() && {
    // Directories are read in name order, so the files usually come out in path order already
    // (not always: "a-b" sorts before "a/c" but the directory "a" is walked first).
    auto by_path = [](const Entry& a, const Entry& b) { return a.path < b.path; };
    if (!std::is_sorted(walk_.files.begin(), walk_.files.end(), by_path)) {
      std::sort(walk_.files.begin(), walk_.files.end(), by_path);
    }
    std::sort(walk_.excluded.begin(), walk_.excluded.end());
    return std::move(walk_);
  }

 private:
  absl::Status Visit(int dir_fd, const std::string& dir, const std::string& prefix,
                     const std::string& name, const IgnoreMatcher& matcher) {
    std::string rel = prefix + name;
    auto full = [&] { return absl::StrCat(dir == "/" ? "" : dir, "/", name); };
    struct stat st;
    if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoError(errno, absl::StrCat("stat \"", absl::CHexEscape(rel), "\""));
    }
    const bool is_dir = S_ISDIR(st.st_mode);
    if (name == ".git" || matcher.Ignored(rel, is_dir)) {
      walk_.excluded.push_back(is_dir ? rel + "/" : rel);
      return absl::OkStatus();
    }
    if (!IsValidUtf8(name)) {
      return Rejected(rel, "the name is not valid UTF-8");
    }
    if (name.find('\n') != std::string::npos || name.find('\r') != std::string::npos) {
      return Rejected(rel, "the name contains a line break");
    }
    if (name.find('\\') != std::string::npos) {
      return Rejected(rel, "the name contains a backslash");
    }
    if (is_dir && defer_top_dirs_ && prefix.empty()) {
      deferred_.push_back(Deferred{root_index_, rel, matcher});
      return absl::OkStatus();
    }
    if (is_dir) {
      return WalkDir(rel, matcher);
    }
    std::string target;  // of a symlink: what is hashed
    if (S_ISLNK(st.st_mode)) {
      char resolved[PATH_MAX];
      if (realpath(full().c_str(), resolved) == nullptr) {
        return Rejected(rel,
                        absl::StrCat("symlink cannot be resolved (", std::strerror(errno), ")"));
      }
      target = resolved;
      const bool inside =
          target == root_real_ || (target.size() > root_real_.size() &&
                                   target.compare(0, root_real_.size(), root_real_) == 0 &&
                                   target[root_real_.size()] == '/');
      if (!inside) {
        return Rejected(rel, absl::StrCat("symlink points outside the tree (to \"",
                                          absl::CHexEscape(target), "\")"));
      }
      if (stat(target.c_str(), &st) != 0) {
        return ErrnoError(errno, absl::StrCat("stat \"", absl::CHexEscape(rel), "\""));
      }
      if (S_ISDIR(st.st_mode)) {
        return Rejected(rel, "symlink to a directory is not supported");
      }
    }
    if (!S_ISREG(st.st_mode)) {
      const char* kind = S_ISFIFO(st.st_mode)                         ? "a fifo"
                         : S_ISSOCK(st.st_mode)                       ? "a socket"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device file"
                                                                      : "not a regular file";
      return Rejected(rel, absl::StrCat("it is ", kind));
    }
    Entry entry;
    entry.path = std::move(rel);  // not used below
    entry.mode = (st.st_mode & S_IXUSR) != 0 ? 0755 : 0644;
    if (absl::Status status = HashOrLookUp(dir, name, target, st, entry); !status.ok()) {
      return status;
    }
    walk_.total_bytes += entry.size;
    walk_.files.push_back(std::move(entry));
    return absl::OkStatus();
  }

  // Fills entry.size and entry.sha256 from the cache if it trusts `st` (the stat data of the file
  // `name` in `dir`, or of a symlink's `target`), else by reading the file (and records the result
  // if the file did not change while it was read). The path is only built when the file is read.
  absl::Status HashOrLookUp(const std::string& dir, const std::string& name,
                            const std::string& target, const struct stat& st, Entry& entry) {
    if (cache_ != nullptr) {
      if (std::optional<std::string> sha256 = cache_->TakeShared(entry.path, st, &take_stats_)) {
        entry.size = static_cast<uint64_t>(st.st_size);
        entry.sha256 = *std::move(sha256);
        return absl::OkStatus();
      }
    }
    struct stat after;
    if (absl::Status status =
            HashFile(target.empty() ? absl::StrCat(dir == "/" ? "" : dir, "/", name) : target,
                     entry.path, entry, cache_ != nullptr ? &after : nullptr);
        !status.ok()) {
      return status;
    }
    walk_.hashed_bytes += entry.size;
    if (cache_ != nullptr && entry.size == static_cast<uint64_t>(st.st_size) &&
        StatIdentity::Of(after) == StatIdentity::Of(st)) {
      pending_.push_back({entry.path, st, entry.sha256});
    }
    return absl::OkStatus();
  }

  const std::string root_real_;
  HashCache* const cache_;  // only TakeShared while walking: walkers may run in parallel
  bool defer_top_dirs_ = false;
  std::vector<Deferred> deferred_;
  size_t root_index_ = 0;
  size_t stopped_at_ = SIZE_MAX;
  HashCache::TakeStats take_stats_;
  std::vector<Pending> pending_;
  Walk walk_;
};

// Threads that walk the root's directories. fstatat of cached dentries scales across cores
// (two halves of a 10,000-file tree stat in the time of one), so two walkers on this 2-core
// class of machine halve the stat-bound part of a re-mount.
constexpr unsigned kMaxWalkThreads = 2;

}  // namespace

Sha256Stream::Sha256Stream() : ctx_(NewSha256().release()) {}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256Stream::Update(std::string_view data) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size());
}

std::string Sha256Stream::FinishHex() {
  EVP_MD_CTX* ctx = static_cast<EVP_MD_CTX*>(ctx_);
  std::string hex = tae::snapshot::FinishHex(ctx);
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  return hex;
}

std::string Sha256Hex(std::string_view data) {
  EvpCtx ctx = NewSha256();
  if (ctx == nullptr) {
    return std::string();
  }
  EVP_DigestUpdate(ctx.get(), data.data(), data.size());
  return FinishHex(ctx.get());
}

absl::StatusOr<Walk> WalkTree(const std::string& root) { return WalkTree(root, WalkOptions()); }

absl::StatusOr<Walk> WalkTree(const std::string& root, const WalkOptions& options) {
  char resolved[PATH_MAX];
  if (realpath(root.c_str(), resolved) == nullptr) {
    return ErrnoError(errno, absl::StrCat("snapshot root \"", root, "\""));
  }
  struct stat st;
  if (stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot root \"", root, "\" is not a directory"));
  }
  std::string root_real = resolved;
  if (root_real == "/") {
    root_real.clear();  // children are then "/name"
  }
  Walker walker(root_real, options.cache);
  walker.set_defer_top_dirs(true);
  const absl::Status root_status = walker.WalkDir("", IgnoreMatcher());
  // The root's directories, each by a walker of its own, on up to kMaxWalkThreads threads. The
  // first error in path order wins, as in a sequential walk: directories after a failing root
  // entry are not walked.
  std::vector<Walker::Deferred>& tasks = walker.deferred();
  while (!tasks.empty() && tasks.back().order > walker.stopped_at()) {
    tasks.pop_back();
  }
  std::vector<std::unique_ptr<Walker>> subs(tasks.size());
  std::vector<absl::Status> statuses(tasks.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < tasks.size();) {
      subs[i] = std::make_unique<Walker>(root_real, options.cache);
      statuses[i] = subs[i]->WalkDir(tasks[i].rel, tasks[i].matcher);
    }
  };
  const unsigned threads =
      std::min<unsigned>({kMaxWalkThreads, std::max(1u, std::thread::hardware_concurrency()),
                          static_cast<unsigned>(std::max<size_t>(1, tasks.size()))});
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    pool.emplace_back(work);
  }
  work();
  for (std::thread& thread : pool) {
    thread.join();
  }
  // Back on one thread: counts and the hashes of files read go into the cache.
  std::vector<Walker*> all = {&walker};
  for (const std::unique_ptr<Walker>& sub : subs) {
    all.push_back(sub.get());
  }
  for (Walker* each : all) {
    if (options.cache != nullptr) {
      options.cache->AddStats(each->take_stats());
      for (const Walker::Pending& pending : each->pending()) {
        options.cache->Record(pending.rel, pending.st, pending.sha256);
      }
    }
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!statuses[i].ok()) {
      return statuses[i];  // earlier in path order than a failing root entry, if any
    }
  }
  if (!root_status.ok()) {
    return root_status;
  }
  Walk& merged = walker.walk();
  for (const std::unique_ptr<Walker>& sub : subs) {
    Walk& part = sub->walk();
    merged.total_bytes += part.total_bytes;
    merged.hashed_bytes += part.hashed_bytes;
    std::move(part.files.begin(), part.files.end(), std::back_inserter(merged.files));
    std::move(part.excluded.begin(), part.excluded.end(), std::back_inserter(merged.excluded));
  }
  return std::move(walker).Finish();
}

}  // namespace tae::snapshot
