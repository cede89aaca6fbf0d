#include "agent/cache/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/fs/fs.h"
#include "common/status/macros.h"
#include "spdlog/spdlog.h"

namespace tae::agent {
namespace {

namespace fs = std::filesystem;

constexpr mode_t kBlobMode = 0444;
constexpr mode_t kExecMode = 0555;

absl::Status Errno(const std::string& what) { return absl::ErrnoToStatus(errno, what); }

using Fd = ::tae::fs::Fd;

// Opens directories below a root directory one component at a time, each relative to the fd of the
// previous one and with O_NOFOLLOW, so a symlink anywhere below the root is refused rather than
// followed. Keeps the chain of the last directory's fds open: consecutive entries of a sorted
// manifest share their prefix, and at most (depth) fds are open at once.
class DirChain {
 public:
  explicit DirChain(Fd root) : root_(std::move(root)) {}

  // The fd of the directory `dirs` (its components, relative to the root). Missing directories
  // are created (0755) when `create`, otherwise NotFound. InvalidArgument naming `path` when a
  // component is a symlink or not a directory.
  absl::StatusOr<int> Open(const std::vector<std::string>& dirs, bool create,
                           const std::string& path) {
    size_t common = 0;
    while (common < chain_.size() && common < dirs.size() && chain_[common].first == dirs[common]) {
      ++common;
    }
    chain_.erase(chain_.begin() + static_cast<std::ptrdiff_t>(common), chain_.end());
    for (size_t i = common; i < dirs.size(); ++i) {
      const int parent = chain_.empty() ? root_.get() : chain_.back().second.get();
      const char* name = dirs[i].c_str();
      constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
      int fd = ::openat(parent, name, kFlags);
      if (fd < 0 && errno == ENOENT && create) {
        if (::mkdirat(parent, name, 0755) != 0 && errno != EEXIST) {
          return Errno(
              absl::StrCat("'", path, "': cannot create directory '", Prefix(dirs, i), "'"));
        }
        fd = ::openat(parent, name, kFlags);
      }
      if (fd < 0) {
        if (errno == ENOENT) {
          return absl::NotFoundError(
              absl::StrCat("'", path, "': no directory '", Prefix(dirs, i), "'"));
        }
        if (errno == ELOOP || errno == ENOTDIR) {
          return absl::InvalidArgumentError(
              absl::StrCat("'", path, "': '", Prefix(dirs, i),
                           "' is a symlink or not a directory; refusing to go through it"));
        }
        return Errno(absl::StrCat("'", path, "': cannot open directory '", Prefix(dirs, i), "'"));
      }
      chain_.emplace_back(dirs[i], Fd(fd));
    }
    return chain_.empty() ? root_.get() : chain_.back().second.get();
  }

 private:
  static std::string Prefix(const std::vector<std::string>& dirs, size_t last) {
    return absl::StrJoin(dirs.begin(), dirs.begin() + static_cast<std::ptrdiff_t>(last) + 1, "/");
  }

  Fd root_;
  std::vector<std::pair<std::string, Fd>> chain_;
};

// A relative path as its parent directories and its last component.
struct SplitPath {
  std::vector<std::string> dirs;
  std::string leaf;
};

SplitPath Split(const std::string& path) {
  SplitPath split;
  split.dirs = absl::StrSplit(path, '/');
  split.leaf = std::move(split.dirs.back());
  split.dirs.pop_back();
  return split;
}

absl::StatusOr<Fd> OpenRootDir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    return Errno(absl::StrCat("cannot open directory ", dir));
  }
  return fd;
}

absl::Status CopyContents(int in, int out, const std::string& what) {
  std::string buffer(1 << 20, '\0');
  while (true) {
    ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Errno(absl::StrCat("cannot read while copying ", what));
    }
    if (n == 0) {
      return absl::OkStatus();
    }
    ssize_t done = 0;
    while (done < n) {
      ssize_t w = ::write(out, buffer.data() + done, static_cast<size_t>(n - done));
      if (w < 0) {
        if (errno == EINTR) {
          continue;
        }
        return Errno(absl::StrCat("cannot write ", what));
      }
      done += w;
    }
  }
}

bool IsExecutable(const snapshot::Entry& entry) { return (entry.mode & 0111) != 0; }

