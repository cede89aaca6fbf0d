#pragma once

// Mounting a directory: walk and hash it (with a stat-keyed hash cache under $TAE_HOME, so an
// unchanged file is not read again), ask taed which blobs it lacks, upload only those, and record
// the snapshot. Used by taectl mount, run, sync and submit (for a spec's [job] code).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/rpc/control_client.h"
#include "common/text/bytes.h"

namespace tae::client {

struct MountResult {
  std::string id;
  std::string root;  // the directory's real path
  int64_t files = 0;
  uint64_t bytes = 0;
  uint64_t hashed_bytes = 0;  // read to hash (0 when every file came from the hash cache)
  int blobs_uploaded = 0;
  uint64_t bytes_uploaded = 0;
  bool existing = false;  // taed had the snapshot already
  double seconds = 0;
  std::vector<std::string> excluded;
};

// `progress` (may be empty) receives a one-line status while hashing and uploading.
absl::StatusOr<MountResult> MountTree(ControlClient& client, const std::string& dir,
                                      const std::function<void(const std::string&)>& progress);

using text::FormatBytes;  // common/text/bytes.h

// A progress printer for stderr: rewrites one line on a terminal, silent otherwise.
std::function<void(const std::string&)> StderrProgress();

}  // namespace tae::client
