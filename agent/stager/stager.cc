#include "agent/stager/stager.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "agent/link/link.h"
#include "boost/asio/post.hpp"
#include "spdlog/spdlog.h"

namespace tae::agent {
namespace {

constexpr int kHashesPerFetch = 4096;
constexpr int kCallTimeoutS = 600;

absl::Status FromGrpc(const grpc::Status& status, const std::string& what) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Stager>> Stager::Start(const std::string& taed,
                                                      const std::string& token,
                                                      const std::string& cache_dir,
                                                      const std::string& runs_dir,
                                                      const tls::ClientConfig& tls) {
  absl::StatusOr<std::unique_ptr<SnapshotCache>> cache = SnapshotCache::Open(cache_dir);
  if (!cache.ok()) {
    return cache.status();
  }
  return std::unique_ptr<Stager>(new Stager(std::move(*cache), taed, tls, token, runs_dir));
}

Stager::Stager(std::unique_ptr<SnapshotCache> cache, const std::string& taed,
               const tls::ClientConfig& tls, std::string token, std::string runs_dir)
    : cache_(std::move(cache)),
      token_(std::move(token)),
      runs_dir_(std::move(runs_dir)),
      used_dir_(runs_dir_ + "/.snapshots") {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(128 << 20);  // a manifest of ~1M files
  stub_ = tae::v1::AgentLink::NewStub(DialTaed(taed, tls, args));
  guard_.emplace(io_.get_executor());
  thread_ = std::thread([this] { io_.run(); });
}

Stager::~Stager() {
  guard_.reset();
  io_.stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

std::unique_ptr<grpc::ClientContext> Stager::NewContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + token_);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(kCallTimeoutS));
  return ctx;
}

void Stager::Stage(const std::string& id, const std::string& run_dir,
                   std::function<void(StageResult)> done) {
  boost::asio::post(io_,
                    [this, id, run_dir, done = std::move(done)] { done(StageNow(id, run_dir)); });
}

