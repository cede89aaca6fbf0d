#include "common/snapshot/fill.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tae::snapshot {
namespace {

namespace stdfs = std::filesystem;

constexpr char kTempName[] = ".tae-fill.tmp";

absl::Status Errno(int err, const std::string& what) {
  return absl::Status(
      err == ENOSPC ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal,
      absl::StrCat(what, ": ", strerror(err)));
}

// Makes every directory of `rel`'s parent exist below `dest` as a real directory: a symlink or
// file in the way is removed (the directory is the caller's own).
absl::Status MakeParents(const std::string& dest, const std::string& rel) {
  std::string path = dest;
  std::vector<std::string> parts = absl::StrSplit(rel, '/');
  parts.pop_back();
  for (const std::string& part : parts) {
    path += "/" + part;
    struct stat st;
    if (lstat(path.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) {
        continue;
      }
      if (unlink(path.c_str()) != 0) {
        return Errno(errno, absl::StrCat("remove ", path));
      }
    } else if (errno != ENOENT) {
      return Errno(errno, absl::StrCat("stat ", path));
    }
    if (mkdir(path.c_str(), 0755) != 0) {
      return Errno(errno, absl::StrCat("mkdir ", path));
    }
  }
  return absl::OkStatus();
}

}  // namespace

TreeFill::TreeFill(std::vector<Entry> entries, std::string dest)
    : entries_(std::move(entries)), dest_(std::move(dest)) {}

TreeFill::~TreeFill() { Discard(); }

absl::StatusOr<std::unique_ptr<TreeFill>> TreeFill::Start(std::vector<Entry> entries,
                                                          std::string dest, FillOptions options) {
  for (const Entry& entry : entries) {
    if (absl::Status ok = CheckRelativePath(entry.path); !ok.ok()) {
      return ok;
    }
  }
  std::unique_ptr<TreeFill> fill(new TreeFill(std::move(entries), std::move(dest)));
  if (absl::Status prepared = fill->Prepare(options); !prepared.ok()) {
    return prepared;
  }
  return fill;
}

absl::Status TreeFill::Prepare(const FillOptions& options) {
  std::error_code ec;
  stdfs::create_directories(dest_, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", dest_, ": ", ec.message()));
  }
  unlink((dest_ + "/" + kTempName).c_str());
  if (options.remove_others) {
    std::set<std::string> files;
    std::set<std::string> dirs;
    for (const Entry& entry : entries_) {
      files.insert(entry.path);
      for (size_t slash = entry.path.find('/'); slash != std::string::npos;
           slash = entry.path.find('/', slash + 1)) {
        dirs.insert(entry.path.substr(0, slash));
      }
    }
    std::vector<stdfs::path> doomed;
    for (auto it = stdfs::recursive_directory_iterator(dest_, ec);
         !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string rel = stdfs::relative(it->path(), dest_, ec).generic_string();
      const bool dir = it->symlink_status(ec).type() == stdfs::file_type::directory;
      if (dir ? dirs.count(rel) > 0 : files.count(rel) > 0) {
        continue;
      }
      doomed.push_back(it->path());
      if (dir) {
        it.disable_recursion_pending();
      }
    }
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot list ", dest_, ": ", ec.message()));
    }
    for (const stdfs::path& path : doomed) {
      stdfs::remove_all(path, ec);
      if (ec) {
        return absl::InternalError(
            absl::StrCat("cannot remove ", path.string(), ": ", ec.message()));
      }
      stats_.removed += 1;
    }
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& entry = entries_[i];
    stats_.files += 1;
    stats_.bytes += entry.size;
    if (absl::Status made = MakeParents(dest_, entry.path); !made.ok()) {
      return made;
    }
    const std::string path = dest_ + "/" + entry.path;
    struct stat st;
    if (lstat(path.c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == entry.size) {
        absl::StatusOr<std::string> sha = Sha256OfFile(path);
        if (sha.ok() && *sha == entry.sha256) {
          if ((st.st_mode & 0777) != entry.mode && chmod(path.c_str(), entry.mode) != 0) {
            return Errno(errno, absl::StrCat("chmod ", path));
          }
          stats_.files_kept += 1;
          continue;
        }
      } else if (S_ISDIR(st.st_mode)) {
        stdfs::remove_all(path, ec);
        if (ec) {
          return absl::InternalError(absl::StrCat("cannot remove ", path, ": ", ec.message()));
        }
      }
    }
    auto [it, fresh] = wanted_.try_emplace(entry.sha256);
    if (fresh) {
      missing_.push_back(entry.sha256);
    }
    it->second.push_back(i);
  }
  return absl::OkStatus();
}