bool SameInode(const struct stat& st, const std::string& path) {
  struct stat other {};
  return ::stat(path.c_str(), &other) == 0 && other.st_dev == st.st_dev &&
         other.st_ino == st.st_ino;
}

// Removes every entry of `dir` whose name satisfies `transient` (leftovers of an earlier process).
void RemoveTransient(const std::string& dir, bool (*transient)(const fs::path&)) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (transient(entry.path())) {
      fs::remove(entry.path(), ec);
    }
  }
}

}  // namespace

SnapshotCache::SnapshotCache(std::string dir, blobs::BlobStore blobs)
    : dir_(std::move(dir)), blobs_(std::move(blobs)) {}

absl::StatusOr<std::unique_ptr<SnapshotCache>> SnapshotCache::Open(const std::string& dir) {
  std::error_code ec;
  for (const char* sub : {"/manifests", "/exec/tmp"}) {
    fs::create_directories(dir + sub, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot create ", dir, sub, ": ", ec.message()));
    }
  }
  ::chmod(dir.c_str(), 0700);
  RemoveTransient(dir + "/exec/tmp", [](const fs::path&) { return true; });
  // A manifest write's temporary file (fs::WriteFileAtomically: NAME.tmp.XXXXXX).
  RemoveTransient(dir + "/manifests", [](const fs::path& p) {
    return p.filename().string().find(".tmp.") != std::string::npos;
  });
  ASSIGN_OR_RETURN(blobs::BlobStore blobs, blobs::BlobStore::Open(dir + "/blobs"));
  return std::unique_ptr<SnapshotCache>(new SnapshotCache(dir, std::move(blobs)));
}

std::string SnapshotCache::ManifestPath(const std::string& id) const {
  return absl::StrCat(dir_, "/manifests/", id);
}

std::string SnapshotCache::ExecPath(std::string_view hash) const {
  return absl::StrCat(dir_, "/exec/", std::string(hash.substr(0, 2)), "/",
                      std::string(hash.substr(2)));
}

