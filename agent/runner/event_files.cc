#include "agent/runner/event_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/fs/fs.h"
#include "common/metrics/metric_line.h"
#include "common/status/macros.h"

namespace tae::agent {
namespace {

// At most this much of a file is read per poll (the rest the next time): room for the largest
// record the reader takes, with its framing, so a big record cannot stall its file.
constexpr uint64_t kMaxReadBytes = tensorboard::kMaxRecordBytes + 16;

// Bytes [from, from + length) of `path` (fewer at its end); empty when it cannot be read.
std::string ReadRange(const std::string& path, uint64_t from, uint64_t length) {
  std::string out;
  // Never blocks: O_NONBLOCK so that opening a FIFO named *tfevents* returns at once, and only a
  // regular file (checked on the descriptor, not the name) is read.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    return out;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return out;
  }
  out.resize(length);
  size_t got = 0;
  while (got < length) {
    ssize_t n = ::pread(fd, out.data() + got, length - got, static_cast<off_t>(from + got));
    if (n <= 0) {
      break;
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

uint64_t SizeOf(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size)
                                                                : 0;
}

}  // namespace

std::string MetricNameOfTag(const std::string& tag) {
  if (metrics::IsValidMetricKey(tag)) {
    return tag;
  }
  std::string name = tag.substr(0, metrics::kMaxKeyLength);
  for (char& c : name) {
    if (c <= ' ' || c > '~') {
      c = '_';
    }
  }
  return name.empty() ? "_" : name;
}

EventFileFollower::EventFileFollower(std::string root, std::string registry)
    : root_(std::move(root)), registry_(std::move(registry)) {}

absl::Status EventFileFollower::Resume(const std::map<int, uint64_t>& offsets) {
  absl::StatusOr<std::string> text = fs::ReadFile(registry_);
  if (!text.ok()) {
    return absl::OkStatus();  // none found before
  }
  std::vector<std::string> lines = absl::StrSplit(*text, '\n');
  // The text after the last newline is empty, or an append a crash tore: no point of that file
  // was reported (the append is synced first), so it is found again as new. The registry is
  // written again without it, so that the next append starts a line.
  const bool torn = !lines.empty() && !lines.back().empty();
  lines.pop_back();
  if (lines.size() > kMaxEventFiles) {
    lines.resize(kMaxEventFiles);
  }
  if (torn) {
    RETURN_IF_ERROR(fs::WriteFileAtomically(
        registry_, lines.empty() ? std::string() : absl::StrJoin(lines, "\n") + "\n",
        {0644, fs::Durability::kFileAndDir}));
  }
  for (std::string& line : lines) {
    File file;
    file.path = std::move(line);
    auto it = offsets.find(kFirstEventFileStream + static_cast<int>(files_.size()));
    file.offset = it == offsets.end() ? 0 : it->second;
    // Which tags name which plugin: TF2 says so only with a tag's first value. Read again up to
    // where it was, a piece of at most kMaxReadBytes at a time: bounded memory whatever the size.
    for (uint64_t at = 0; at < file.offset;) {
      const std::string part =
          ReadRange(root_ + "/" + file.path, at, std::min(file.offset - at, kMaxReadBytes));
      const uint64_t consumed =
          part.empty() ? 0 : tensorboard::ReadEventRecords(part, at, &file.plugins).consumed;
      if (consumed == 0) {
        break;
      }
      at += consumed;
    }
    known_.insert(file.path);
    files_.push_back(std::move(file));
  }
  return absl::OkStatus();
}

absl::Status EventFileFollower::Register(const std::vector<std::string>& paths) {
  std::string lines;
  for (const std::string& path : paths) {
    absl::StrAppend(&lines, path, "\n");
  }
  // Appended and synced once for all of them, before any point of theirs is journaled with its
  // number. A failed append may have left part of a line: the registry is then written whole.
  if (rewrite_) {
    std::string all;
    for (const File& file : files_) {
      absl::StrAppend(&all, file.path, "\n");
    }
    RETURN_IF_ERROR(
        fs::WriteFileAtomically(registry_, all + lines, {0644, fs::Durability::kFileAndDir}));
    rewrite_ = false;
  } else {
    absl::Status written = fs::AppendDurably(registry_, lines, 0644);
    if (!written.ok()) {
      rewrite_ = true;
      return written;
    }
  }
  for (const std::string& path : paths) {
    File file;
    file.path = path;
    known_.insert(path);
    files_.push_back(std::move(file));
  }
  return absl::OkStatus();
}

std::vector<std::string> EventFileFollower::Walk(int budget) {
  std::vector<std::string> found;
  std::error_code ec;
  if (!walk_.has_value()) {
    walk_.emplace(root_, std::filesystem::directory_options::skip_permission_denied, ec);
    if (ec) {
      walk_.reset();  // no directory yet
      return found;
    }
  }
  std::filesystem::recursive_directory_iterator& it = *walk_;
  last_walk_entries_ = 0;
  for (; last_walk_entries_ < budget && it != std::filesystem::recursive_directory_iterator();
       ++last_walk_entries_) {
    const std::string name = it->path().filename().string();
    // A name with a newline cannot be a registry line: not followed.
    if (name.find("tfevents") != std::string::npos && name.find('\n') == std::string::npos &&
        it->is_regular_file(ec) && !it->is_symlink(ec)) {
      std::string path = std::filesystem::relative(it->path(), root_, ec).string();
      if (!ec && known_.count(path) == 0) {
        found.push_back(std::move(path));
      }
    }
    it.increment(ec);
    if (ec) {
      break;
    }
  }
  if (ec || it == std::filesystem::recursive_directory_iterator()) {
    walk_.reset();  // the next poll starts a new walk
  }
  return found;
}

EventFileFollower::Read EventFileFollower::ReadFile(size_t index, uint64_t size, uint64_t max_bytes,
                                                    bool final, uint64_t* bytes_read) {
  File& file = files_[index];
  const uint64_t start = file.offset;
  const std::string data =
      ReadRange(root_ + "/" + file.path, start, std::min({size - start, kMaxReadBytes, max_bytes}));
  *bytes_read = data.size();
  tensorboard::EventRecords records =
      tensorboard::ReadEventRecords(data, file.offset, &file.plugins);
  Read read;
  read.stream = kFirstEventFileStream + static_cast<int>(index);
  read.path = file.path;
  read.scalars = std::move(records.scalars);
  read.warnings = std::move(records.warnings);
  for (std::string& warning : read.warnings) {
    warning = absl::StrCat("warning: tensorboard file ", file.path, ": ", warning);
  }
  file.offset += records.consumed;
  read.end = file.offset;
  // Read to the end of the file, and still a partial record there.
  if (final && file.offset < size && !file.torn_warned && data.size() == size - start) {
    file.torn_warned = true;
    read.warnings.push_back(absl::StrCat("warning: tensorboard file ", file.path, ": byte offset ",
                                         file.offset, ": the last ", size - file.offset,
                                         " bytes are not a whole record (ignored)"));
  }
  return read;
}

std::vector<std::string> EventFileFollower::TakeNotes() {
  std::vector<std::string> out;
  out.swap(notes_);
  return out;
}

std::vector<EventFileFollower::Read> EventFileFollower::Poll(bool final) {
  std::vector<Read> out;
  // New files: a slice of the walk, or at the end all of a new one. In name order within a poll.
  if (final) {
    walk_.reset();
  }
  std::vector<std::string> found = Walk(final ? INT_MAX : kWalkEntriesPerPoll);
  std::sort(found.begin(), found.end());
  const size_t room = kMaxEventFiles - std::min(kMaxEventFiles, files_.size());
  if (found.size() > room) {
    if (!left_out_warned_) {
      left_out_warned_ = true;
      notes_.push_back(absl::StrCat("warning: job.tensorboard: more than ", kMaxEventFiles,
                                    " event files; ", found[room],
                                    " and any after it are not read"));
    }
    found.resize(room);
  }
  if (!found.empty() && !Register(found).ok()) {
    found.clear();  // the registry cannot be written: the files wait for a later walk
  }
  // What was appended, round robin from where the last poll's byte budget ran out; at the end,
  // every file to its end.
  uint64_t budget = final ? UINT64_MAX : kMaxReadBytesPerPoll;
  const size_t n = files_.size();
  for (size_t k = 0; k < n && budget > 0; ++k) {
    const size_t i = (next_read_ + k) % n;
    const uint64_t size = SizeOf(root_ + "/" + files_[i].path);
    while (size > files_[i].offset && budget > 0) {
      const uint64_t before = files_[i].offset;
      uint64_t got = 0;
      Read read = ReadFile(i, size, budget, final, &got);
      budget -= std::min(budget, got);
      const bool moved = files_[i].offset > before;
      if (moved || !read.warnings.empty()) {
        out.push_back(std::move(read));
      }
      if (!final || !moved) {
        break;
      }
    }
    if (budget == 0) {
      next_read_ = (i + 1) % n;
    }
  }
  return out;
}

}  // namespace tae::agent
