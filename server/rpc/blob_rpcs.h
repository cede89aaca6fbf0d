#pragma once

// The blob work both services do (snapshots from taectl, checkpoints from agents, blobs to agents
// and to taectl pull, garbage collection after a scrap of snapshots or of checkpoints): one
// implementation each, on the blob worker that owns the store.

#include <cstdint>
#include <functional>
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
// Chunks one call may carry: an agent's sender counts 128 bytes of framing per chunk against its
// ~8 MiB request (common/blobs/transfer.cc), so no honest call has more than 65,024; a call of a
// million one-byte chunks is refused before any is looked at.
inline constexpr int kMaxPutChunks = 1 << 16;

// InvalidArgument naming `field` unless `hash` is 64 lowercase hex digits.
absl::Status CheckBlobHash(const std::string& hash, const std::string& field);

// InvalidArgument naming the chunk for a bad hash, or for more than kMaxPutBytes of data.
absl::Status CheckChunks(const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks);

// A put of checked chunks (CheckChunks), on `blobs`' worker: writes the request's chunks into the
// store, then makes what was stored durable (one sync for the batch), sets the response's
// bytes_written and blobs_completed, and finishes `reactor` (errors name the chunk). The request
// and response are the call's, alive until it finishes. A checkpoint put is `uploader`'s own
// partial upload (BlobStore::WriteChunk); a snapshot put (taectl's) shares one per blob.
void PostWriteChunks(blobs::BlobWorker* blobs, const tae::v1::PutBlobsRequest* request,
                     grpc::ServerUnaryReactor* reactor, tae::v1::PutBlobsResponse* response);
void PostWriteChunks(blobs::BlobWorker* blobs, const tae::v1::PutCheckpointBlobsRequest* request,
                     std::string uploader, grpc::ServerUnaryReactor* reactor,
                     tae::v1::PutCheckpointBlobsResponse* response);

// Asked once, with well-formed hashes, before a fetch reads anything: answers (once, from any
// thread) OK to go on, or the status the fetch finishes with.
using BlobFetchGate = std::function<void(std::function<void(grpc::Status)>)>;
// Asked before each chunk (from the blob worker's thread): OK to go on, or the status the fetch
// finishes with (the caller's credential revoked or replaced, the call past its lifetime).
using BlobFetchCheck = std::function<grpc::Status()>;

// A reactor streaming the bytes of request->hashes() from `blobs`, in 1 MiB chunks, one read on
// the blob worker per write; with a gate, only once the gate allowed it; with a check, only while
// it holds.
grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* NewBlobFetch(
    blobs::BlobWorker* blobs, const tae::v1::FetchBlobsRequest* request,
    const BlobFetchGate& gate = nullptr, BlobFetchCheck check = nullptr);
// A reactor that only finishes with `status`.
grpc::ServerWriteReactor<tae::v1::FetchBlobsChunk>* RejectedBlobFetch(grpc::Status status);

// Garbage collection after a scrap, on `blobs`' worker: removes every stored blob `referenced`
// does not name, adds each to response's blobs_removed and bytes_freed, and finishes `reactor`:
// OK, or the error of the first listing or removal that failed (the blobs removed before it stay
// removed).
void RemoveUnreferencedBlobs(blobs::BlobWorker* blobs, std::set<std::string> referenced,
                             grpc::ServerUnaryReactor* reactor, tae::v1::ScrapResponse* response);

}  // namespace tae::rpc
