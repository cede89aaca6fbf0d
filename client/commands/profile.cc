// taectl profile / artifacts: profiles on demand and the artifacts runs stored (docs/profiles.md).

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands/commands.h"
#include "client/commands/common.h"
#include "client/commands/mount.h"
#include "client/commands/pull.h"
#include "client/output/table.h"
#include "client/rpc/control_client.h"
#include "common/cli/flags.h"
#include "common/fs/fs.h"
#include "common/profile/trace.h"
#include "common/status/macros.h"
#include "nlohmann/json.hpp"

namespace tae::client {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(200);

// The Chrome trace among a profile's files: trace.json, else the largest *.json.
std::string FindTrace(const std::string& dir) {
  std::string best;
  uintmax_t best_size = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(ec) || entry.path().extension() != ".json") {
      continue;
    }
    if (name == "trace.json") {
      return entry.path().string();
    }
    const uintmax_t size = entry.file_size(ec);
    if (best.empty() || size > best_size) {
      best = entry.path().string();
      best_size = size;
    }
  }
  return best;
}


}  // namespace

int Profile(const CommandEnv& env, const Args& args) {
  bool json = false;
  std::string steps_text;
  std::string seconds_text;
  std::string out_dir;
  std::string svg_path;
  std::string timeout_text = "300";
  std::string top_text = "15";
  cli::FlagSet flags(
      "usage: taectl profile RUN [--steps N | --seconds S] [-o DIR] [--svg FILE] [--json]\n\n"
      "Asks RUN's job (it must be running) to capture a profile now, waits for it, fetches it\n"
      "into DIR (default ./rRUN-profile-ID) and prints where the time went: the top operators by\n"
      "self time, the share of matmul / attention / elementwise / optimizer, and the allocator\n"
      "peak. tae-train profiles N whole training steps (default 5) with libtorch's profiler;\n"
      "your own job answers through tae_log.profile() (torch.profiler, torch_xla or jax, into\n"
      "TAE_PROFILE_DIR). The files are kept on taed as the run's artifact profile-ID\n"
      "(taectl artifacts RUN). --svg writes a flame chart of the trace. docs/profiles.md.");
  flags.String("steps", &steps_text, "profile this many training steps (default 5)");
  flags.String("seconds", &seconds_text, "profile the steps of this many seconds instead");
  flags.String("output", &out_dir, "directory for the profile's files (-o)");
  flags.String("svg", &svg_path, "write a flame chart of the trace to this SVG file");
  flags.String("timeout", &timeout_text, "give up waiting after this many seconds (300)");
  flags.String("top", &top_text, "operators listed (15)");
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
  int64_t steps = 0;
  double seconds = 0;
  double timeout = 0;
  int64_t top = 0;
  if (!steps_text.empty() && (!absl::SimpleAtoi(steps_text, &steps) || steps < 1)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--steps ", steps_text, ": expected a number of steps >= 1")));
  }
  if (!seconds_text.empty() && (!absl::SimpleAtod(seconds_text, &seconds) || !(seconds > 0))) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--seconds ", seconds_text, ": expected a number of seconds > 0")));
  }
  if (steps > 0 && seconds > 0) {
    return Fail(absl::InvalidArgumentError("--steps, --seconds: give one of them"));
  }
  if (!absl::SimpleAtod(timeout_text, &timeout) || !(timeout > 0)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--timeout ", timeout_text, ": expected seconds > 0")));
  }
  if (!absl::SimpleAtoi(top_text, &top) || top < 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--top ", top_text, ": expected >= 1")));
  }
  ControlClient client(env.home);
  tae::v1::ProfileRequest request;
  request.set_run_id(*run);
  request.set_steps(static_cast<int32_t>(steps));
  request.set_seconds(seconds);
  tae::v1::ProfileResponse ticket;
  absl::Status s =
      client.Check(client.stub()->Profile(ControlClient::Context().get(), request, &ticket));
  if (!s.ok()) {
    return Fail(s);
  }
  if (out_dir.empty()) {
    out_dir = absl::StrCat("r", *run, "-", ticket.artifact());
  }
  if (absl::Status empty = CheckEmptyDir(out_dir); !empty.ok()) {
    return Fail(empty);
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::fprintf(stderr, "r%lld: asked for profile %s (%s); waiting for the job...%s",
               static_cast<long long>(*run), ticket.id().c_str(),
               seconds > 0 ? absl::StrFormat("%.3g s", seconds).c_str()
                           : absl::StrCat(steps > 0 ? steps : 5, " steps").c_str(),
               tty ? "" : "\n");
  const auto start = std::chrono::steady_clock::now();
  tae::v1::GetProfileResponse status;
  while (true) {
    tae::v1::GetProfileRequest poll;
    poll.set_run_id(*run);
    poll.set_id(ticket.id());
    s = client.Check(client.stub()->GetProfile(ControlClient::Context().get(), poll, &status));
    if (!s.ok()) {
      if (tty) {
        std::fprintf(stderr, "\n");
      }
      return Fail(s);
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status.state() != tae::v1::GetProfileResponse::PENDING) {
      if (tty) {
        std::fprintf(stderr, " %.1f s\n", waited);
      }
      break;
    }
    if (waited > timeout) {
      if (tty) {
        std::fprintf(stderr, "\n");
      }
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "r", *run, ": no profile after ", timeout_text,
          " s (a job of your own must call tae_log.profile() or answer TAE_PROFILE_REQUEST; "
          "if it arrives later: taectl artifacts r",
          *run, ")")));
    }
    std::this_thread::sleep_for(kPollInterval);  // polling taed: a CLI wait, not a test
  }
  if (status.state() == tae::v1::GetProfileResponse::FAILED) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("r", *run, " profile ", ticket.id(), ": ", status.error())));
  }
  tae::v1::GetCheckpointRequest get;
  get.set_run_id(*run);
  get.set_artifact(ticket.artifact());
  tae::v1::Checkpoint artifact;
  s = client.Check(client.stub()->GetCheckpoint(ControlClient::Context().get(), get, &artifact));
  if (!s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<snapshot::FillStats> pulled = PullInto(client, artifact, out_dir);
  if (!pulled.ok()) {
    return Fail(pulled.status());
  }
  const std::string trace_path = FindTrace(out_dir);
  nlohmann::ordered_json out = CheckpointJson(artifact);
  out["dir"] = out_dir;
  std::string summary_text;
  if (!trace_path.empty()) {
    absl::StatusOr<std::string> text = fs::ReadFile(trace_path);
    absl::StatusOr<profile::Trace> trace =
        text.ok() ? profile::ParseTrace(*text) : absl::StatusOr<profile::Trace>(text.status());
    if (!trace.ok()) {
      return Fail(absl::Status(trace.status().code(),
                               absl::StrCat(trace_path, ": ", trace.status().message())));
    }
    profile::Summary summary = profile::Summarize(*trace, static_cast<size_t>(top));
    out["trace"] = trace_path;
    out["summary"] = {{"ranges", summary.ranges},
                      {"self_ms", summary.self_us / 1e3},
                      {"steps", summary.steps},
                      {"peak_allocated_bytes", summary.peak_allocated_bytes}};
    nlohmann::ordered_json shares = nlohmann::ordered_json::object();
    for (const auto& [category, us] : summary.category_us) {
      shares[category] = summary.self_us > 0 ? us / summary.self_us : 0.0;
    }
    out["summary"]["shares"] = shares;
    out["summary"]["top"] = nlohmann::ordered_json::array();
    for (const profile::OpTotal& op : summary.top) {
      out["summary"]["top"].push_back({{"name", op.name},
                                       {"calls", op.calls},
                                       {"self_ms", op.self_us / 1e3},
                                       {"total_ms", op.total_us / 1e3}});
    }
    summary_text = profile::FormatSummary(summary);
    if (!svg_path.empty()) {
      profile::FlameOptions options;
      options.title = absl::StrCat("r", *run, " ", ticket.artifact());
      std::ofstream svg(svg_path, std::ios::trunc);
      svg << profile::RenderFlameSvg(*trace, options);
      if (!svg.good()) {
        return Fail(absl::InternalError(absl::StrCat("--svg ", svg_path, ": cannot write")));
      }
      out["svg"] = svg_path;
    }
  } else if (!svg_path.empty()) {
    return Fail(absl::NotFoundError(
        absl::StrCat(out_dir, ": no Chrome trace JSON among the profile's files for --svg")));
  }
  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("r%lld %s: %d files, %s in %s\n", static_cast<long long>(*run),
              ticket.artifact().c_str(), pulled->files, FormatBytes(pulled->bytes).c_str(),
              out_dir.c_str());
  if (!summary_text.empty()) {
    std::printf("trace %s\n%s", trace_path.c_str(), summary_text.c_str());
  } else {
    std::printf("no Chrome trace JSON among its files (open them with the tool that wrote them)\n");
  }
  if (!svg_path.empty()) {
    std::printf("flame chart: %s\n", svg_path.c_str());
  }
  return 0;
}

