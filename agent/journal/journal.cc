// The journal at run time: append, sync, send, ack. Opening and replay are in journal_open.cc.

#include "agent/journal/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/journal/files.h"
#include "agent/journal/record.h"
#include "common/status/macros.h"
#include "spdlog/spdlog.h"

namespace tae::agent {

using journal_internal::AppendRecord;
using journal_internal::kFlagCheckpoint;
using journal_internal::RunKey;

Journal::Journal() = default;

Journal::~Journal() {
  // Whatever is appended but not synced is lost, as in a crash: the owner Syncs first.
  if (active_fd_ >= 0) {
    ::close(active_fd_);
  }
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
  }
}

uint64_t Journal::Append(tae::v1::Event event) {
  std::vector<tae::v1::Event> events;
  events.push_back(std::move(event));
  return Append(std::move(events), {});
}

uint64_t Journal::Append(std::vector<tae::v1::Event> events, std::vector<SourceMark> marks) {
  if (events.empty() && marks.empty()) {
    return next_seq_ - 1;
  }
  const uint64_t first = next_seq_;
  std::vector<std::string> serialized(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].set_seq(next_seq_++);
    events[i].SerializeToString(&serialized[i]);
  }
  ApplyMarks(marks, &marks_);
  if (durable()) {
    AppendRecord(0, first, serialized, marks, {}, &pending_);
  }
  for (size_t i = 0; i < serialized.size(); ++i) {
    Entry entry{first + i, std::move(serialized[i])};
    if (durable()) {
      pending_events_.push_back(std::move(entry));
    } else {
      events_.push_back(std::move(entry));
    }
  }
  if (!durable()) {
    synced_seq_ = next_seq_ - 1;
  }
  return next_seq_ - 1;
}

absl::Status Journal::Sync() {
  if (!durable() || pending_.empty()) {
    return dirty_tail_ ? CutBack() : absl::OkStatus();
  }
  if (dirty_tail_) {
    RETURN_IF_ERROR(CutBack());
  }
  const Segment& active = segments_.back();
  if (active.bytes >= options_.segment_bytes && active.last_seq >= active.first_seq) {
    RETURN_IF_ERROR(Rotate());
  }
  Segment& segment = segments_.back();
  absl::Status status =
      journal_internal::PWriteAll(active_fd_, pending_, segment.bytes, segment.path);
  if (status.ok()) {
    status = journal_internal::DataSync(active_fd_, segment.path);
  }
  if (!status.ok()) {
    // Cut the partial record off now, so that neither replay nor the next Sync meets it; the
    // data stays pending and the next Sync writes it again from the last intact end.
    dirty_tail_ = true;
    CutBack().IgnoreError();
    return status;
  }
  segment.bytes += pending_.size();
  if (!pending_events_.empty()) {
    segment.last_seq = pending_events_.back().seq;
  }
  for (Entry& entry : pending_events_) {
    events_.push_back(std::move(entry));
  }
  pending_events_.clear();
  pending_.clear();
  synced_seq_ = next_seq_ - 1;
  synced_marks_ = marks_;
  ++syncs_;
  return absl::OkStatus();
}

absl::Status Journal::CutBack() {
  const Segment& segment = segments_.back();
  absl::Status status = journal_internal::Truncate(active_fd_, segment.bytes, segment.path);
  if (status.ok()) {
    dirty_tail_ = false;
  } else {
    spdlog::warn("{} (retried at the next sync)", std::string(status.message()));
  }
  return status;
}

absl::Status Journal::Rotate() {
  // The new segment starts with a checkpoint of the marks as of the synced end of the journal,
  // and it is durable (data and directory entry) before any older segment can be deleted.
  const uint64_t first = synced_seq_ + 1;
  const std::string path = absl::StrFormat("%s/seg-%020u.log", dir_, first);
  // O_TRUNC: a file of this name can only be left over from a rotation that failed here.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return journal_internal::ErrnoError(errno, "create", path);
  }
  std::vector<SourceMark> live;
  for (const auto& [key, offset] : synced_marks_) {
    live.push_back(SourceMark{std::get<0>(key), std::get<1>(key), std::get<2>(key), offset});
  }
  std::string checkpoint;
  AppendRecord(kFlagCheckpoint, first, {}, live, {}, &checkpoint);
  absl::Status status = journal_internal::PWriteAll(fd, checkpoint, 0, path);
  if (status.ok()) {
    status = journal_internal::DataSync(fd, path);
  }
  if (status.ok()) {
    status = journal_internal::SyncDir(dir_);
  }
  if (!status.ok()) {
    ::close(fd);
    if (::unlink(path.c_str()) != 0) {
      spdlog::warn("journal: cannot remove {} after a failed rotation: {}", path,
                   std::strerror(errno));
    }
    return status;
  }
  ::close(active_fd_);
  active_fd_ = fd;
  segments_.push_back(Segment{first, first - 1, checkpoint.size(), true, path});
  return absl::OkStatus();
}

