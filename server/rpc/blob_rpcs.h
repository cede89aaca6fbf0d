#pragma once

// The blob work both services do (snapshots from taectl, checkpoints from agents, blobs to agents
// and to taectl pull, garbage collection after a scrap of snapshots or of checkpoints): one
// implementation each, on the blob worker that owns the store.

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "grpcpp/support/server_callback.h"
#include "server/blobs/blob_worker.h"
#include "tae/v1/agent_link.pb.h"
#include "tae/v1/control.pb.h"
#include "tae/v1/types.pb.h"

namespace tae::rpc {

// At most this many data bytes per PutBlobs / PutCheckpointBlobs call.
inline constexpr size_t kMaxPutBytes = 8 << 20;

// InvalidArgument naming `field` unless `hash` is 64 lowercase hex digits.
absl::Status CheckBlobHash(const std::string& hash, const std::string& field);

// InvalidArgument naming the chunk for a bad hash, or for more than kMaxPutBytes of data.
absl::Status CheckChunks(const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks);

// Writes `chunks` into `store` (on its blob worker's thread), then makes what was stored durable
// (one sync for the batch). Adds the bytes written and the blobs completed to the counters; errors
// name the chunk.
absl::Status WriteChunks(blobs::BlobStore& store,
                         const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks,
                         uint64_t* bytes_written, int* blobs_completed);

// A reactor streaming the bytes of request->hashes() from `blobs`, in 1 MiB chunks, one read on
// the blob worker per write.
grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* NewBlobFetch(
    blobs::BlobWorker* blobs, const tae::v1::FetchBlobsRequest* request);
// A reactor that only finishes with `status`.
grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* RejectedBlobFetch(grpc::Status status);

// Garbage collection after a scrap, on `blobs`' worker: removes every stored blob `referenced`
// does not name, adds each to response's blobs_removed and bytes_freed, and finishes `reactor`:
// OK, or the error of the first listing or removal that failed (the blobs removed before it stay
// removed).
void RemoveUnreferencedBlobs(blobs::BlobWorker* blobs, std::set<std::string> referenced,
                             grpc::ServerUnaryReactor* reactor, tae::v1::ScrapResponse* response);

}  // namespace tae::rpc
