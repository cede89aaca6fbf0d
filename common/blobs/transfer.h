#pragma once

// Moving blobs over gRPC, the same way for every caller: files packed into upload requests
// (taectl mount's PutBlobs, an agent's PutCheckpointBlobs), and FetchBlobs streams written into a
// snapshot::TreeFill (an agent restoring a checkpoint, taectl pull).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/snapshot/fill.h"
#include "common/snapshot/snapshot.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "tae/v1/agent_link.pb.h"
#include "tae/v1/types.pb.h"

namespace tae::blobs {

using Chunks = google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>;

// Sends the contents of `entries` (files below `root`, each read as its entry's size) as
// requests of at most `request_bytes` of data: small files together, big ones split. `send` gets
// each request's chunks and may move them out. A file shorter than its entry (changed since it
// was hashed) is Aborted naming it; the receiver checks every blob's hash.
absl::Status SendFiles(const std::string& root, const std::vector<const snapshot::Entry*>& entries,
                       size_t request_bytes, const std::function<absl::Status(Chunks*)>& send);

// Reads a FetchBlobs stream into `fill`. At the first chunk `fill` refuses, the call is
// cancelled and that error returned; otherwise the call's status (Unavailable etc., prefixed
// with `what`).
absl::Status ReceiveInto(grpc::ClientReaderInterface<tae::v1::FetchBlobsChunk>* reader,
                         grpc::ClientContext* ctx, snapshot::TreeFill* fill,
                         const std::string& what);

}  // namespace tae::blobs
