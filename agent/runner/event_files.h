#pragma once

// A job's TensorBoard event files (job.tensorboard; docs/metrics.md): the agent follows every
// file whose name contains "tfevents" under the job's directory for them, while the job runs and
// after it exits, and stores each scalar as a metric.
//
// Exactly once, like output lines: each file is a numbered source, its number the order it was
// found in, kept in a registry file in the job directory (one path per line, written durably
// before any point of the file is reported). The agent journals, with the points of each read,
// the file's offset past the last whole record read (stream kFirstEventFileStream + number);
// a restarted agent resumes each file there (Resume), after re-reading what came before only to
// learn which tags name which plugin (common/tensorboard's ReadEventRecords).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/tensorboard/tensorboard.h"

namespace tae::agent {

// Journal streams 0, 1, 2 are stdout, stderr and the metrics fd; event files are numbered from
// here.
inline constexpr int kFirstEventFileStream = 16;

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
  // over, so a record still not whole never will be (a warning names it).
  std::vector<Read> Poll(bool final);

 private:
  struct File {
    std::string path;  // relative to root_
    uint64_t offset = 0;
    std::map<std::string, std::string> plugins;  // tag -> plugin, from earlier records
    bool torn_warned = false;
  };
  absl::Status Register(const std::string& path);

  std::string root_;
  std::string registry_;
  std::vector<File> files_;
};

}  // namespace tae::agent
