#include "agent/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tae::train {
namespace {

constexpr int64_t kFormat = 1;

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::Status FsyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) {
    return Errno(absl::StrCat("checkpoint: open ", path));
  }
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? absl::OkStatus() : Errno(absl::StrCat("checkpoint: fsync ", path));
}

void WriteDouble(torch::serialize::OutputArchive& archive, const std::string& key, double value) {
  archive.write(key, c10::IValue(value));
}

void WriteInt(torch::serialize::OutputArchive& archive, const std::string& key, int64_t value) {
  archive.write(key, c10::IValue(value));
}

c10::IValue Read(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value;
}

}  // namespace

std::string CheckpointPath(const std::string& dir) { return dir + "/checkpoint.pt"; }

absl::Status SaveCheckpoint(const std::string& dir, const TrainerState& state,
                            torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("checkpoint: cannot create ", dir, ": ", ec.message()));
  }
  torch::serialize::OutputArchive archive;
  WriteInt(archive, "format", kFormat);
  WriteInt(archive, "step", state.step);
  archive.write("fingerprint", c10::IValue(state.fingerprint));
  archive.write("task_stream", c10::IValue(state.task_stream));
  archive.write("rng_state", state.rng_state);
  WriteDouble(archive, "window.loss_sum", state.window.loss_sum);
  WriteInt(archive, "window.steps", state.window.steps);
  WriteDouble(archive, "window.grad_norm", state.window.grad_norm);
  WriteDouble(archive, "window.lr", state.window.lr);
  WriteDouble(archive, "window.seconds", state.window.seconds);
  WriteInt(archive, "window.tokens", state.window.tokens);
  WriteDouble(archive, "first_train_loss", state.first_train_loss);
  WriteDouble(archive, "last_train_loss", state.last_train_loss);
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  archive.write("model", model_archive);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);

  const std::string path = CheckpointPath(dir);
  const std::string temp = path + ".tmp";
  try {
    archive.save_to(temp);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("checkpoint: cannot write ", temp, ": ", e.what_without_backtrace()));
  }
  if (absl::Status s = FsyncPath(temp, O_RDONLY); !s.ok()) {
    return s;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    return Errno(absl::StrCat("checkpoint: rename ", temp));
  }
  return FsyncPath(dir, O_RDONLY | O_DIRECTORY);
}

absl::StatusOr<std::optional<TrainerState>> LoadCheckpoint(const std::string& dir,
                                                           const std::string& fingerprint,
                                                           torch::nn::Module& model,
                                                           torch::optim::Optimizer& optimizer) {
  const std::string path = CheckpointPath(dir);
  if (!std::filesystem::exists(path)) {
    return std::nullopt;
  }
  TrainerState state;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    if (Read(archive, "format").toInt() != kFormat) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, ": unknown format"));
    }
    state.fingerprint = Read(archive, "fingerprint").toStringRef();
    if (state.fingerprint != fingerprint) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", path, " belongs to a different run config; move it away to start over"));
    }
    state.step = Read(archive, "step").toInt();
    state.task_stream = Read(archive, "task_stream").toStringRef();
    archive.read("rng_state", state.rng_state);
    state.window.loss_sum = Read(archive, "window.loss_sum").toDouble();
    state.window.steps = Read(archive, "window.steps").toInt();
    state.window.grad_norm = Read(archive, "window.grad_norm").toDouble();
    state.window.lr = Read(archive, "window.lr").toDouble();
    state.window.seconds = Read(archive, "window.seconds").toDouble();
    state.window.tokens = Read(archive, "window.tokens").toInt();
    state.first_train_loss = Read(archive, "first_train_loss").toDouble();
    state.last_train_loss = Read(archive, "last_train_loss").toDouble();
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    model.load(model_archive);
    optimizer.load(optimizer_archive);
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is unreadable: ", e.what_without_backtrace()));
  }
  return state;
}

}  // namespace tae::train