bool SnapshotCache::HasManifest(const std::string& id) const {
  struct stat st {};
  return blobs::IsBlobHash(id) && ::stat(ManifestPath(id).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::Status SnapshotCache::PutManifest(const std::string& id, const std::string& text) {
  if (!blobs::IsBlobHash(id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot id '", id.substr(0, 80), "' is not 64 lowercase hex digits"));
  }
  absl::StatusOr<std::vector<snapshot::Entry>> entries = snapshot::ParseManifest(text);
  if (!entries.ok()) {
    return absl::DataLossError(
        absl::StrCat("manifest of snapshot ", id, ": ", entries.status().message()));
  }
  const std::string actual = snapshot::SnapshotId(*entries);
  if (actual != id) {
    return absl::DataLossError(
        absl::StrCat("manifest of snapshot ", id, " hashes to ", actual, "; not stored"));
  }
  // Whole or absent after a crash (fsynced before the rename); a half-written one is never read.
  return ::tae::fs::WriteFileAtomically(ManifestPath(id), text,
                                        {0600, ::tae::fs::Durability::kFile});
}

absl::StatusOr<std::vector<snapshot::Entry>> SnapshotCache::GetManifest(
    const std::string& id) const {
  if (!HasManifest(id)) {
    return absl::NotFoundError(absl::StrCat("snapshot ", id.substr(0, 80), " is not cached"));
  }
  ASSIGN_OR_RETURN(std::string text, ::tae::fs::ReadFile(ManifestPath(id)));
  absl::StatusOr<std::vector<snapshot::Entry>> entries = snapshot::ParseManifest(text);
  if (!entries.ok()) {
    return absl::DataLossError(
        absl::StrCat("cached manifest of snapshot ", id, ": ", entries.status().message()));
  }
  return entries;
}

std::vector<std::string> SnapshotCache::ManifestIds() const {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_ + "/manifests", ec)) {
    std::string name = entry.path().filename();
    if (blobs::IsBlobHash(name)) {
      ids.push_back(std::move(name));
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<std::string> SnapshotCache::MissingBlobs(
    const std::vector<snapshot::Entry>& entries) const {
  std::vector<std::string> hashes;
  hashes.reserve(entries.size());
  for (const snapshot::Entry& entry : entries) {
    hashes.push_back(entry.sha256);
  }
  return blobs_.Missing(hashes);
}

absl::StatusOr<blobs::ChunkResult> SnapshotCache::WriteChunk(std::string_view hash, uint64_t offset,
                                                             uint64_t total,
                                                             std::string_view data) {
  ASSIGN_OR_RETURN(blobs::ChunkResult result, blobs_.WriteChunk(hash, offset, total, data));
  if (result.complete && ::chmod(blobs_.PathOf(hash).c_str(), kBlobMode) != 0) {
    return Errno(absl::StrCat("cannot chmod ", blobs_.PathOf(hash)));
  }
  return result;
}

absl::StatusOr<std::string> SnapshotCache::SourceFor(const snapshot::Entry& entry, bool exec) {
  if (!blobs_.Has(entry.sha256)) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", entry.path, "': blob ", entry.sha256, " is not cached"));
  }
  const std::string blob = blobs_.PathOf(entry.sha256);
  struct stat st {};
  if (::stat(blob.c_str(), &st) != 0) {
    return Errno(absl::StrCat("'", entry.path, "': cannot stat ", blob));
  }
  if (static_cast<uint64_t>(st.st_size) != entry.size) {
    // Someone wrote through a hard link to it. Discard it so that it is fetched again; run
    // directories that link the damaged inode keep it.
    spdlog::warn("cache: blob {} has {} bytes, its manifest says {}; discarding it", entry.sha256,
                 st.st_size, entry.size);
    RETURN_IF_ERROR(blobs_.Remove(entry.sha256));
    ::unlink(ExecPath(entry.sha256).c_str());
    return absl::DataLossError(absl::StrCat("'", entry.path, "': cached blob ", entry.sha256,
                                            " had ", st.st_size, " bytes instead of ", entry.size,
                                            " (modified through a hard link?); discarded, fetch it "
                                            "again"));
  }
  if ((st.st_mode & 07777) != kBlobMode && ::chmod(blob.c_str(), kBlobMode) != 0) {
    return Errno(absl::StrCat("cannot chmod ", blob));
  }
  if (!exec) {
    return blob;
  }
  return EnsureExecCopy(entry.sha256, entry.size);
}

absl::StatusOr<std::string> SnapshotCache::EnsureExecCopy(const std::string& hash, uint64_t size) {
  const std::string path = ExecPath(hash);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) == size) {
    if ((st.st_mode & 07777) != kExecMode && ::chmod(path.c_str(), kExecMode) != 0) {
      return Errno(absl::StrCat("cannot chmod ", path));
    }
    return path;
  }
  // Missing, or damaged like a blob can be: rebuild it from the (size-checked) blob.
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create directory for ", path, ": ", ec.message()));
  }
  const std::string blob = blobs_.PathOf(hash);
  const std::string tmp = absl::StrCat(dir_, "/exec/tmp/", hash);
  Fd in(::open(blob.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) {
    return Errno(absl::StrCat("cannot read ", blob));
  }
  ::unlink(tmp.c_str());
  Fd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out.valid()) {
    return Errno(absl::StrCat("cannot create ", tmp));
  }
  absl::Status status = CopyContents(in.get(), out.get(), tmp);
  if (status.ok() && (::fchmod(out.get(), kExecMode) != 0 || ::fsync(out.get()) != 0 ||
                      ::rename(tmp.c_str(), path.c_str()) != 0)) {
    status = Errno(absl::StrCat("cannot store ", path));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return path;
}

absl::StatusOr<MaterialiseStats> SnapshotCache::Materialise(
    const std::vector<snapshot::Entry>& entries, const std::string& dest_dir) {
  // Everything that can be checked up front is, so that these errors leave dest_dir untouched.
  for (const snapshot::Entry& entry : entries) {
    RETURN_IF_ERROR(snapshot::CheckRelativePath(entry.path));
    if (!blobs::IsBlobHash(entry.sha256)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", entry.path, "': sha256 is not 64 lowercase hex digits"));
    }
  }
  std::map<std::pair<std::string, bool>, std::string> sources;  // (hash, exec) -> cached file
  for (const snapshot::Entry& entry : entries) {
    auto key = std::make_pair(entry.sha256, IsExecutable(entry));
    if (sources.count(key) == 0) {
      ASSIGN_OR_RETURN(sources[key], SourceFor(entry, key.second));
    }
  }

  ASSIGN_OR_RETURN(Fd root, OpenRootDir(dest_dir));
  DirChain chain(std::move(root));
  MaterialiseStats stats;
  for (const snapshot::Entry& entry : entries) {
    const bool exec = IsExecutable(entry);
    const std::string& source = sources.at({entry.sha256, exec});
    SplitPath split = Split(entry.path);
    ASSIGN_OR_RETURN(int parent, chain.Open(split.dirs, /*create=*/true, entry.path));
    // linkat does not follow a symlink at the destination: an existing one is EEXIST.
    if (!force_copy_ && ::linkat(AT_FDCWD, source.c_str(), parent, split.leaf.c_str(), 0) == 0) {
      ++stats.linked;
      continue;
    }
    const int error = force_copy_ ? EXDEV : errno;
    if (error == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat("'", entry.path, "' already exists"));
    }
    if (error != EXDEV && error != EMLINK) {
      return absl::ErrnoToStatus(error, absl::StrCat("cannot link '", entry.path, "'"));
    }
    Fd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in.valid()) {
      return Errno(absl::StrCat("cannot read ", source));
    }
    // O_EXCL: never opens an existing file or symlink.
    Fd out(::openat(parent, split.leaf.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out.valid()) {
      if (errno == EEXIST) {
        return absl::AlreadyExistsError(absl::StrCat("'", entry.path, "' already exists"));
      }
      return Errno(absl::StrCat("cannot create '", entry.path, "'"));
    }
    absl::Status status = CopyContents(in.get(), out.get(), entry.path);
    if (status.ok() && ::fchmod(out.get(), exec ? kExecMode : kBlobMode) != 0) {
      status = Errno(absl::StrCat("cannot chmod '", entry.path, "'"));
    }
    if (!status.ok()) {
      ::unlinkat(parent, split.leaf.c_str(), 0);
      return status;
    }
    ++stats.copied;
  }
  return stats;
}

