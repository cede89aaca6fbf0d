#include "server/rpc/blob_rpcs.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/rpc/convert.h"

namespace tae::rpc {

absl::Status CheckBlobHash(const std::string& hash, const std::string& field) {
  if (!blobs::IsBlobHash(hash)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", hash.substr(0, 80),
                                                   "' is not a SHA-256 (64 lowercase hex digits)"));
  }
  return absl::OkStatus();
}

absl::Status CheckChunks(const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks) {
  if (chunks.size() > kMaxPutChunks) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunks: ", chunks.size(), " in one call; at most ", kMaxPutChunks));
  }
  size_t bytes = 0;
  for (int i = 0; i < chunks.size(); ++i) {
    absl::Status status = CheckBlobHash(chunks[i].hash(), absl::StrCat("chunks[", i, "].hash"));
    if (!status.ok()) {
      return status;
    }
    bytes += chunks[i].data().size();
  }
  if (bytes > kMaxPutBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunks: ", bytes, " bytes in one call; at most ", kMaxPutBytes));
  }
  return absl::OkStatus();
}

namespace {

absl::Status WriteChunks(blobs::BlobStore& store,
                         const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks,
                         std::string_view uploader, uint64_t* bytes_written, int* blobs_completed) {
  absl::Status status = absl::OkStatus();
  for (int i = 0; i < chunks.size(); ++i) {
    const tae::v1::BlobChunk& chunk = chunks[i];
    absl::StatusOr<blobs::ChunkResult> result =
        store.WriteChunk(chunk.hash(), chunk.offset(), chunk.total_size(), chunk.data(), uploader);
    if (!result.ok()) {
      status = absl::Status(result.status().code(),
                            absl::StrCat("chunks[", i, "]: ", result.status().message()));
      break;
    }
    *bytes_written += result->bytes_written;
    *blobs_completed += result->complete ? 1 : 0;
  }
  // Whatever was stored is durable before the call says so (one syncfs for the whole batch).
  absl::Status synced = store.Sync();
  return status.ok() ? synced : status;
}

// Both puts: their requests carry `chunks`, their responses the two counters.
template <typename Request, typename Response>
void PostWrite(blobs::BlobWorker* blobs, const Request* request, std::string uploader,
               grpc::ServerUnaryReactor* reactor, Response* response) {
  blobs->Post(
      [reactor, request, response, uploader = std::move(uploader)](blobs::BlobStore& store) {
        uint64_t bytes = 0;
        int completed = 0;
        absl::Status status = WriteChunks(store, request->chunks(), uploader, &bytes, &completed);
        response->set_bytes_written(bytes);
        response->set_blobs_completed(completed);
        reactor->Finish(ToGrpc(status));
      });
}

}  // namespace

void PostWriteChunks(blobs::BlobWorker* blobs, const tae::v1::PutBlobsRequest* request,
                     grpc::ServerUnaryReactor* reactor, tae::v1::PutBlobsResponse* response) {
  PostWrite(blobs, request, std::string(), reactor, response);
}

void PostWriteChunks(blobs::BlobWorker* blobs, const tae::v1::PutCheckpointBlobsRequest* request,
                     std::string uploader, grpc::ServerUnaryReactor* reactor,
                     tae::v1::PutCheckpointBlobsResponse* response) {
  PostWrite(blobs, request, std::move(uploader), reactor, response);
}

namespace {

constexpr uint64_t kFetchChunk = 1 << 20;

// One fetch call: read a chunk on the blob worker, write it, and on its completion read the next.
// One read or write is in flight at a time, so the reactor outlives every callback.
class BlobFetch final : public grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk> {
 public:
  BlobFetch(blobs::BlobWorker* blobs, const tae::v1::FetchBlobsRequest* request,
            const BlobFetchGate& gate, BlobFetchCheck check)
      : blobs_(blobs), request_(request), check_(std::move(check)) {
    for (int i = 0; i < request->hashes_size(); ++i) {
      if (!blobs::IsBlobHash(request->hashes(i))) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("hashes[", i, "]: not a SHA-256")));
        return;
      }
    }
    if (!gate) {
      Next();
      return;
    }
    // Nothing is in flight until the gate answers (once), so the reactor is alive for it.
    gate([this](grpc::Status status) {
      if (status.ok()) {
        Next();
      } else {
        Finish(std::move(status));
      }
    });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away"));
      return;
    }
    Next();
  }

  void OnDone() override { delete this; }

 private:
  void Next() {
    if (index_ >= request_->hashes_size()) {
      Finish(grpc::Status::OK);
      return;
    }
    blobs_->Post([this](blobs::BlobStore& store) {
      if (check_) {
        if (grpc::Status still = check_(); !still.ok()) {
          Finish(std::move(still));
          return;
        }
      }
      const std::string& hash = request_->hashes(index_);
      absl::StatusOr<uint64_t> size = store.Size(hash);
      absl::StatusOr<std::string> data =
          size.ok() ? store.Read(hash, offset_, kFetchChunk) : size.status();
      if (!data.ok()) {
        Finish(ToGrpc(absl::Status(data.status().code(), absl::StrCat("hashes[", index_, "]: ",
                                                                      data.status().message()))));
        return;
      }
      chunk_.set_hash(hash);
      chunk_.set_offset(offset_);
      chunk_.set_total_size(*size);
      chunk_.set_data(std::move(*data));
      offset_ += chunk_.data().size();
      if (offset_ >= *size) {
        index_ += 1;
        offset_ = 0;
      }
      StartWrite(&chunk_);
    });
  }

  blobs::BlobWorker* blobs_;
  const tae::v1::FetchBlobsRequest* request_;
  const BlobFetchCheck check_;
  tae::v1::FetchBlobsChunk chunk_;
  int index_ = 0;
  uint64_t offset_ = 0;
};

class RejectedFetch final : public grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk> {
 public:
  explicit RejectedFetch(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* NewBlobFetch(
    blobs::BlobWorker* blobs, const tae::v1::FetchBlobsRequest* request, const BlobFetchGate& gate,
    BlobFetchCheck check) {
  return new BlobFetch(blobs, request, gate, std::move(check));
}

grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* RejectedBlobFetch(grpc::Status status) {
  return new RejectedFetch(std::move(status));
}

void RemoveUnreferencedBlobs(blobs::BlobWorker* blobs, std::set<std::string> referenced,
                             grpc::ServerUnaryReactor* reactor, tae::v1::ScrapResponse* response) {
  auto kept = std::make_shared<std::set<std::string>>(std::move(referenced));
  blobs->Post([reactor, response, kept](blobs::BlobStore& store) {
    absl::StatusOr<blobs::BlobStore::Removed> removed = store.RemoveAllBut(*kept);
    if (removed.ok()) {
      response->set_blobs_removed(removed->blobs);
      response->set_bytes_freed(static_cast<int64_t>(removed->bytes));
    }
    reactor->Finish(ToGrpc(removed.status()));
  });
}

}  // namespace tae::rpc
