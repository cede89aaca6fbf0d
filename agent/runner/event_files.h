#pragma once

// A job's TensorBoard event files (job.tensorboard; docs/metrics.md): the agent follows every
// file whose name contains "tfevents" under the job's directory for them, while the job runs and
// after it exits, and stores each scalar as a metric.
//
// Exactly once, like output lines: each file is a numbered source, its number the order it was
// found in, kept in a registry file in the job directory (one path per line, appended and synced
// once per poll that finds files, before any point of them is reported; a last line a crash tore
// is ignored at resume, as none of its file's points was reported).
//
// Bounded cost whatever the job creates: the directory is walked a slice at a time (at most
// kWalkEntriesPerPoll entries a poll, the walk going on at the next poll, a new walk starting when
// one ends), so a tree of N entries costs N / kWalkEntriesPerPoll polls to look through, not a
// walk of N every second; at most kMaxEventFiles files are followed (one warning names the
// first one left out); at most kMaxReadBytesPerPoll bytes are read a poll over all files, except
// at the end, when every file is read to its end. The agent journals, with the points of each read,
// the file's offset past the last whole record read (stream kFirstEventFileStream + number);
// a restarted agent resumes each file there (Resume), after re-reading what came before only to
// learn which tags name which plugin (common/tensorboard's ReadEventRecords).

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/tensorboard/tensorboard.h"

namespace tae::agent {

// Journal streams 0, 1, 2 are stdout, stderr and the metrics fd; event files are numbered from
// here.
inline constexpr int kFirstEventFileStream = 16;

// What one poll does at most (see above).
inline constexpr int kWalkEntriesPerPoll = 4096;
inline constexpr size_t kMaxEventFiles = 1024;
inline constexpr uint64_t kMaxReadBytesPerPoll = uint64_t{128} << 20;

// A TensorBoard tag as a metric name: printable ASCII without spaces, at most 128 characters
// (common/metrics' IsValidMetricKey); others replaced by '_', "_" when empty.
std::string MetricNameOfTag(const std::string& tag);

class EventFileFollower {
 public:
  // Follows the event files under `root` (a directory that may not exist yet); the registry is
  // the file `registry`.
  EventFileFollower(std::string root, std::string registry);

  // After an agent restart: reads the registry and starts each file at its journaled offset
  // (`offsets`: by file number; absent: 0).
  absl::Status Resume(const std::map<int, uint64_t>& offsets);

  // What one read of one file gave.
  struct Read {
    int stream = 0;    // kFirstEventFileStream + the file's number
    uint64_t end = 0;  // the file's offset past what was read
    std::string path;  // relative to root
    std::vector<tensorboard::Scalar> scalars;
    std::vector<std::string> warnings;  // corrupt records skipped; with `final`, a torn tail
  };
  // Finds new files and reads what was appended to each since the last call. `final`: the job is
  // over, so a record still not whole never will be (a warning names it), the whole tree is
  // walked and every file is read to its end.
  std::vector<Read> Poll(bool final);
  // Lines about the follower itself (files left out), once each; cleared by the call.
  std::vector<std::string> TakeNotes();
  // Entries the last poll's walk looked at (for tests).
  int last_walk_entries() const { return last_walk_entries_; }

 private:
  struct File {
    std::string path;  // relative to root_
    uint64_t offset = 0;
    std::map<std::string, std::string> plugins;  // tag -> plugin, from earlier records
    bool torn_warned = false;
  };
  // Appends `paths` to the registry and syncs it; on success they are followed.
  absl::Status Register(const std::vector<std::string>& paths);
  // Up to `budget` entries of the walk in progress (a new one started if none): the new event
  // files met, in the order met.
  std::vector<std::string> Walk(int budget);
  // One read of file `index` (`size` bytes now) from its offset, of at most `max_bytes`; the
  // bytes read go to `bytes_read`.
  Read ReadFile(size_t index, uint64_t size, uint64_t max_bytes, bool final, uint64_t* bytes_read);

  std::string root_;
  std::string registry_;
  std::vector<File> files_;
  std::set<std::string> known_;  // files_' paths
  std::optional<std::filesystem::recursive_directory_iterator> walk_;
  size_t next_read_ = 0;  // where the next poll's reads start (round robin under the byte bound)
  bool left_out_warned_ = false;
  int last_walk_entries_ = 0;
  bool rewrite_ = false;  // an append failed: the registry is written whole the next time
  std::vector<std::string> notes_;
};

}  // namespace tae::agent
