// Opening a durable journal: lock the directory, replay its segments, cut torn tails.

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "agent/journal/files.h"
#include "agent/journal/journal.h"
#include "agent/journal/record.h"
#include "common/status/macros.h"
#include "spdlog/spdlog.h"

namespace tae::agent {
namespace {

using journal_internal::Group;

// seg-<20 digits>.log -> its first seq.
bool ParseSegmentName(absl::string_view name, uint64_t* first_seq) {
  if (name.size() != 28 || !absl::ConsumePrefix(&name, "seg-") ||
      !absl::ConsumeSuffix(&name, ".log")) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
         absl::SimpleAtoi(name, first_seq) && *first_seq > 0;
}

absl::StatusOr<std::vector<std::pair<uint64_t, std::string>>> ListSegments(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return journal_internal::ErrnoError(errno, "list", dir);
  }
  std::vector<std::pair<uint64_t, std::string>> files;
  while (const dirent* entry = ::readdir(d)) {
    uint64_t first = 0;
    if (ParseSegmentName(entry->d_name, &first)) {
      files.emplace_back(first, absl::StrCat(dir, "/", entry->d_name));
    }
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

uint64_t ReadAcked(const std::string& path) {
  absl::StatusOr<std::string> text = journal_internal::ReadWholeFile(path);
  uint64_t acked = 0;
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) {
      spdlog::warn("{}; assuming nothing is acked", std::string(text.status().message()));
    }
    return 0;
  }
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &acked)) {
    spdlog::warn("journal: {} does not hold a seq; assuming nothing is acked", path);
    return 0;
  }
  return acked;
}

// Whether an intact record starts anywhere in data[from, end): a damaged record followed by an
// intact one is damage in the middle of the journal, not a torn tail.
bool IntactRecordAfter(std::string_view data, size_t from) {
  std::string_view payload;
  for (size_t offset = from; offset + journal_internal::kHeaderBytes < data.size(); ++offset) {
    if (journal_internal::ReadFrame(data, offset, &payload)) {
      return true;
    }
  }
  return false;
}

struct TornTail {
  std::string path;
  uint64_t good_end = 0;
  uint64_t size = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& dir,
                                                       JournalOptions options) {
  RETURN_IF_ERROR(journal_internal::MakeDir(dir));
  std::unique_ptr<Journal> journal(new Journal());
  journal->dir_ = dir;
  journal->options_ = options;
  const std::string lock = dir + "/LOCK";
  journal->lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (journal->lock_fd_ < 0) {
    return journal_internal::ErrnoError(errno, "open", lock);
  }
  if (::flock(journal->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("journal ", dir, " is in use by another agent process"));
    }
    return journal_internal::ErrnoError(errno, "lock", lock);
  }
  absl::StatusOr<std::vector<std::pair<uint64_t, std::string>>> files = ListSegments(dir);
  if (!files.ok()) {
    return files.status();
  }
  const uint64_t acked = ReadAcked(dir + "/acked");
  if (files->empty()) {
    journal->acked_ = acked;
    RETURN_IF_ERROR(journal->StartFirstSegment());
  } else {
    RETURN_IF_ERROR(journal->Replay(*files, acked));
  }
  const Segment& active = journal->segments_.back();
  journal->active_fd_ = ::open(active.path.c_str(), O_WRONLY | O_CLOEXEC);
  if (journal->active_fd_ < 0) {
    return journal_internal::ErrnoError(errno, "open", active.path);
  }
  journal->sent_up_to_ = journal->acked_;
  journal->synced_seq_ = journal->next_seq_ - 1;
  journal->synced_marks_ = journal->marks_;
  return journal;
}

absl::Status Journal::StartFirstSegment() {
  next_seq_ = acked_ + 1;
  const std::string path = absl::StrFormat("%s/seg-%020u.log", dir_, next_seq_);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return journal_internal::ErrnoError(errno, "create", path);
  }
  ::close(fd);
  // The file name keeps the seq numbering going: it must not vanish in a power cut.
  RETURN_IF_ERROR(journal_internal::SyncDir(dir_));
  segments_.push_back(Segment{next_seq_, next_seq_ - 1, 0, false, path});
  return absl::OkStatus();
}

absl::Status Journal::Replay(const std::vector<std::pair<uint64_t, std::string>>& files,
                             uint64_t acked_on_disk) {
  // Segments before the oldest one left were deleted because all their events were acked; the
  // acked file may be older than those deletions (it is not fsynced).
  acked_ = std::max(acked_on_disk, files.front().first - 1);
  uint64_t expected = files.front().first;
  std::vector<TornTail> torn;
  Group group;
  for (const auto& [first_seq, path] : files) {
    if (first_seq != expected) {
      return absl::DataLossError(absl::StrCat("journal: ", path, " starts at seq ", first_seq,
                                              " but the segment before it ends at seq ",
                                              expected - 1));
    }
    absl::StatusOr<std::string> data = journal_internal::ReadWholeFile(path);
    if (!data.ok()) {
      return data.status();
    }
    Segment segment{first_seq, first_seq - 1, 0, false, path};
    size_t offset = 0;
    std::string_view payload;
    while (offset < data->size()) {
      if (!journal_internal::ReadFrame(*data, offset, &payload)) {
        if (IntactRecordAfter(*data, offset + 1)) {
          return absl::DataLossError(absl::StrCat("journal: ", path, ": damaged record at offset ",
                                                  offset, " followed by intact ones"));
        }
        torn.push_back(TornTail{path, offset, data->size()});
        break;
      }
      if (!journal_internal::DecodeGroup(payload, &group)) {
        return absl::DataLossError(absl::StrCat("journal: ", path, ": record at offset ", offset,
                                                " has a good checksum but cannot be decoded"));
      }
      if (group.first_seq != expected) {
        return absl::DataLossError(absl::StrCat("journal: ", path, ": record at offset ", offset,
                                                " starts at seq ", group.first_seq, ", expected ",
                                                expected));
      }
      for (size_t i = 0; i < group.events.size(); ++i) {
        const uint64_t seq = group.first_seq + i;
        if (seq > acked_) {  // acked events are not resent
          events_.push_back(Entry{seq, std::string(group.events[i])});
        }
      }
      expected += group.events.size();
      if (group.flags & journal_internal::kFlagCheckpoint) {
        marks_.clear();
        segment.has_checkpoint = true;
      }
      ApplyMarks(group.marks, &marks_);
      for (const journal_internal::RunKey& key : group.forgets) {
        ForgetIn(key.run_id, key.attempt, &marks_);
      }
      offset += journal_internal::kHeaderBytes + payload.size();
    }
    segment.last_seq = expected - 1;
    segment.bytes = offset;
    segments_.push_back(std::move(segment));
  }
  // Only now that all of it is known to be sound are torn tails cut off.
  for (const TornTail& tail : torn) {
    spdlog::warn("journal: {}: dropping a torn tail of {} bytes at offset {} (cut off mid-write)",
                 tail.path, tail.size - tail.good_end, tail.good_end);
    if (::truncate(tail.path.c_str(), static_cast<off_t>(tail.good_end)) != 0) {
      return journal_internal::ErrnoError(errno, "truncate", tail.path);
    }
    torn_bytes_ += tail.size - tail.good_end;
  }
  if (acked_ > expected - 1) {
    spdlog::warn("journal: {}/acked says seq {} but the journal ends at seq {}", dir_, acked_,
                 expected - 1);
    acked_ = expected - 1;
  }
  next_seq_ = expected;
  return absl::OkStatus();
}

}  // namespace tae::agent