StageResult Stager::StageNow(const std::string& id, const std::string& run_dir) {
  const auto start = std::chrono::steady_clock::now();
  StageResult result;
  if (!cache_->HasManifest(id)) {
    tae::v1::GetManifestRequest request;
    request.set_snapshot_id(id);
    tae::v1::GetManifestResponse response;
    grpc::Status status = stub_->GetManifest(NewContext().get(), request, &response);
    if (!status.ok()) {
      result.status = FromGrpc(status, absl::StrCat("snapshot ", id.substr(0, 12)));
      return result;
    }
    result.status = cache_->PutManifest(id, response.manifest());
    if (!result.status.ok()) {
      return result;
    }
    result.manifest_fetched = true;
  }
  absl::StatusOr<std::vector<snapshot::Entry>> entries = cache_->GetManifest(id);
  if (!entries.ok()) {
    result.status = entries.status();
    return result;
  }
  result.files = static_cast<int>(entries->size());
  for (const snapshot::Entry& entry : *entries) {
    result.bytes += entry.size;
  }
  // A blob found changed through a hard link (Materialise's size check) is discarded and fetched
  // again: one retry.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::string> missing = cache_->MissingBlobs(*entries);
    for (size_t i = 0; i < missing.size(); i += kHashesPerFetch) {
      std::vector<std::string> batch(missing.begin() + static_cast<std::ptrdiff_t>(i),
                                     missing.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                           missing.size(), i + kHashesPerFetch)));
      result.status = FetchBlobs(batch, &result);
      if (!result.status.ok()) {
        return result;
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(run_dir, ec);
    std::filesystem::create_directories(run_dir, ec);
    if (ec) {
      result.status =
          absl::InternalError(absl::StrCat("cannot create ", run_dir, ": ", ec.message()));
      return result;
    }
    absl::StatusOr<MaterialiseStats> stats = cache_->Materialise(*entries, run_dir);
    if (stats.ok()) {
      result.status = absl::OkStatus();
      break;
    }
    result.status = stats.status();
    if (!absl::IsDataLoss(stats.status())) {
      return result;
    }
  }
  if (result.status.ok()) {
    // Remember who holds links into this snapshot, so scrap can free them.
    std::error_code ec;
    const std::string marker_dir = absl::StrCat(used_dir_, "/", id);
    std::filesystem::create_directories(marker_dir, ec);
    std::ofstream(
        absl::StrCat(marker_dir, "/", std::filesystem::path(run_dir).filename().string()));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

absl::Status Stager::FetchBlobs(const std::vector<std::string>& hashes, StageResult* result) {
  tae::v1::FetchBlobsRequest request;
  for (const std::string& hash : hashes) {
    request.add_hashes(hash);
  }
  std::unique_ptr<grpc::ClientContext> ctx = NewContext();
  std::unique_ptr<grpc::ClientReader<tae::v1::FetchBlobsChunk>> reader =
      stub_->FetchBlobs(ctx.get(), request);
  tae::v1::FetchBlobsChunk chunk;
  absl::Status failed = absl::OkStatus();
  while (reader->Read(&chunk)) {
    if (!failed.ok()) {
      continue;  // drain the stream so Finish can return
    }
    absl::StatusOr<blobs::ChunkResult> written =
        cache_->WriteChunk(chunk.hash(), chunk.offset(), chunk.total_size(), chunk.data());
    if (!written.ok()) {
      failed = written.status();
      ctx->TryCancel();
      continue;
    }
    result->bytes_fetched += written->bytes_written;
    if (written->complete) {
      result->blobs_fetched += 1;
    }
  }
  grpc::Status status = reader->Finish();
  if (!failed.ok()) {
    return failed;
  }
  if (!status.ok()) {
    return FromGrpc(status, "fetching blobs from taed");
  }
  return absl::OkStatus();
}

void Stager::Scrap(std::vector<std::string> ids, bool all, std::set<std::string> active_run_dirs) {
  boost::asio::post(io_, [this, ids = std::move(ids), all, active = std::move(active_run_dirs)] {
    ScrapNow(ids, all, active);
  });
}

void Stager::ScrapNow(const std::vector<std::string>& ids, bool all,
                      const std::set<std::string>& active_run_dirs) {
  std::vector<std::string> targets = all ? cache_->ManifestIds() : ids;
  std::set<std::string> keep;
  int runs_cleaned = 0;
  for (const std::string& id : targets) {
    absl::StatusOr<std::vector<snapshot::Entry>> entries = cache_->GetManifest(id);
    if (!entries.ok()) {
      continue;
    }
    const std::string marker_dir = absl::StrCat(used_dir_, "/", id);
    std::error_code ec;
    bool in_use = false;
    for (const auto& marker : std::filesystem::directory_iterator(marker_dir, ec)) {
      const std::string run_dir = absl::StrCat(runs_dir_, "/", marker.path().filename().string());
      if (active_run_dirs.count(run_dir) > 0) {
        in_use = true;
        continue;
      }
      absl::StatusOr<RemoveStats> removed = cache_->RemoveMaterialised(*entries, run_dir);
      if (!removed.ok()) {
        spdlog::warn("scrap: {}: {}", run_dir, removed.status().ToString());
      }
      std::filesystem::remove(marker.path(), ec);
      runs_cleaned += 1;
    }
    if (in_use) {
      for (const snapshot::Entry& entry : *entries) {
        keep.insert(entry.sha256);
      }
    } else {
      std::filesystem::remove_all(marker_dir, ec);
    }
  }
  absl::StatusOr<ScrapResult> result = cache_->Scrap(targets, false, keep);
  if (!result.ok()) {
    spdlog::error("scrap: {}", result.status().ToString());
    return;
  }
  spdlog::info("scrapped {} snapshots: {} blobs ({} bytes) freed, files removed from {} run dirs",
               result->manifests_removed, result->blobs_removed + result->exec_copies_removed,
               result->bytes_freed, runs_cleaned);
}

}  // namespace tae::agent
