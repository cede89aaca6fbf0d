#include "common/blobs/blob_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <set>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/snapshot/snapshot.h"
#include "common/status/macros.h"

namespace tae::blobs {
namespace {

constexpr size_t kHashLength = 64;

absl::Status Errno(const std::string& what) { return absl::ErrnoToStatus(errno, what); }

// Adds [begin, end) to the disjoint `ranges` (begin -> end), merging the ones it touches: O(log n)
// plus the ranges it swallows, so a flood of small chunks costs each its own size, not a re-sort.
void AddRange(std::map<uint64_t, uint64_t>* ranges, uint64_t begin, uint64_t end) {
  auto it = ranges->upper_bound(begin);
  if (it != ranges->begin() && std::prev(it)->second >= begin) {
    --it;  // the range before reaches this one
    begin = it->first;
    end = std::max(end, it->second);
    it = ranges->erase(it);
  }
  while (it != ranges->end() && it->first <= end) {
    end = std::max(end, it->second);
    it = ranges->erase(it);
  }
  ranges->emplace_hint(it, begin, end);
}

}  // namespace

bool IsBlobHash(std::string_view hash) {
  return hash.size() == kHashLength && std::all_of(hash.begin(), hash.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

absl::StatusOr<BlobStore> BlobStore::Open(const std::string& root) {
  std::error_code ec;
  std::filesystem::create_directories(root + "/tmp", ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", root, "/tmp: ", ec.message()));
  }
  ::chmod(root.c_str(), 0700);
  // Partial uploads of an earlier process cannot be resumed: their received ranges are gone.
  for (const auto& entry : std::filesystem::directory_iterator(root + "/tmp", ec)) {
    std::filesystem::remove(entry.path(), ec);
  }
  return BlobStore(root);
}

std::string BlobStore::PathOf(std::string_view hash) const {
  return absl::StrCat(root_, "/", std::string(hash.substr(0, 2)), "/", std::string(hash.substr(2)));
}

void BlobStore::DropPartial(std::string_view hash, std::string_view uploader) {
  const std::string key = PartialKey(hash, uploader);
  auto it = partial_.find(key);
  if (it == partial_.end()) {
    return;
  }
  partial_.erase(it);
  // A part file already gone is what we want; any other failure leaves a file the next start
  // removes with the other stale parts.
  unlink(PartPath(key).c_str());
}

std::string BlobStore::PartialKey(std::string_view hash, std::string_view uploader) {
  if (uploader.empty()) {
    return std::string(hash);
  }
  return absl::StrCat(std::string(hash), ".", snapshot::Sha256Hex(uploader).substr(0, 16));
}

std::string BlobStore::PartPath(std::string_view key) const {
  return absl::StrCat(root_, "/tmp/", std::string(key), ".part");
}

absl::Status BlobStore::EnableIndex() {
  ASSIGN_OR_RETURN(std::vector<std::string> all, List());
  index_ = std::make_unique<std::unordered_set<std::string>>(all.begin(), all.end());
  return absl::OkStatus();
}

bool BlobStore::Has(std::string_view hash) const {
  if (index_ != nullptr) {
    return index_->count(std::string(hash)) > 0;
  }
  struct stat st {};
  return IsBlobHash(hash) && ::stat(PathOf(hash).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> BlobStore::Missing(const std::vector<std::string>& hashes) const {
  std::vector<std::string> missing;
  std::unordered_set<std::string_view> seen;
  for (const std::string& hash : hashes) {
    if (seen.insert(hash).second && !Has(hash)) {
      missing.push_back(hash);
    }
  }
  return missing;
}

absl::StatusOr<ChunkResult> BlobStore::WriteChunk(std::string_view hash, uint64_t offset,
                                                  uint64_t total_size, std::string_view data,
                                                  std::string_view uploader) {
  if (!IsBlobHash(hash)) {
    return absl::InvalidArgumentError(absl::StrCat("sha256: '", std::string(hash.substr(0, 80)),
                                                   "' is not 64 lowercase hex digits"));
  }
  if (offset > total_size || data.size() > total_size - offset) {
    return absl::InvalidArgumentError(absl::StrCat("chunk of ", std::string(hash), ": bytes ",
                                                   offset, "..", offset + data.size(),
                                                   " past its size ", total_size));
  }
  if (!answer_as_missing_ && Has(hash)) {
    return ChunkResult{true, 0};
  }
  const std::string key = PartialKey(hash, uploader);
  if (offset == 0 && data.size() == total_size && partial_.count(key) == 0) {
    return WriteWhole(hash, key, data);
  }
  auto [it, inserted] = partial_.try_emplace(key);
  Partial& partial = it->second;
  if (inserted) {
    partial.total = total_size;
  } else if (partial.total != total_size) {
    return absl::InvalidArgumentError(absl::StrCat("chunk of ", std::string(hash), ": size ",
                                                   total_size, " differs from the earlier ",
                                                   partial.total));
  }
  const std::string part = PartPath(key);
  int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Errno(absl::StrCat("cannot write ", part));
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n =
        ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      absl::Status status = Errno(absl::StrCat("cannot write ", part));
      ::close(fd);
      return status;
    }
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd, static_cast<off_t>(total_size)) != 0) {
    absl::Status status = Errno(absl::StrCat("cannot write ", part));
    ::close(fd);
    return status;
  }
  ::close(fd);
  if (!data.empty()) {
    AddRange(&partial.ranges, offset, offset + data.size());
  }
  const bool covered =
      total_size == 0 || (partial.ranges.size() == 1 && partial.ranges.begin()->first == 0 &&
                          partial.ranges.begin()->second == total_size);
  if (!covered) {
    return ChunkResult{false, data.size()};
  }
  partial_.erase(it);
  absl::StatusOr<std::string> actual = snapshot::Sha256OfFile(part);
  if (!actual.ok()) {
    return actual.status();
  }
  if (*actual != hash) {
    ::unlink(part.c_str());
    return absl::DataLossError(absl::StrCat("blob ", std::string(hash), ": its ", total_size,
                                            " bytes hash to ", *actual, "; discarded"));
  }
  RETURN_IF_ERROR(Publish(hash, part));
  return ChunkResult{true, data.size()};
}

absl::StatusOr<BlobStore::Removed> BlobStore::RemoveAllBut(const std::set<std::string>& keep) {
  ASSIGN_OR_RETURN(std::vector<std::string> all, List());
  Removed removed;
  for (const std::string& hash : all) {
    if (keep.count(hash) > 0) {
      continue;
    }
    const uint64_t size = Size(hash).value_or(0);
    RETURN_IF_ERROR(Remove(hash));
    removed.blobs += 1;
    removed.bytes += size;
  }
  return removed;
}

absl::StatusOr<ChunkResult> BlobStore::WriteWhole(std::string_view hash, std::string_view key,
                                                  std::string_view data) {
  // The common case, a blob in one chunk: verified in memory before anything is written.
  const std::string actual = snapshot::Sha256Hex(data);
  if (actual != hash) {
    return absl::DataLossError(absl::StrCat("blob ", std::string(hash), ": its ", data.size(),
                                            " bytes hash to ", actual, "; discarded"));
  }
  const std::string part = PartPath(key);
  int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Errno(absl::StrCat("cannot write ", part));
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      absl::Status status = Errno(absl::StrCat("cannot write ", part));
      ::close(fd);
      ::unlink(part.c_str());
      return status;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    absl::Status status = Errno(absl::StrCat("cannot write ", part));
    ::unlink(part.c_str());
    return status;
  }
  RETURN_IF_ERROR(Publish(hash, part));
  return ChunkResult{true, data.size()};
}

absl::Status BlobStore::Publish(std::string_view hash, const std::string& part) {
  if (fsync_each_) {
    // Durable before it becomes visible: a blob that exists is whole.
    int sync_fd = ::open(part.c_str(), O_RDONLY | O_CLOEXEC);
    if (sync_fd < 0 || ::fsync(sync_fd) != 0) {
      absl::Status status = Errno(absl::StrCat("cannot sync ", part));
      if (sync_fd >= 0) {
        ::close(sync_fd);
      }
      return status;
    }
    ::close(sync_fd);
  }
  const std::string final_path = PathOf(hash);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(final_path).parent_path(), ec);
  if (::chmod(part.c_str(), 0400) != 0 || ::rename(part.c_str(), final_path.c_str()) != 0) {
    absl::Status status = Errno(absl::StrCat("cannot store ", final_path));
    ::unlink(part.c_str());
    return status;
  }
  if (index_ != nullptr) {
    index_->insert(std::string(hash));
  }
  if (!fsync_each_) {
    unsynced_.push_back(final_path);
  }
  return absl::OkStatus();
}

