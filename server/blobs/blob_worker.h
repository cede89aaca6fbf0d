#pragma once

// BlobWorker: the one thread that owns one of taed's BlobStores; taed starts two, for code
// snapshots ($TAE_HOME/blobs) and for checkpoints and artifacts ($TAE_HOME/checkpoints). Blob I/O
// (hashing, writing, syncing and reading files) never runs on the core thread or inside a gRPC
// reaction: callers Post work here and finish their call from it (docs/threading.md).

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "common/blobs/blob_store.h"

namespace tae::blobs {

class BlobWorker {
 public:
  // Opens the store at `root` (blobs are synced once per PutBlobs call, not per file) and starts
  // the thread.
  // `answer_as_missing`: BlobStore::set_answer_as_missing (the checkpoint store).
  static absl::StatusOr<std::unique_ptr<BlobWorker>> Start(const std::string& root,
                                                           bool answer_as_missing = false);
  ~BlobWorker();

  // Runs fn(store) on the worker thread, in posting order.
  void Post(std::function<void(BlobStore&)> fn);
  // Finishes the work queued so far, then joins the thread. Later Posts are dropped.
  void Stop();

 private:
  explicit BlobWorker(BlobStore store);

  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  BlobStore store_;
  std::thread thread_;
};

}  // namespace tae::blobs
