// The Control service's snapshot calls (taectl mount / run / sync / scrap). Blob I/O runs on the
// blob worker, store work on the core thread; a call that needs both hops from one to the other
// and finishes where its last step ran. Nothing here blocks a gRPC thread.

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/snapshot/snapshot.h"
#include "common/status/macros.h"
#include "server/rpc/blob_rpcs.h"
#include "server/rpc/control_service.h"
#include "server/wire/wire.h"
#include "spdlog/spdlog.h"

namespace tae::rpc {
namespace {

constexpr int kMaxHashesPerCall = 200000;
constexpr size_t kMaxManifestBytes = 64 << 20;  // ~500k files

}  // namespace

grpc::ServerUnaryReactor* ControlService::MissingBlobs(grpc::CallbackServerContext* ctx,
                                                       const tae::v1::MissingBlobsRequest* request,
                                                       tae::v1::MissingBlobsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (request->hashes_size() > kMaxHashesPerCall) {
    reactor->Finish(ToGrpc(absl::InvalidArgumentError(
        absl::StrCat("hashes: more than ", kMaxHashesPerCall, " in one call"))));
    return reactor;
  }
  for (int i = 0; i < request->hashes_size(); ++i) {
    absl::Status status = CheckBlobHash(request->hashes(i), absl::StrCat("hashes[", i, "]"));
    if (!status.ok()) {
      reactor->Finish(ToGrpc(status));
      return reactor;
    }
  }
  blobs_->Post([reactor, request, response](blobs::BlobStore& store) {
    std::vector<std::string> hashes(request->hashes().begin(), request->hashes().end());
    for (std::string& hash : store.Missing(hashes)) {
      response->add_missing(std::move(hash));
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::PutBlobs(grpc::CallbackServerContext* ctx,
                                                   const tae::v1::PutBlobsRequest* request,
                                                   tae::v1::PutBlobsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status valid = CheckChunks(request->chunks()); !valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  PostWriteChunks(blobs_, request, reactor, response);
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::CreateSnapshot(
    grpc::CallbackServerContext* ctx, const tae::v1::CreateSnapshotRequest* request,
    tae::v1::CreateSnapshotResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status valid = CheckBlobHash(request->id(), "id");
  if (valid.ok() && request->manifest().size() > kMaxManifestBytes) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("manifest: larger than ", kMaxManifestBytes, " bytes"));
  }
  if (valid.ok() && request->source().size() > 4096) {
    valid = absl::InvalidArgumentError("source: longer than 4096 bytes");
  }
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  // The last step, on the core: record the row (or find the existing one) and answer.
  auto record = [this, reactor, request, response](std::optional<model::SnapshotRecord> fresh) {
    boost::asio::post(*core_, [this, reactor, request, response, fresh = std::move(fresh)] {
      absl::StatusOr<bool> existed = controller_->AddSnapshot(request->id(), fresh);
      if (!existed.ok()) {
        reactor->Finish(ToGrpc(existed.status()));
        return;
      }
      response->set_existing(*existed);
      absl::StatusOr<query::SnapshotView> view = query_->Snapshot(request->id());
      if (!view.ok()) {
        reactor->Finish(ToGrpc(view.status()));
        return;
      }
      wire::ToProto(*view, response->mutable_snapshot());
      reactor->Finish(grpc::Status::OK);
    });
  };
  if (request->manifest().empty()) {
    record(std::nullopt);
    return reactor;
  }
  // Parse, check the id and that every blob is stored, on the blob worker.
  blobs_->Post([reactor, request, record](blobs::BlobStore& store) {
    absl::StatusOr<std::vector<snapshot::Entry>> entries =
        snapshot::ParseManifest(request->manifest());
    if (!entries.ok()) {
      reactor->Finish(ToGrpc(
          absl::InvalidArgumentError(absl::StrCat("manifest: ", entries.status().message()))));
      return;
    }
    const std::string id = snapshot::SnapshotId(*entries);
    if (id != request->id()) {
      reactor->Finish(ToGrpc(absl::InvalidArgumentError(
          absl::StrCat("id: ", request->id(), " is not the manifest's SHA-256 (", id, ")"))));
      return;
    }
    model::SnapshotRecord fresh;
    fresh.id = id;
    fresh.manifest = request->manifest();
    fresh.files = static_cast<int64_t>(entries->size());
    fresh.source = request->source();
    fresh.created_at = clock::WallNow();
    std::unordered_set<std::string> seen;
    int missing = 0;
    std::string first_missing;
    for (const snapshot::Entry& entry : *entries) {
      fresh.bytes += static_cast<int64_t>(entry.size);
      if (seen.insert(entry.sha256).second && !store.Has(entry.sha256)) {
        if (missing++ == 0) {
          first_missing = entry.path;
        }
      }
    }
    if (missing > 0) {
      reactor->Finish(ToGrpc(absl::FailedPreconditionError(
          absl::StrCat("manifest: ", missing, " blobs are not stored (the first is for \"",
                       first_missing, "\"); upload them with PutBlobs first"))));
      return;
    }
    record(std::move(fresh));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::ListSnapshots(
    grpc::CallbackServerContext* ctx, const tae::v1::ListSnapshotsRequest* request,
    tae::v1::ListSnapshotsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  boost::asio::post(*core_, [this, reactor, response] {
    absl::StatusOr<std::vector<query::SnapshotView>> snapshots = query_->Snapshots();
    if (!snapshots.ok()) {
      reactor->Finish(ToGrpc(snapshots.status()));
      return;
    }
    for (const query::SnapshotView& snapshot : *snapshots) {
      wire::ToProto(snapshot, response->add_snapshots());
    }
    blobs_->Post([reactor, response](blobs::BlobStore& blobs) {
      absl::StatusOr<std::vector<std::string>> all = blobs.List();
      if (!all.ok()) {
        reactor->Finish(ToGrpc(all.status()));
        return;
      }
      int64_t bytes = 0;
      for (const std::string& hash : *all) {
        bytes += static_cast<int64_t>(blobs.Size(hash).value_or(0));
      }
      response->set_blobs(static_cast<int32_t>(all->size()));
      response->set_blob_bytes(bytes);
      reactor->Finish(grpc::Status::OK);
    });
  });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::Scrap(grpc::CallbackServerContext* ctx,
                                                const tae::v1::ScrapRequest* request,
                                                tae::v1::ScrapResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (request->ids_size() > 10000 || !(request->older_than_s() >= 0)) {
    reactor->Finish(ToGrpc(absl::InvalidArgumentError(
        request->ids_size() > 10000 ? "ids: more than 10000" : "older_than_s: must be >= 0")));
    return reactor;
  }
  if (request->checkpoints() || request->artifacts()) {
    ScrapCheckpoints(reactor, request, response);
    return reactor;
  }
  boost::asio::post(*core_, [this, reactor, request, response] {
    controller::ScrapInput input{{request->ids().begin(), request->ids().end()},
                                 request->all(),
                                 request->older_than_s(),
                                 request->dry_run()};
    absl::StatusOr<controller::ScrapPlan> plan = controller_->Scrap(input);
    if (!plan.ok()) {
      reactor->Finish(ToGrpc(plan.status()));
      return;
    }
    for (const std::string& id : plan->removed) {
      response->add_removed(id);
    }
    for (const std::string& kept : plan->kept) {
      response->add_kept(kept);
    }
    response->set_agents_notified(plan->agents_notified);
    if (request->dry_run()) {
      reactor->Finish(grpc::Status::OK);
      return;
    }
    // Garbage collection: every blob no remaining snapshot references. A blob uploaded for a
    // snapshot not yet created can go too; CreateSnapshot then names it missing and taectl
    // uploads it again.
    RemoveUnreferencedBlobs(blobs_, std::move(plan->referenced), reactor, response);
  });
  return reactor;
}

}  // namespace tae::rpc
