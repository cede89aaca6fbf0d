#include "agent/checkpoints/checkpoint_sync.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "agent/link/link.h"
#include "boost/asio/post.hpp"
#include "common/blobs/transfer.h"
#include "common/snapshot/snapshot.h"
#include "common/status/macros.h"

namespace tae::agent {
namespace {

namespace stdfs = std::filesystem;

constexpr int kCallTimeoutS = 600;
constexpr size_t kRequestBytes = (8 << 20) - (64 << 10);  // under taed's 8 MiB per call
constexpr int kHashesPerFetch = 4096;

absl::Status FromGrpc(const grpc::Status& status, const std::string& what) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

absl::StatusOr<Capture> CaptureCheckpoint(const std::string& dir, const std::string& capture_dir,
                                          double marked_at, bool copy) {
  Capture capture;
  capture.dir = capture_dir;
  std::error_code ec;
  stdfs::remove_all(capture_dir, ec);
  stdfs::create_directories(capture_dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", capture_dir, ": ", ec.message()));
  }
  const int64_t marked_ns = static_cast<int64_t>(marked_at * 1e9);
  for (auto it = stdfs::recursive_directory_iterator(dir, ec);
       !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string rel = stdfs::relative(it->path(), dir, ec).generic_string();
    const std::string target = capture_dir + "/" + rel;
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0) {
      continue;  // gone since listed: a temporary file of the job's
    }
    if (S_ISDIR(st.st_mode)) {
      stdfs::create_directories(target, ec);
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      capture.symlinks_skipped += 1;
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      continue;
    }
    if (MtimeNs(st) > marked_ns) {
      stdfs::remove_all(capture_dir, ec);
      return absl::FailedPreconditionError(
          absl::StrCat("\"", rel,
                       "\" changed after the checkpoint was marked (a later save began before it "
                       "was captured; write checkpoints to new files and rename them into place)"));
    }
    if (copy) {
      std::error_code copy_ec;
      struct stat after;
      if (!stdfs::copy_file(it->path(), target, stdfs::copy_options::overwrite_existing, copy_ec)) {
        stdfs::remove_all(capture_dir, ec);
        return absl::InternalError(
            absl::StrCat("cannot capture \"", rel, "\": ", copy_ec.message()));
      }
      if (lstat(it->path().c_str(), &after) != 0 || after.st_size != st.st_size ||
          MtimeNs(after) != MtimeNs(st) || after.st_ino != st.st_ino) {
        stdfs::remove_all(capture_dir, ec);
        return absl::FailedPreconditionError(
            absl::StrCat("\"", rel, "\" changed while it was captured (a save still going on)"));
      }
      struct stat copied;
      if (lstat(target.c_str(), &copied) != 0) {
        stdfs::remove_all(capture_dir, ec);
        return absl::InternalError(absl::StrCat("cannot capture \"", rel, "\": ", strerror(errno)));
      }
      // The copy is the capture's own: the upload checks that it does not change.
      capture.identity[rel] = {static_cast<uint64_t>(copied.st_size), MtimeNs(copied)};
      capture.files += 1;
      continue;
    }
    if (link(it->path().c_str(), target.c_str()) != 0) {
      std::error_code copy_ec;
      if (errno != EXDEV ||
          !stdfs::copy_file(it->path(), target, stdfs::copy_options::overwrite_existing, copy_ec)) {
        const std::string why = copy_ec ? copy_ec.message() : std::string(strerror(errno));
        stdfs::remove_all(capture_dir, ec);
        return absl::InternalError(absl::StrCat("cannot capture \"", rel, "\": ", why));
      }
    }
    capture.identity[rel] = {static_cast<uint64_t>(st.st_size), MtimeNs(st)};
    capture.files += 1;
  }
  if (ec) {
    stdfs::remove_all(capture_dir, ec);
    return absl::NotFoundError(absl::StrCat("cannot read ", dir, ": ", ec.message()));
  }
  return capture;
}

CheckpointSync::CheckpointSync(const std::string& taed, const std::string& token,
                               const tls::ClientConfig& tls)
    : token_(token) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  stub_ = tae::v1::AgentLink::NewStub(DialTaed(taed, tls, args));
  guard_.emplace(io_.get_executor());
  thread_ = std::thread([this] { io_.run(); });
}

CheckpointSync::~CheckpointSync() {
  guard_.reset();
  io_.stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

std::unique_ptr<grpc::ClientContext> CheckpointSync::NewContext(int timeout_s) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + token_);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  return ctx;
}

void CheckpointSync::Upload(Capture capture, std::function<void(UploadResult)> done) {
  int64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    seq = ++next_seq_;
    if (capture.artifact.empty()) {
      newest_[capture.run_id] = seq;
    }
  }
  boost::asio::post(io_, [this, seq, capture = std::move(capture), done = std::move(done)] {
    bool superseded = false;
    {
      absl::MutexLock lock(&mu_);
      superseded = capture.artifact.empty() && newest_[capture.run_id] != seq;
    }
    UploadResult result;
    if (superseded) {
      result.superseded = true;
    } else {
      result = UploadNow(capture);
    }
    std::error_code ec;
    stdfs::remove_all(capture.dir, ec);
    done(std::move(result));
  });
}

