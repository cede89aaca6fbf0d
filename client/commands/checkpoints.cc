// taectl checkpoints / pull: the checkpoints runs uploaded to taed (docs/checkpoints.md), and
// pull --artifact for the artifacts that share their store (docs/profiles.md).

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands/commands.h"
#include "client/commands/common.h"
#include "client/commands/mount.h"
#include "client/commands/pull.h"
#include "client/output/table.h"
#include "client/rpc/control_client.h"
#include "common/blobs/transfer.h"
#include "common/cli/flags.h"
#include "common/snapshot/fill.h"
#include "common/snapshot/snapshot.h"
#include "common/status/macros.h"
#include "nlohmann/json.hpp"

namespace tae::client {
namespace {

constexpr int kHashesPerFetch = 4096;
constexpr int kFetchTimeoutMs = 3600 * 1000;

}  // namespace

nlohmann::ordered_json CheckpointJson(const tae::v1::Checkpoint& c) {
  nlohmann::ordered_json out = {{"run", c.run_id()},
                                {"attempt", c.attempt()},
                                {"step", c.step()},
                                {"id", c.id()},
                                {"files", c.files()},
                                {"bytes", c.bytes()},
                                {"created_at", c.created_at()}};
  if (!c.artifact().empty()) {
    out["artifact"] = c.artifact();
  }
  return out;
}

absl::StatusOr<snapshot::FillStats> PullInto(ControlClient& client,
                                             const tae::v1::Checkpoint& checkpoint,
                                             const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<snapshot::Entry> entries,
                   snapshot::ParseManifest(checkpoint.manifest()));
  ASSIGN_OR_RETURN(std::unique_ptr<snapshot::TreeFill> fill,
                   snapshot::TreeFill::Start(std::move(entries), dir));
  const std::vector<std::string>& missing = fill->missing();
  for (size_t i = 0; i < missing.size(); i += kHashesPerFetch) {
    tae::v1::FetchBlobsRequest request;
    for (size_t j = i; j < std::min(missing.size(), i + kHashesPerFetch); ++j) {
      request.add_hashes(missing[j]);
    }
    std::unique_ptr<grpc::ClientContext> ctx = ControlClient::Context(kFetchTimeoutMs);
    auto reader = client.stub()->FetchCheckpointBlobs(ctx.get(), request);
    RETURN_IF_ERROR(blobs::ReceiveInto(reader.get(), ctx.get(), fill.get(), "fetching from taed"));
  }
  RETURN_IF_ERROR(fill->Finish());
  return fill->stats();
}

absl::Status CheckEmptyDir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) &&
      (!std::filesystem::is_directory(dir, ec) ||
       std::filesystem::directory_iterator(dir, ec) != std::filesystem::directory_iterator())) {
    return absl::InvalidArgumentError(
        absl::StrCat("-o ", dir, ": exists and is not an empty directory"));
  }
  return absl::OkStatus();
}