absl::StatusOr<RemoveStats> SnapshotCache::RemoveMaterialised(
    const std::vector<snapshot::Entry>& entries, const std::string& dir) {
  for (const snapshot::Entry& entry : entries) {
    RETURN_IF_ERROR(snapshot::CheckRelativePath(entry.path));
  }
  ASSIGN_OR_RETURN(Fd root, OpenRootDir(dir));
  DirChain chain(std::move(root));
  RemoveStats stats;
  std::set<std::string> dirs;
  for (const snapshot::Entry& entry : entries) {
    SplitPath split = Split(entry.path);
    for (size_t i = 1; i <= split.dirs.size(); ++i) {
      dirs.insert(absl::StrJoin(split.dirs.begin(),
                                split.dirs.begin() + static_cast<std::ptrdiff_t>(i), "/"));
    }
    absl::StatusOr<int> parent = chain.Open(split.dirs, /*create=*/false, entry.path);
    if (absl::IsNotFound(parent.status())) {
      continue;  // already gone
    }
    if (absl::IsInvalidArgument(parent.status())) {
      ++stats.files_kept;  // a parent was replaced by a symlink or file: not ours to follow
      continue;
    }
    RETURN_IF_ERROR(parent.status());
    struct stat st {};
    if (::fstatat(*parent, split.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) {
        continue;
      }
      return Errno(absl::StrCat("cannot stat '", entry.path, "' in ", dir));
    }
    if (!S_ISREG(st.st_mode)) {
      ++stats.files_kept;
      continue;
    }
    bool ours = blobs::IsBlobHash(entry.sha256) && (SameInode(st, blobs_.PathOf(entry.sha256)) ||
                                                    SameInode(st, ExecPath(entry.sha256)));
    if (!ours && static_cast<uint64_t>(st.st_size) == entry.size) {
      // A copy (or a link to a blob since discarded): ours if the content is unchanged. Hash
      // through the fd just opened without following symlinks.
      Fd fd(::openat(*parent, split.leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (fd.valid()) {
        absl::StatusOr<std::string> hash =
            snapshot::Sha256OfFile(absl::StrCat("/proc/self/fd/", fd.get()));
        ours = hash.ok() && *hash == entry.sha256;
      }
    }
    if (!ours) {
      ++stats.files_kept;
      continue;
    }
    if (::unlinkat(*parent, split.leaf.c_str(), 0) != 0) {
      return Errno(absl::StrCat("cannot remove '", entry.path, "' in ", dir));
    }
    ++stats.files_removed;
  }

  // Deepest first, so that a directory emptied by removing its subdirectories goes too.
  std::vector<std::string> ordered(dirs.begin(), dirs.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') > std::count(b.begin(), b.end(), '/');
  });
  for (const std::string& rel : ordered) {
    SplitPath split = Split(rel);
    absl::StatusOr<int> parent = chain.Open(split.dirs, /*create=*/false, rel);
    // Not empty, gone or not a directory: keep whatever is there.
    if (parent.ok() && ::unlinkat(*parent, split.leaf.c_str(), AT_REMOVEDIR) == 0) {
      ++stats.dirs_removed;
    }
  }
  return stats;
}

std::vector<std::pair<std::string, uint64_t>> SnapshotCache::ExecCopies() const {
  std::vector<std::pair<std::string, uint64_t>> copies;
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(dir_ + "/exec", ec)) {
    const std::string prefix = sub.path().filename();
    if (prefix.size() != 2 || !sub.is_directory(ec)) {  // not tmp/
      continue;
    }
    for (const auto& file : fs::directory_iterator(sub.path(), ec)) {
      std::string hash = prefix + file.path().filename().string();
      struct stat st {};
      if (blobs::IsBlobHash(hash) && ::lstat(file.path().c_str(), &st) == 0) {
        copies.emplace_back(std::move(hash), static_cast<uint64_t>(st.st_size));
      }
    }
  }
  return copies;
}