absl::Status BlobStore::Sync() {
  std::vector<std::string> files = std::move(unsynced_);
  unsynced_.clear();
  if (files.empty()) {
    return absl::OkStatus();
  }
  if (files.size() <= kFsyncEachUpTo) {
    // A few blobs: fsync each and its directory, cheaper than flushing the whole file system
    // (syncfs also writes out every other program's dirty data).
    std::set<std::string> dirs;
    for (const std::string& path : files) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::fsync(fd) != 0) {
        absl::Status status = Errno(absl::StrCat("cannot sync ", path));
        if (fd >= 0) {
          ::close(fd);
        }
        return status;
      }
      ::close(fd);
      dirs.insert(path.substr(0, path.rfind('/')));
    }
    for (const std::string& dir : dirs) {
      int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
      }
    }
    return absl::OkStatus();
  }
  int fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return Errno(absl::StrCat("cannot open ", root_));
  }
  const bool ok = ::syncfs(fd) == 0;
  absl::Status status = ok ? absl::OkStatus() : Errno(absl::StrCat("cannot sync ", root_));
  ::close(fd);
  return status;
}

absl::StatusOr<std::string> BlobStore::Read(std::string_view hash, uint64_t offset,
                                            uint64_t length) const {
  if (!Has(hash)) {
    return absl::NotFoundError(absl::StrCat("no blob ", std::string(hash.substr(0, 80))));
  }
  const std::string path = PathOf(hash);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Errno(absl::StrCat("cannot read ", path));
  }
  std::string out(length, '\0');
  size_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, out.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      absl::Status status = Errno(absl::StrCat("cannot read ", path));
      ::close(fd);
      return status;
    }
    if (n == 0) {
      break;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

absl::StatusOr<uint64_t> BlobStore::Size(std::string_view hash) const {
  struct stat st {};
  if (!IsBlobHash(hash) || ::stat(PathOf(hash).c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("no blob ", std::string(hash.substr(0, 80))));
  }
  return static_cast<uint64_t>(st.st_size);
}

absl::Status BlobStore::Remove(std::string_view hash) {
  if (!IsBlobHash(hash)) {
    return absl::InvalidArgumentError("not a blob hash");
  }
  if (::unlink(PathOf(hash).c_str()) != 0 && errno != ENOENT) {
    return Errno(absl::StrCat("cannot remove ", PathOf(hash)));
  }
  if (index_ != nullptr) {
    index_->erase(std::string(hash));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> BlobStore::List() const {
  std::vector<std::string> hashes;
  std::error_code ec;
  for (const auto& dir : std::filesystem::directory_iterator(root_, ec)) {
    const std::string prefix = dir.path().filename();
    if (!dir.is_directory() || prefix.size() != 2) {  // not tmp/
      continue;
    }
    for (const auto& file : std::filesystem::directory_iterator(dir.path(), ec)) {
      std::string hash = prefix + file.path().filename().string();
      if (IsBlobHash(hash)) {
        hashes.push_back(std::move(hash));
      }
    }
  }
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot list ", root_, ": ", ec.message()));
  }
  std::sort(hashes.begin(), hashes.end());
  return hashes;
}

}  // namespace tae::blobs
