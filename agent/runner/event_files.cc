#include "agent/runner/event_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    File file;
    file.path = std::string(line);
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
    files_.push_back(std::move(file));
  }
  return absl::OkStatus();
}

absl::Status EventFileFollower::Register(const std::string& path) {
  std::vector<std::string> paths;
  for (const File& file : files_) {
    paths.push_back(file.path);
  }
  paths.push_back(path);
  // Durable before any point of the file is journaled with its number.
  RETURN_IF_ERROR(fs::WriteFileAtomically(registry_, absl::StrJoin(paths, "\n") + "\n",
                                          {0644, fs::Durability::kFileAndDir}));
  File file;
  file.path = path;
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

std::vector<EventFileFollower::Read> EventFileFollower::Poll(bool final) {
  std::vector<Read> out;
  // New files, in name order within one look.
  std::error_code ec;
  std::vector<std::string> found;
  for (auto it = std::filesystem::recursive_directory_iterator(
           root_, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec) &&
        it->path().filename().string().find("tfevents") != std::string::npos) {
      found.push_back(std::filesystem::relative(it->path(), root_, ec).string());
    }
  }
  std::sort(found.begin(), found.end());
  for (const std::string& path : found) {
    const bool known = std::any_of(files_.begin(), files_.end(),
                                   [&](const File& file) { return file.path == path; });
    if (!known && !Register(path).ok()) {
      break;  // the registry cannot be written: the file waits for the next poll
    }
  }
  for (size_t i = 0; i < files_.size(); ++i) {
    File& file = files_[i];
    const std::string full = root_ + "/" + file.path;
    const uint64_t size = SizeOf(full);
    if (size <= file.offset) {
      continue;
    }
    const uint64_t start = file.offset;
    const std::string data = ReadRange(full, start, std::min(size - start, kMaxReadBytes));
    tensorboard::EventRecords records =
        tensorboard::ReadEventRecords(data, file.offset, &file.plugins);
    Read read;
    read.stream = kFirstEventFileStream + static_cast<int>(i);
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
      read.warnings.push_back(absl::StrCat(
          "warning: tensorboard file ", file.path, ": byte offset ", file.offset, ": the last ",
          size - file.offset, " bytes are not a whole record (ignored)"));
    }
    if (records.consumed > 0 || !read.warnings.empty()) {
      out.push_back(std::move(read));
    }
  }
  return out;
}

}  // namespace tae::agent