absl::StatusOr<ScrapResult> SnapshotCache::Scrap(const std::vector<std::string>& ids, bool all,
                                                 const std::set<std::string>& keep) {
  for (const std::string& id : ids) {
    if (!blobs::IsBlobHash(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot id '", id.substr(0, 80), "' is not 64 lowercase hex digits"));
    }
  }
  ScrapResult result;
  for (const std::string& id : all ? ManifestIds() : ids) {
    if (::unlink(ManifestPath(id).c_str()) == 0) {
      ++result.manifests_removed;
    } else if (errno != ENOENT) {
      return Errno(absl::StrCat("cannot remove ", ManifestPath(id)));
    }
  }

  std::set<std::string> referenced = keep;
  for (const std::string& id : ManifestIds()) {
    absl::StatusOr<std::vector<snapshot::Entry>> entries = GetManifest(id);
    if (!entries.ok()) {
      spdlog::warn("cache: removing unreadable manifest: {}", entries.status().ToString());
      if (::unlink(ManifestPath(id).c_str()) == 0) {
        ++result.manifests_removed;
      }
      continue;
    }
    for (const snapshot::Entry& entry : *entries) {
      referenced.insert(entry.sha256);
    }
  }

  ASSIGN_OR_RETURN(std::vector<std::string> stored, blobs_.List());
  for (const std::string& hash : stored) {
    if (referenced.count(hash) != 0) {
      continue;
    }
    absl::StatusOr<uint64_t> size = blobs_.Size(hash);
    RETURN_IF_ERROR(blobs_.Remove(hash));
    ++result.blobs_removed;
    result.bytes_freed += size.value_or(0);
  }
  for (const auto& [hash, size] : ExecCopies()) {
    if (referenced.count(hash) != 0) {
      continue;
    }
    const std::string path = ExecPath(hash);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Errno(absl::StrCat("cannot remove ", path));
    }
    ++result.exec_copies_removed;
    result.bytes_freed += size;
  }
  return result;
}

uint64_t SnapshotCache::BlobBytes() const {
  uint64_t bytes = 0;
  absl::StatusOr<std::vector<std::string>> stored = blobs_.List();
  if (stored.ok()) {
    for (const std::string& hash : *stored) {
      bytes += blobs_.Size(hash).value_or(0);
    }
  }
  for (const auto& copy : ExecCopies()) {
    bytes += copy.second;
  }
  return bytes;
}

}  // namespace tae::agent
