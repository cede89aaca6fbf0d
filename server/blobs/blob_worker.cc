#include "server/blobs/blob_worker.h"

#include "boost/asio/post.hpp"

namespace tae::blobs {

absl::StatusOr<std::unique_ptr<BlobWorker>> BlobWorker::Start(const std::string& root,
                                                              bool answer_as_missing) {
  absl::StatusOr<BlobStore> store = BlobStore::Open(root);
  if (!store.ok()) {
    return store.status();
  }
  store->set_fsync_each(false);
  store->set_answer_as_missing(answer_as_missing);
  if (absl::Status indexed = store->EnableIndex(); !indexed.ok()) {
    return indexed;
  }
  return std::unique_ptr<BlobWorker>(new BlobWorker(std::move(*store)));
}

BlobWorker::BlobWorker(BlobStore store) : store_(std::move(store)) {
  guard_.emplace(io_.get_executor());
  thread_ = std::thread([this] { io_.run(); });
}

BlobWorker::~BlobWorker() { Stop(); }

void BlobWorker::Post(std::function<void(BlobStore&)> fn) {
  boost::asio::post(io_, [this, fn = std::move(fn)] { fn(store_); });
}

void BlobWorker::Stop() {
  guard_.reset();
  if (thread_.joinable()) {
    thread_.join();
  }
}

}  // namespace tae::blobs
