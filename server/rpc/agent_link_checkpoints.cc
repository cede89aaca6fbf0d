// The AgentLink service's checkpoint calls (docs/checkpoints.md): an agent's offer / upload /
// commit of a run's checkpoint or artifact. Blob I/O and manifest parsing run on the checkpoint
// blob worker, run checks and rows on the core; a call hops between them and finishes where its
// last step ran. Nothing here blocks a gRPC thread.
//
// Why a commit cannot offer a half-uploaded checkpoint: the row is written incomplete first (so
// garbage collection keeps its blobs from then on), the blobs are then checked on the blob worker
// (after any removal posted before), and only then is the row marked complete.

#include <map>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "common/clock/clock.h"
#include "server/rpc/agent_link_service.h"
#include "server/rpc/blob_rpcs.h"
#include "server/rpc/convert.h"
#include "spdlog/spdlog.h"

namespace tae::rpc {
namespace {

using Offer = std::shared_ptr<controller::CheckpointOffer>;

}  // namespace

void AgentLinkService::ReclaimUploads() {
  const double now = clock::WallNow();
  UploadGrants::Expired expired = grants_.Expire(now);
  if (expired.empty()) {
    return;
  }
  // Which of the blobs no grant names any more no checkpoint names either: stored by an upload
  // that no commit followed. Any grant opened after this (on the blob worker, before the removal
  // runs there) has its chunks written after the removal, so what it uploads is stored again;
  // the removal also skips a blob a grant names by then.
  absl::StatusOr<std::vector<std::string>> uncommitted =
      controller_->UncommittedBlobs(expired.unnamed);
  if (!uncommitted.ok()) {
    spdlog::warn("expired checkpoint uploads: {}", uncommitted.status().ToString());
    uncommitted = std::vector<std::string>{};
  }
  checkpoint_blobs_->Post([this, now, expired = std::move(expired),
                           uncommitted = *std::move(uncommitted)](blobs::BlobStore& store) {
    for (const auto& [agent, hash] : expired.partials) {
      store.DropPartial(hash, agent);
    }
    int removed = 0;
    uint64_t bytes = 0;
    for (const std::string& hash : uncommitted) {
      if (grants_.Named(hash, now) || !store.Has(hash)) {
        continue;
      }
      const uint64_t size = store.Size(hash).value_or(0);
      if (absl::Status gone = store.Remove(hash); !gone.ok()) {
        spdlog::warn("checkpoint blob {}: {}", hash, gone.ToString());
        continue;
      }
      removed += 1;
      bytes += size;
    }
    if (removed > 0) {
      spdlog::info(
          "removed {} checkpoint blobs ({} bytes) that agents uploaded but no commit "
          "named within {} s",
          removed, bytes, grants_.grant_seconds());
    }
  });
}

grpc::ServerUnaryReactor* AgentLinkService::OfferCheckpoint(
    grpc::CallbackServerContext* ctx, const tae::v1::OfferCheckpointRequest* request,
    tae::v1::OfferCheckpointResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<std::string> caller = Caller(ctx);
  if (!caller.has_value()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad agent credential"));
    return reactor;
  }
  checkpoint_blobs_->Post([this, reactor, request, response, caller = *caller](blobs::BlobStore&) {
    auto sizes = std::make_shared<std::map<std::string, uint64_t>>();
    absl::StatusOr<controller::CheckpointOffer> parsed =
        ParseCheckpointOffer(request->run_id(), request->attempt(), request->step(),
                             request->manifest(), request->artifact(), sizes.get());
    if (!parsed.ok()) {
      reactor->Finish(ToGrpc(parsed.status()));
      return;
    }
    Offer offer = std::make_shared<controller::CheckpointOffer>(*std::move(parsed));
    boost::asio::post(*core_, [this, reactor, response, offer, sizes, caller] {
      absl::Status taken = controller_->CheckCheckpoint(*offer, caller);
      absl::StatusOr<std::vector<std::string>> fresh =
          taken.ok() ? controller_->NewBlobs(*offer) : taken;
      if (!fresh.ok()) {
        reactor->Finish(ToGrpc(fresh.status()));
        return;
      }
      auto upload = std::make_shared<std::set<std::string>>(fresh->begin(), fresh->end());
      checkpoint_blobs_->Post(
          [this, reactor, response, offer, sizes, caller, upload](blobs::BlobStore& store) {
            // Missing, or new to the run: a blob another run stored is uploaded like one that
            // is not stored (the agent shows it holds it; the answer says nothing of others).
            for (std::string& hash : store.Missing(offer->hashes)) {
              upload->insert(std::move(hash));
            }
            std::map<std::string, uint64_t> granted;
            for (const std::string& hash : offer->hashes) {
              if (upload->count(hash) > 0) {
                granted[hash] = sizes->at(hash);
                response->add_missing(hash);
              }
            }
            reactor->Finish(ToGrpc(grants_.Grant(caller, granted, clock::WallNow())));
          });
    });
  });
  return reactor;
}

grpc::ServerUnaryReactor* AgentLinkService::PutCheckpointBlobs(
    grpc::CallbackServerContext* ctx, const tae::v1::PutCheckpointBlobsRequest* request,
    tae::v1::PutCheckpointBlobsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<std::string> caller = Caller(ctx);
  if (!caller.has_value()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad agent credential"));
    return reactor;
  }
  if (absl::Status valid = CheckChunks(request->chunks()); !valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  if (absl::Status granted = grants_.Accept(*caller, request->chunks(), clock::WallNow());
      !granted.ok()) {
    spdlog::warn("agent {}: checkpoint upload refused: {}", *caller,
                 std::string(granted.message()));
    reactor->Finish(ToGrpc(granted));
    return reactor;
  }
  PostWriteChunks(checkpoint_blobs_, request, *caller, reactor, response);
  return reactor;
}

grpc::ServerUnaryReactor* AgentLinkService::CommitCheckpoint(
    grpc::CallbackServerContext* ctx, const tae::v1::CommitCheckpointRequest* request,
    tae::v1::CommitCheckpointResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<std::string> caller = Caller(ctx);
  if (!caller.has_value()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad agent credential"));
    return reactor;
  }
  checkpoint_blobs_->Post([this, reactor, request, response, caller = *caller](blobs::BlobStore&) {
    absl::StatusOr<controller::CheckpointOffer> parsed =
        ParseCheckpointOffer(request->run_id(), request->attempt(), request->step(),
                             request->manifest(), request->artifact());
    if (!parsed.ok()) {
      reactor->Finish(ToGrpc(parsed.status()));
      return;
    }
    Offer offer = std::make_shared<controller::CheckpointOffer>(*std::move(parsed));
    // 1. The row, incomplete: garbage collection keeps its blobs from now on.
    boost::asio::post(*core_, [this, reactor, response, offer, caller] {
      absl::StatusOr<int64_t> id = controller_->BeginCheckpoint(
          *offer, caller, grants_.Held(caller, offer->hashes, clock::WallNow()));
      if (!id.ok()) {
        reactor->Finish(ToGrpc(id.status()));
        return;
      }
      // 2. Every blob stored (after any removal posted before the row existed)?
      checkpoint_blobs_->Post([this, reactor, response, offer, caller,
                               id = *id](blobs::BlobStore& store) {
        const size_t missing = store.Missing(offer->hashes).size();
        // 3. Offered from now on, or forgotten.
        boost::asio::post(*core_, [this, reactor, response, offer, caller, id, missing] {
          if (missing > 0) {
            absl::Status abandoned = controller_->AbandonCheckpoint(id);
            if (!abandoned.ok()) {
              spdlog::error("checkpoint of r{}: {}", offer->run_id, abandoned.ToString());
            }
            reactor->Finish(ToGrpc(controller::UnstoredBlobs(missing, offer->hashes.size())));
            return;
          }
          absl::StatusOr<model::CheckpointsDropped> dropped =
              controller_->CompleteCheckpoint(offer->run_id, id);
          if (!dropped.ok()) {
            reactor->Finish(ToGrpc(dropped.status()));
            return;
          }
          response->set_dropped(dropped->checkpoints);
          grants_.Done(caller, offer->hashes);
          spdlog::info("r{} attempt {}: {} at step {} stored ({} files, {} bytes)", offer->run_id,
                       offer->attempt, offer->artifact.empty() ? "checkpoint" : offer->artifact,
                       offer->step, offer->files, offer->bytes);
          auto unreferenced =
              std::make_shared<std::vector<std::string>>(std::move(dropped->unreferenced));
          // 4. The blobs only the dropped checkpoints named.
          checkpoint_blobs_->Post([reactor, unreferenced](blobs::BlobStore& store) {
            for (const std::string& hash : *unreferenced) {
              absl::Status removed = store.Remove(hash);
              if (!removed.ok()) {
                spdlog::warn("checkpoint blob {}: {}", hash, removed.ToString());
              }
            }
            reactor->Finish(grpc::Status::OK);
          });
        });
      });
    });
  });
  return reactor;
}

}  // namespace tae::rpc
