#pragma once

// Journal: every event of every run, numbered with the agent's sequence, kept until taed acks
// it. A reconnect resends everything unacked; taed stores events idempotently by (run, attempt,
// agent, seq), so a resend is harmless and a seq is never given out twice.
//
// Two modes. The default constructor keeps the journal in memory (events survive a lost
// connection or a taed restart, not a restart of the agent). Journal::Open keeps it in a
// directory, crash-safe: Append buffers, Sync writes and fdatasyncs, and only synced events are
// ever handed out to be sent. A restarted agent finds every unacked event, continues the seq
// numbering, and finds the source marks: how far into each run's output files (stdout, stderr,
// metrics) the journaled events reach, written atomically with those events.
//
// Layout of the directory (0700):
//   seg-<first seq, 20 digits>.log   records, see record.h; a new segment at ~8 MiB starts with
//                                    a checkpoint of all live marks, so older segments can be
//                                    deleted once all their events are acked
//   acked                            the highest acked seq (decimal; temp file + rename)
//   LOCK                             flock'ed while open: one process per journal
// On Open a torn or corrupt tail (power cut mid-write) is truncated with a warning; a damaged
// record followed by intact ones, or a gap in the seqs, is DataLoss naming file and offset.
//
// Not thread-safe: one owner (the agent's io_context thread). Sync blocks on the disk.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tae/v1/agent_link.pb.h"

namespace tae::agent {

// How far the journaled events reach into one output file of a run.
struct SourceMark {
  int64_t run_id = 0;
  int32_t attempt = 0;
  int32_t stream = 0;  // 0 stdout, 1 stderr, 2 metrics; 16 on: event files (agent/runner)
  uint64_t offset = 0;
};

struct JournalOptions {
  // A segment that has reached this size gets no more records: the next Sync starts a new one.
  uint64_t segment_bytes = 8u << 20;
};

struct JournalStats {
  uint64_t bytes_on_disk = 0;  // intact records in the segment files
  size_t segments = 0;
  uint64_t syncs = 0;          // successful Syncs that wrote something
  uint64_t pending_bytes = 0;  // appended, not yet synced
  uint64_t torn_bytes = 0;     // dropped from torn tails when opened
};

class Journal {
 public:
  // In memory, as before: Sync is a no-op and events are takeable as soon as appended.
  Journal();
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // The durable journal in `dir` (created 0700 if missing): replays its segments.
  static absl::StatusOr<std::unique_ptr<Journal>> Open(const std::string& dir,
                                                       JournalOptions options = {});

  // Numbers the event and keeps it. Returns its seq.
  uint64_t Append(tae::v1::Event event);
  // Numbers the events and appends them with `marks` as one record group: after a crash either
  // all of it is back or none. Returns the last seq (the last one given out if `events` is empty).
  // Durable mode: buffered in memory until Sync.
  uint64_t Append(std::vector<tae::v1::Event> events, std::vector<SourceMark> marks);
  // Writes everything appended so far and fdatasyncs it; only then are those events takeable.
  // On a write error (ENOSPC, EIO) the file is cut back to its last intact record and the
  // appended data stays buffered for the next Sync. In-memory mode: no-op.
  absl::Status Sync();

  // Up to max synced events not yet sent on the current connection, in seq order; marks them
  // sent.
  std::vector<tae::v1::Event> TakeUnsent(size_t max);
  // Drops every event with seq <= `seq`. Durable mode: records the acked seq (not fsynced: a
  // stale value only causes resends) and deletes segments whose events are all acked.
  void Ack(uint64_t seq);
  // A new connection: everything unacked is to be sent again.
  void ResetSent() { sent_up_to_ = acked_; }

  // The latest appended mark of every (run, attempt, stream) not forgotten, in key order.
  std::vector<SourceMark> Marks() const;
  // The run ended and its exit event is journaled: its marks are no longer needed.
  void ForgetRun(int64_t run_id, int32_t attempt);

  size_t unacked() const { return events_.size() + pending_events_.size(); }
  bool has_unsent() const { return synced_seq_ > sent_up_to_; }
  uint64_t acked() const { return acked_; }
  bool durable() const { return !dir_.empty(); }
  // Durable mode: whether the journal can still keep what it is given. Not OK when its directory
  // is gone or unwritable, its active segment was removed (writes to an unlinked file "succeed"
  // and are lost with the process), or the last write of its acked mark failed and fails again
  // now (it is written again here: a disk that was full for a moment, and has room again, leaves
  // the journal healthy). An agent whose journal is not healthy must stop: it cannot promise
  // exactly-once delivery any more.
  absl::Status Healthy();
  JournalStats stats() const;

 private:
  using MarkKey = std::tuple<int64_t, int32_t, int32_t>;
  // Events are kept serialized (seq included) and parsed when taken: half the memory, and Open
  // does not parse what it replays.
  struct Entry {
    uint64_t seq = 0;
    std::string event;
  };
  struct Segment {
    uint64_t first_seq = 0;  // from the file name
    uint64_t last_seq = 0;   // first_seq - 1 while it holds no event
    uint64_t bytes = 0;      // end of the last intact record
    bool has_checkpoint = false;
    std::string path;
  };

  absl::Status Replay(const std::vector<std::pair<uint64_t, std::string>>& files,
                      uint64_t acked_on_disk);
  absl::Status StartFirstSegment();
  absl::Status Rotate();
  absl::Status CutBack();
  void WriteAcked();
  void DropAckedSegments();
  static void ApplyMarks(const std::vector<SourceMark>& marks, std::map<MarkKey, uint64_t>* to);
  static void ForgetIn(int64_t run_id, int32_t attempt, std::map<MarkKey, uint64_t>* in);

  // Synced (or, in memory, appended) events not yet acked: seqs acked_+1 ... synced_seq_.
  std::deque<Entry> events_;
  uint64_t next_seq_ = 1;
  uint64_t synced_seq_ = 0;
  uint64_t sent_up_to_ = 0;
  uint64_t acked_ = 0;
  std::map<MarkKey, uint64_t> marks_;  // everything appended

  // Durable mode only.
  std::string dir_;
  absl::Status acked_write_ = absl::OkStatus();  // the last WriteAcked's outcome
  JournalOptions options_;
  int lock_fd_ = -1;
  int active_fd_ = -1;            // segments_.back(), written at its `bytes`
  std::deque<Segment> segments_;  // oldest first
  std::string pending_;           // framed records not yet synced
  std::vector<Entry> pending_events_;
  std::map<MarkKey, uint64_t> synced_marks_;  // the marks as of the end of the synced records
  bool dirty_tail_ = false;  // a failed write may have left bytes past segments_.back()
  uint64_t syncs_ = 0;
  uint64_t torn_bytes_ = 0;
};

}  // namespace tae::agent