std::vector<tae::v1::Event> Journal::TakeUnsent(size_t max) {
  std::vector<tae::v1::Event> out;
  if (events_.empty() || sent_up_to_ >= synced_seq_) {
    return out;
  }
  // events_ holds seqs acked_+1 ... synced_seq_ without gaps.
  const uint64_t front = events_.front().seq;
  size_t index = sent_up_to_ >= front ? static_cast<size_t>(sent_up_to_ + 1 - front) : 0;
  for (; index < events_.size() && out.size() < max; ++index) {
    const Entry& entry = events_[index];
    sent_up_to_ = entry.seq;
    if (!out.emplace_back().ParseFromString(entry.event)) {
      // Cannot happen to bytes this process serialized or that passed their CRC on replay.
      spdlog::error("journal: event {} does not parse; skipped", entry.seq);
      out.pop_back();
    }
  }
  return out;
}

void Journal::Ack(uint64_t seq) {
  if (seq > synced_seq_) {
    spdlog::warn("journal: ack of seq {} beyond the last synced seq {}", seq, synced_seq_);
    seq = synced_seq_;
  }
  if (seq <= acked_) {
    return;
  }
  while (!events_.empty() && events_.front().seq <= seq) {
    events_.pop_front();
  }
  acked_ = seq;
  sent_up_to_ = std::max(sent_up_to_, acked_);
  if (durable()) {
    WriteAcked();
    DropAckedSegments();
  }
}

void Journal::WriteAcked() {
  absl::Status status = journal_internal::ReplaceFile(dir_ + "/acked", absl::StrCat(acked_, "\n"));
  if (!status.ok()) {
    // A stale mark alone only causes resends after a restart, but a write that fails here says
    // the journal's directory is failing: Healthy() reports it.
    spdlog::warn("{}", std::string(status.message()));
  }
  acked_write_ = status;
}

absl::Status Journal::Healthy() {
  if (!durable()) {
    return absl::OkStatus();
  }
  if (::access(dir_.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal directory ", dir_, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (active_fd_ >= 0 && ::fstat(active_fd_, &st) == 0 && st.st_nlink == 0) {
    return absl::DataLossError(
        absl::StrCat("journal segment ", segments_.back().path, " was removed under the agent"));
  }
  if (!acked_write_.ok()) {
    WriteAcked();  // a passing fault (a disk full for a moment) heals here
  }
  return acked_write_;
}

void Journal::DropAckedSegments() {
  // Segments before one that starts with a checkpoint (which carries their marks forward) can go
  // once all their events are acked. The active segment stays: it also keeps the seq numbering
  // going when everything is acked.
  size_t cut = 0;
  for (size_t i = 1; i < segments_.size() && segments_[i - 1].last_seq <= acked_; ++i) {
    if (segments_[i].has_checkpoint) {
      cut = i;
    }
  }
  // Oldest first, each deletion durable before the next: a power cut must not leave a gap.
  // Segments are 8 MiB, so this fsync is rare.
  for (; cut > 0; --cut) {
    if (::unlink(segments_[0].path.c_str()) != 0 && errno != ENOENT) {
      spdlog::warn("journal: cannot delete {}: {}", segments_[0].path, std::strerror(errno));
      return;
    }
    segments_.pop_front();
    if (absl::Status status = journal_internal::SyncDir(dir_); !status.ok()) {
      spdlog::warn("{}", std::string(status.message()));
      return;
    }
  }
}

std::vector<SourceMark> Journal::Marks() const {
  std::vector<SourceMark> out;
  out.reserve(marks_.size());
  for (const auto& [key, offset] : marks_) {
    out.push_back(SourceMark{std::get<0>(key), std::get<1>(key), std::get<2>(key), offset});
  }
  return out;
}

void Journal::ForgetRun(int64_t run_id, int32_t attempt) {
  const auto begin = marks_.lower_bound(MarkKey{run_id, attempt, INT32_MIN});
  if (begin == marks_.end() || std::get<0>(begin->first) != run_id ||
      std::get<1>(begin->first) != attempt) {
    return;
  }
  ForgetIn(run_id, attempt, &marks_);
  if (durable()) {
    AppendRecord(0, next_seq_, {}, {}, {RunKey{run_id, attempt}}, &pending_);
  }
}

void Journal::ApplyMarks(const std::vector<SourceMark>& marks, std::map<MarkKey, uint64_t>* to) {
  for (const SourceMark& mark : marks) {
    (*to)[MarkKey{mark.run_id, mark.attempt, mark.stream}] = mark.offset;
  }
}

void Journal::ForgetIn(int64_t run_id, int32_t attempt, std::map<MarkKey, uint64_t>* in) {
  auto it = in->lower_bound(MarkKey{run_id, attempt, INT32_MIN});
  while (it != in->end() && std::get<0>(it->first) == run_id && std::get<1>(it->first) == attempt) {
    it = in->erase(it);
  }
}

JournalStats Journal::stats() const {
  JournalStats stats;
  for (const Segment& segment : segments_) {
    stats.bytes_on_disk += segment.bytes;
  }
  stats.segments = segments_.size();
  stats.syncs = syncs_;
  stats.pending_bytes = pending_.size();
  stats.torn_bytes = torn_bytes_;
  return stats;
}

}  // namespace tae::agent