absl::Status TreeFill::Write(std::string_view hash, uint64_t offset, uint64_t total,
                             std::string_view data) {
  const std::string name(hash.substr(0, 64));  // for messages
  auto it = wanted_.find(hash);
  if (it == wanted_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob ", absl::CHexEscape(name), " is not one to fetch"));
  }
  const Entry& first = entries_[it->second.front()];
  if (total != first.size) {
    return absl::InvalidArgumentError(absl::StrCat("blob ", name, " of \"", first.path,
                                                   "\": ", total, " bytes, the manifest says ",
                                                   first.size));
  }
  if (current_ != hash) {
    if (fd_ >= 0 || offset != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("blob ", name, ": chunk at ", offset, " while blob ",
                       current_.empty() ? std::string("(none)") : current_, " is unfinished"));
    }
    const std::string temp = dest_ + "/" + kTempName;
    fd_ = open(temp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      return Errno(errno, absl::StrCat("create ", temp));
    }
    current_ = std::string(hash);
    written_ = 0;
    sha_.FinishHex();  // start over
  }
  if (offset != written_ || offset + data.size() > total) {
    return absl::InvalidArgumentError(absl::StrCat("blob ", name, ": chunk at ", offset, " (",
                                                   data.size(), " bytes) where ", written_, " of ",
                                                   total, " arrived"));
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Errno(errno, absl::StrCat("write \"", first.path, "\""));
    }
    done += static_cast<size_t>(n);
  }
  sha_.Update(data);
  written_ += data.size();
  if (written_ == total) {
    return Place(std::string(hash));
  }
  return absl::OkStatus();
}

absl::Status TreeFill::Place(const std::string& hash) {
  const std::string temp = dest_ + "/" + kTempName;
  const std::string digest = sha_.FinishHex();
  auto it = wanted_.find(hash);
  const std::vector<size_t> targets = it->second;
  const Entry& first = entries_[targets.front()];
  if (fchmod(fd_, first.mode) != 0 || close(fd_) != 0) {
    fd_ = -1;
    return Errno(errno, absl::StrCat("finish \"", first.path, "\""));
  }
  fd_ = -1;
  current_.clear();
  if (digest != hash) {
    unlink(temp.c_str());
    return absl::DataLossError(
        absl::StrCat("\"", first.path, "\": the bytes received hash to ", digest, ", not ", hash));
  }
  const std::string first_path = dest_ + "/" + first.path;
  if (rename(temp.c_str(), first_path.c_str()) != 0) {
    return Errno(errno, absl::StrCat("rename to ", first_path));
  }
  for (size_t k = 1; k < targets.size(); ++k) {
    const Entry& entry = entries_[targets[k]];
    const std::string path = dest_ + "/" + entry.path;
    unlink(path.c_str());  // never write through a symlink left there
    std::error_code ec;
    stdfs::copy_file(first_path, path, ec);
    if (ec || chmod(path.c_str(), entry.mode) != 0) {
      return absl::InternalError(absl::StrCat("copy to ", path, ": ", ec.message()));
    }
  }
  wanted_.erase(it);
  stats_.blobs_written += 1;
  stats_.bytes_written += written_;
  return absl::OkStatus();
}

void TreeFill::Discard() {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
    unlink((dest_ + "/" + kTempName).c_str());
  }
  current_.clear();
}

absl::Status TreeFill::Finish() {
  Discard();
  if (!wanted_.empty()) {
    const Entry& entry = entries_[wanted_.begin()->second.front()];
    return absl::DataLossError(
        absl::StrCat(wanted_.size(), " files never arrived (the first is \"", entry.path, "\")"));
  }
  return absl::OkStatus();
}

}  // namespace tae::snapshot