int Checkpoints(const CommandEnv& env, const Args& args) {
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl checkpoints RUN [--json]\n\n"
      "Lists the checkpoints RUN (r12) uploaded to taed, newest first: each time its job marked\n"
      "TAE_CHECKPOINT_DIR complete (tae_log.checkpoint(step), tae-train's own saves) the agent\n"
      "uploaded what taed lacked. taed keeps the last resources.keep_checkpoints (default 2);\n"
      "a new attempt on any agent starts from the newest. taectl pull fetches one.");
  flags.Bool("json", &json, "print JSON");
  Args positional;
  int code = ParseOrExit(flags, args, 1, 1, &positional);
  if (code >= 0) {
    return code;
  }
  absl::StatusOr<int64_t> run = ParseRunId(positional[0]);
  if (!run.ok()) {
    return Fail(run.status());
  }
  ControlClient client(env.home);
  tae::v1::ListCheckpointsRequest request;
  request.set_run_id(*run);
  tae::v1::ListCheckpointsResponse response;
  absl::Status s = client.Check(
      client.stub()->ListCheckpoints(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    nlohmann::ordered_json out = {
        {"run", *run}, {"keep", response.keep()}, {"checkpoints", nlohmann::ordered_json::array()}};
    for (const tae::v1::Checkpoint& c : response.checkpoints()) {
      out["checkpoints"].push_back(CheckpointJson(c));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (response.checkpoints().empty()) {
    std::printf("r%lld has no checkpoints on taed (keeps %d)\n", static_cast<long long>(*run),
                response.keep());
    return 0;
  }
  Table table({"STEP", "ATTEMPT", "STORED", "FILES", "SIZE", "ID"});
  for (const tae::v1::Checkpoint& c : response.checkpoints()) {
    table.Add({absl::StrCat(c.step()), absl::StrCat(c.attempt()), FormatTime(c.created_at()),
               absl::StrCat(c.files()), FormatBytes(static_cast<uint64_t>(c.bytes())),
               c.id().substr(0, 12)});
  }
  std::fputs(table.Render().c_str(), stdout);
  std::printf("keeps the last %d\n", response.keep());
  return 0;
}

int Pull(const CommandEnv& env, const Args& args) {
  bool json = false;
  std::string out_dir;
  std::string step_text;
  std::string artifact;
  cli::FlagSet flags(
      "usage: taectl pull RUN -o|--output DIR [--step N | --artifact NAME] [--json]\n\n"
      "Fetches a checkpoint RUN (r12) uploaded to taed into DIR (created; it must be empty):\n"
      "the newest, or the one of step N (taectl checkpoints RUN lists them). With --artifact,\n"
      "the run's artifact of that name instead (a profile; taectl artifacts RUN lists them).\n"
      "Every file is verified against its SHA-256 before it appears.");
  flags.String("output", &out_dir, "directory to write the checkpoint's files into (-o)");
  flags.String("step", &step_text, "the checkpoint of this step (default: the newest)");
  flags.String("artifact", &artifact, "the artifact of this name (e.g. profile-p3f9a2c)");
  flags.Bool("json", &json, "print JSON");
  Args positional;
  int code = ParseOrExit(flags, WithLongOutput(args), 1, 1, &positional);
  if (code >= 0) {
    return code;
  }
  absl::StatusOr<int64_t> run = ParseRunId(positional[0]);
  if (!run.ok()) {
    return Fail(run.status());
  }
  if (out_dir.empty()) {
    return Fail(absl::InvalidArgumentError("-o DIR: where to put the checkpoint is required"));
  }
  if (absl::Status empty = CheckEmptyDir(out_dir); !empty.ok()) {
    return Fail(empty);
  }
  if (!artifact.empty() && !step_text.empty()) {
    return Fail(absl::InvalidArgumentError("--step, --artifact: give one of them"));
  }
  tae::v1::GetCheckpointRequest request;
  request.set_run_id(*run);
  request.set_artifact(artifact);
  if (!step_text.empty()) {
    int64_t step = 0;
    if (!absl::SimpleAtoi(step_text, &step) || step < 0) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--step ", step_text, ": expected a step number >= 0")));
    }
    request.set_step(step);
  }
  ControlClient client(env.home);
  tae::v1::Checkpoint checkpoint;
  absl::Status s = client.Check(
      client.stub()->GetCheckpoint(ControlClient::Context().get(), request, &checkpoint));
  if (!s.ok()) {
    return Fail(s);
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<snapshot::FillStats> stats = PullInto(client, checkpoint, out_dir);
  if (!stats.ok()) {
    return Fail(absl::Status(
        stats.status().code(),
        absl::StrCat("r", *run, " ",
                     artifact.empty() ? absl::StrCat("step ", checkpoint.step()) : artifact,
                     " into ", out_dir, ": ", stats.status().message())));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (json) {
    nlohmann::ordered_json out = CheckpointJson(checkpoint);
    out["dir"] = out_dir;
    out["seconds"] = seconds;
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf(
      "r%lld %s: %d files, %s into %s in %.1f s\n", static_cast<long long>(*run),
      artifact.empty() ? absl::StrCat("step ", checkpoint.step()).c_str() : artifact.c_str(),
      stats->files, FormatBytes(stats->bytes).c_str(), out_dir.c_str(), seconds);
  return 0;
}

}  // namespace tae::client