int Artifacts(const CommandEnv& env, const Args& args) {
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl artifacts [RUN] [--json]\n\n"
      "Lists the artifacts RUN (r12; default every run) stored on taed, newest first: the\n"
      "profiles taectl profile and train.profile_at captured. taectl pull RUN --artifact NAME\n"
      "-o DIR fetches one; taectl scrap --artifacts removes them.");
  flags.Bool("json", &json, "print JSON");
  Args positional;
  int code = ParseOrExit(flags, args, 0, 1, &positional);
  if (code >= 0) {
    return code;
  }
  int64_t run = 0;
  if (!positional.empty()) {
    absl::StatusOr<int64_t> parsed = ParseRunId(positional[0]);
    if (!parsed.ok()) {
      return Fail(parsed.status());
    }
    run = *parsed;
  }
  ControlClient client(env.home);
  tae::v1::ListArtifactsRequest request;
  request.set_run_id(run);
  tae::v1::ListArtifactsResponse response;
  absl::Status s = client.Check(
      client.stub()->ListArtifacts(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const tae::v1::Checkpoint& a : response.artifacts()) {
      out.push_back(CheckpointJson(a));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (response.artifacts().empty()) {
    std::printf("%s\n", run > 0 ? absl::StrCat("r", run, " has no artifacts on taed").c_str()
                                : "no artifacts on taed");
    return 0;
  }
  Table table({"RUN", "ARTIFACT", "STEP", "ATTEMPT", "STORED", "FILES", "SIZE"});
  for (const tae::v1::Checkpoint& a : response.artifacts()) {
    table.Add({absl::StrCat("r", a.run_id()), a.artifact(), absl::StrCat(a.step()),
               absl::StrCat(a.attempt()), FormatTime(a.created_at()), absl::StrCat(a.files()),
               FormatBytes(static_cast<uint64_t>(a.bytes()))});
  }
  std::fputs(table.Render().c_str(), stdout);
  return 0;
}

}  // namespace tae::client
