#pragma once

// CheckpointSync: a run's checkpoints off the worker and back (docs/checkpoints.md).
//
// Up: when a job marks its checkpoint directory complete at step N (at wall time T), the agent
// captures it at once on its own thread: every file is hard-linked into a capture directory (no
// content is read), and a file modified after T refuses the capture (it belongs to a later
// save). The capture is then hashed, offered to taed, what taed lacks uploaded (only new contents
// cross the link), and committed; just before the commit every captured file is checked unchanged
// since the capture (a job that rewrites a file in place instead of replacing it would otherwise
// mix two checkpoints). A capture superseded by a later one of the same run before its upload
// started is dropped. Uploads run one at a time, on this component's thread. Run artifacts
// (profiles; docs/profiles.md) take the same path with a name, and are never superseded.
//
// Down: before a new attempt starts, Restore makes the run's checkpoint directory exactly the
// manifest taed sent (snapshot::TreeFill: files already there with the right content are kept,
// the rest fetched and verified, everything else removed). Copies, never hard links: the job may
// rewrite its checkpoint files.
//
// Callbacks run on this component's thread: they must only post to the agent's io_context.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "common/snapshot/fill.h"
#include "common/tls/tls.h"
#include "tae/v1/agent_link.grpc.pb.h"

namespace tae::agent {

// A checkpoint directory captured for upload.
struct Capture {
  int64_t run_id = 0;
  int attempt = 0;
  int64_t step = 0;
  std::string dir;  // the capture directory (removed once uploaded or refused)
  // Set: a run artifact of this name (a profile; docs/profiles.md), never superseded.
  std::string artifact;
  int files = 0;
  int symlinks_skipped = 0;
  // Per captured file (relative path): size and mtime at capture, to detect in-place rewrites.
  std::map<std::string, std::pair<uint64_t, int64_t>> identity;
};

struct UploadResult {
  absl::Status status;
  bool superseded = false;  // a later capture of the run came first: nothing was sent
  int files = 0;
  uint64_t bytes = 0;
  int blobs_uploaded = 0;
  uint64_t bytes_uploaded = 0;
  int dropped = 0;  // older checkpoints taed no longer keeps
  double seconds = 0;
};

struct RestoreResult {
  absl::Status status;
  snapshot::FillStats stats;
  double seconds = 0;
};

// Hard-links every regular file below `dir` into `capture_dir` (replaced if it exists; a copy
// when the link fails with EXDEV), refusing with FailedPrecondition a file modified after
// `marked_at` (seconds since the epoch). Symlinks are skipped and counted. Reads no content.
// With `copy` (a watched directory, whose files a job may rewrite in place): each file is copied
// instead and its size and modification time checked unchanged across the copy
// (FailedPrecondition "changed while it was captured" otherwise: the caller tries again), so the
// capture never holds a half-written file and never changes under the upload.
absl::StatusOr<Capture> CaptureCheckpoint(const std::string& dir, const std::string& capture_dir,
                                          double marked_at, bool copy = false);

class CheckpointSync {
 public:
  // Dials taed like the Link does (DialTaed, same tls) and starts the thread.
  CheckpointSync(const std::string& taed, const std::string& token,
                 const tls::ClientConfig& tls = {});
  ~CheckpointSync();

  // Queues the upload of a capture (see the header comment).
  void Upload(Capture capture, std::function<void(UploadResult)> done);
  // Makes `dir` exactly the checkpoint `manifest` on this component's thread.
  void Restore(std::string manifest, std::string dir, std::function<void(RestoreResult)> done);

 private:
  UploadResult UploadNow(const Capture& capture);
  absl::Status OfferAndSend(const Capture& capture, const std::string& manifest,
                            const std::vector<snapshot::Entry>& entries, UploadResult* result);
  RestoreResult RestoreNow(const std::string& manifest, const std::string& dir);
  std::unique_ptr<grpc::ClientContext> NewContext(int timeout_s) const;

  std::string token_;
  std::unique_ptr<tae::v1::AgentLink::Stub> stub_;
  absl::Mutex mu_;
  std::map<int64_t, int64_t> newest_ ABSL_GUARDED_BY(mu_);  // run -> its newest upload's seq
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::thread thread_;
};

}  // namespace tae::agent
