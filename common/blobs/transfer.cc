#include "common/blobs/transfer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"

namespace tae::blobs {
namespace {

absl::Status ReadRange(int fd, const std::string& path, uint64_t offset, size_t length,
                       std::string* data) {
  data->resize(length);
  size_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, data->data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (done != length) {
    return absl::AbortedError(absl::StrCat(path, " changed while it was being sent"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SendFiles(const std::string& root, const std::vector<const snapshot::Entry*>& entries,
                       size_t request_bytes, const std::function<absl::Status(Chunks*)>& send) {
  Chunks chunks;
  size_t pending = 0;
  auto flush = [&]() -> absl::Status {
    if (chunks.empty()) {
      return absl::OkStatus();
    }
    absl::Status sent = send(&chunks);
    chunks.Clear();
    pending = 0;
    return sent;
  };
  for (const snapshot::Entry* entry : entries) {
    const std::string path = absl::StrCat(root, "/", entry->path);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      return absl::AbortedError(absl::StrCat("cannot read ", path, ": ", strerror(errno)));
    }
    absl::Status status = absl::OkStatus();
    uint64_t offset = 0;
    do {
      const size_t length = static_cast<size_t>(std::min<uint64_t>(
          entry->size - offset, request_bytes - std::min(pending, request_bytes)));
      if (length == 0 && entry->size > 0) {
        status = flush();
        continue;
      }
      tae::v1::BlobChunk* chunk = chunks.Add();
      status = ReadRange(fd, path, offset, length, chunk->mutable_data());
      chunk->set_hash(entry->sha256);
      chunk->set_offset(offset);
      chunk->set_total_size(entry->size);
      offset += length;
      pending += length + 128;
      if (status.ok() && pending >= request_bytes) {
        status = flush();
      }
    } while (status.ok() && offset < entry->size);
    ::close(fd);
    if (!status.ok()) {
      return status;
    }
  }
  return flush();
}

absl::Status ReceiveInto(grpc::ClientReaderInterface<tae::v1::FetchBlobsChunk>* reader,
                         grpc::ClientContext* ctx, snapshot::TreeFill* fill,
                         const std::string& what) {
  tae::v1::FetchBlobsChunk chunk;
  absl::Status failed = absl::OkStatus();
  while (reader->Read(&chunk)) {
    if (!failed.ok()) {
      continue;  // drain the stream so Finish can return
    }
    failed = fill->Write(chunk.hash(), chunk.offset(), chunk.total_size(), chunk.data());
    if (!failed.ok()) {
      ctx->TryCancel();
    }
  }
  grpc::Status status = reader->Finish();
  if (!failed.ok()) {
    return failed;
  }
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat(what, ": ", status.error_message()));
  }
  return absl::OkStatus();
}

}  // namespace tae::blobs