UploadResult CheckpointSync::UploadNow(const Capture& capture) {
  const auto start = std::chrono::steady_clock::now();
  UploadResult result;
  absl::StatusOr<snapshot::Walk> walk = snapshot::WalkTree(capture.dir);
  if (!walk.ok()) {
    result.status = walk.status();
    return result;
  }
  if (walk->files.empty()) {
    result.status = absl::FailedPreconditionError("the checkpoint directory holds no files");
    return result;
  }
  result.files = static_cast<int>(walk->files.size());
  result.bytes = walk->total_bytes;
  const std::string manifest = snapshot::ManifestText(walk->files);
  // Twice at most: a scrap at the same time may collect blobs uploaded before the commit; taed
  // then names them missing and they go up again.
  for (int round = 0; round < 2; ++round) {
    result.status = OfferAndSend(capture, manifest, walk->files, &result);
    if (!result.status.ok()) {
      break;
    }
    // Rewritten in place since the capture (same inode): the upload may mix two checkpoints.
    for (const auto& [rel, identity] : capture.identity) {
      struct stat st;
      const std::string path = capture.dir + "/" + rel;
      if (lstat(path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) != identity.first ||
          MtimeNs(st) != identity.second) {
        result.status = absl::FailedPreconditionError(
            absl::StrCat("\"", rel,
                         "\" was rewritten in place while it was uploaded; write checkpoints to "
                         "new files and rename them into place"));
        break;
      }
    }
    if (!result.status.ok()) {
      break;
    }
    tae::v1::CommitCheckpointRequest commit;
    commit.set_run_id(capture.run_id);
    commit.set_attempt(capture.attempt);
    commit.set_step(capture.step);
    commit.set_manifest(manifest);
    commit.set_artifact(capture.artifact);
    tae::v1::CommitCheckpointResponse committed;
    grpc::Status status =
        stub_->CommitCheckpoint(NewContext(kCallTimeoutS).get(), commit, &committed);
    if (status.ok()) {
      result.dropped = committed.dropped();
      result.status = absl::OkStatus();
      break;
    }
    result.status = FromGrpc(status, "commit");
    if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION ||
        status.error_message().find("not stored") == std::string::npos) {
      break;
    }
  }
  result.seconds = Seconds(start);
  return result;
}

absl::Status CheckpointSync::OfferAndSend(const Capture& capture, const std::string& manifest,
                                          const std::vector<snapshot::Entry>& entries,
                                          UploadResult* result) {
  tae::v1::OfferCheckpointRequest offer;
  offer.set_run_id(capture.run_id);
  offer.set_attempt(capture.attempt);
  offer.set_step(capture.step);
  offer.set_manifest(manifest);
  offer.set_artifact(capture.artifact);
  tae::v1::OfferCheckpointResponse offered;
  grpc::Status status = stub_->OfferCheckpoint(NewContext(kCallTimeoutS).get(), offer, &offered);
  if (!status.ok()) {
    return FromGrpc(status, "offer");
  }
  std::unordered_set<std::string> missing(offered.missing().begin(), offered.missing().end());
  std::vector<const snapshot::Entry*> to_send;
  for (const snapshot::Entry& entry : entries) {
    if (missing.erase(entry.sha256) > 0) {
      to_send.push_back(&entry);
    }
  }
  return blobs::SendFiles(capture.dir, to_send, kRequestBytes, [&](blobs::Chunks* chunks) {
    tae::v1::PutCheckpointBlobsRequest request;
    request.mutable_chunks()->Swap(chunks);
    tae::v1::PutCheckpointBlobsResponse response;
    grpc::Status put =
        stub_->PutCheckpointBlobs(NewContext(kCallTimeoutS).get(), request, &response);
    if (!put.ok()) {
      return FromGrpc(put, "upload");
    }
    result->blobs_uploaded += response.blobs_completed();
    result->bytes_uploaded += response.bytes_written();
    return absl::OkStatus();
  });
}

void CheckpointSync::Restore(std::string manifest, std::string dir,
                             std::function<void(RestoreResult)> done) {
  boost::asio::post(io_, [this, manifest = std::move(manifest), dir = std::move(dir),
                          done = std::move(done)] { done(RestoreNow(manifest, dir)); });
}

RestoreResult CheckpointSync::RestoreNow(const std::string& manifest, const std::string& dir) {
  const auto start = std::chrono::steady_clock::now();
  RestoreResult result;
  absl::StatusOr<std::vector<snapshot::Entry>> entries = snapshot::ParseManifest(manifest);
  if (!entries.ok()) {
    result.status = absl::InvalidArgumentError(
        absl::StrCat("the checkpoint's manifest: ", entries.status().message()));
    return result;
  }
  absl::StatusOr<std::unique_ptr<snapshot::TreeFill>> fill =
      snapshot::TreeFill::Start(*std::move(entries), dir, {/*remove_others=*/true});
  if (!fill.ok()) {
    result.status = fill.status();
    return result;
  }
  const std::vector<std::string>& missing = (*fill)->missing();
  for (size_t i = 0; i < missing.size() && result.status.ok(); i += kHashesPerFetch) {
    tae::v1::FetchBlobsRequest request;
    request.set_checkpoints(true);
    for (size_t j = i; j < std::min(missing.size(), i + kHashesPerFetch); ++j) {
      request.add_hashes(missing[j]);
    }
    std::unique_ptr<grpc::ClientContext> ctx = NewContext(kCallTimeoutS);
    auto reader = stub_->FetchBlobs(ctx.get(), request);
    result.status = blobs::ReceiveInto(reader.get(), ctx.get(), fill->get(), "fetching checkpoint");
  }
  if (result.status.ok()) {
    result.status = (*fill)->Finish();
  }
  result.stats = (*fill)->stats();
  result.seconds = Seconds(start);
  return result;
}

}  // namespace tae::agent
