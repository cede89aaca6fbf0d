// taectl run / sync: the dev loop. `run DIR -- CMD` mounts DIR and runs CMD on an agent in the
// materialised snapshot, streaming its output; `sync DIR --watch -- CMD` does it again on every
// change, cancelling the previous run.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands/commands.h"
#include "client/commands/common.h"
#include "client/commands/mount.h"
#include "client/output/table.h"
#include "client/watch/watcher.h"
#include "common/cli/flags.h"
#include "common/cli/paths.h"
#include "common/snapshot/snapshot.h"
#include "common/spec/spec.h"
#include "common/status/macros.h"
#include "proto/tae/v1/states.h"

namespace tae::client {
namespace {

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted = true; }

// A TOML basic string.
std::string TomlString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// The command as one shell line; braces doubled, so the spec takes it literally.
std::string CommandLine(const Args& argv) {
  std::vector<std::string> quoted;
  for (const std::string& arg : argv) {
    quoted.push_back(argv.size() == 1 ? arg : spec::ShellQuote(arg));
  }
  std::string line = absl::StrJoin(quoted, " ");
  std::string escaped;
  for (char c : line) {
    escaped += c;
    if (c == '{' || c == '}') {
      escaped += c;
    }
  }
  return escaped;
}

std::string DefaultName(const std::string& root) {
  std::string base = root.substr(root.find_last_of('/') + 1);
  std::string name;
  for (char c : base) {
    name += (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')
                ? c
                : '_';
  }
  return name.empty() ? "run" : name;
}

struct LoopOptions {
  std::string dir;
  std::string name;
  std::vector<std::string> overrides;
  std::string command;
  bool quiet = false;
};

struct Started {
  int64_t experiment = 0;
  int64_t run = 0;
  std::string snapshot;
};

absl::StatusOr<Started> MountAndSubmit(ControlClient& client, const LoopOptions& options,
                                       const MountResult& mount) {
  const std::string name = options.name.empty() ? DefaultName(mount.root) : options.name;
  const std::string spec_text = absl::StrCat(
      "# taectl run\nname = ", TomlString(name), "\n\n[train]\nseeds = [0]\n\n[job]\n",
      "code = ", TomlString(mount.root), "\ncommand = ", TomlString(options.command), "\n");
  tae::v1::SubmitRequest request;
  request.set_spec_text(spec_text);
  request.set_spec_path("taectl run");
  for (const std::string& o : options.overrides) {
    request.add_overrides(o);
  }
  request.set_force_new(true);
  request.set_snapshot_id(mount.id);
  tae::v1::SubmitResponse response;
  RETURN_IF_ERROR(
      client.Check(client.stub()->Submit(ControlClient::Context().get(), request, &response)));
  tae::v1::ListRunsRequest list;
  list.set_experiment(absl::StrCat(response.experiment().id()));
  tae::v1::ListRunsResponse runs;
  RETURN_IF_ERROR(
      client.Check(client.stub()->ListRuns(ControlClient::Context().get(), list, &runs)));
  if (runs.runs_size() != 1) {
    return absl::InternalError(
        absl::StrCat("e", response.experiment().id(), " has ", runs.runs_size(), " runs, not 1"));
  }
  return Started{response.experiment().id(), runs.runs(0).id(), mount.id};
}

// Prints the run's new log lines; returns whether the run is final (and its record).
absl::StatusOr<bool> PumpLogs(ControlClient& client, int64_t run_id, int64_t* cursor,
                              tae::v1::Run* run) {
  while (true) {
    tae::v1::LogsRequest request;
    request.set_run_id(run_id);
    request.set_after(*cursor);
    tae::v1::LogsResponse response;
    RETURN_IF_ERROR(
        client.Check(client.stub()->Logs(ControlClient::Context().get(), request, &response)));
    for (const tae::v1::LogEntry& line : response.lines()) {
      if (line.stream() == "agent") {
        std::fprintf(stderr, "[agent] %s\n", line.text().c_str());
      } else {
        std::fprintf(line.stream() == "stdout" ? stdout : stderr, "%s\n", line.text().c_str());
      }
    }
    std::fflush(stdout);
    *cursor = std::max(*cursor, response.next());
    if (response.lines_size() > 0 && !response.run_finished()) {
      continue;
    }
    if (response.run_finished()) {
      tae::v1::GetRunRequest get;
      get.set_run_id(run_id);
      tae::v1::GetRunResponse got;
      RETURN_IF_ERROR(
          client.Check(client.stub()->GetRun(ControlClient::Context().get(), get, &got)));
      *run = got.run();
      return true;
    }
    return false;
  }
}

void PrintEnd(const tae::v1::Run& run) {
  std::string metrics;
  int shown = 0;
  for (const tae::v1::Scalar& scalar : run.final_metrics()) {
    if (shown++ < 6) {
      absl::StrAppend(&metrics, " ", scalar.key(), "=", FormatNumber(scalar.value()));
    }
  }
  // A run whose job never started (a start fault) has no duration.
  const std::string took =
      run.started_at() > 0
          ? absl::StrCat(" (", FormatDuration(run.finished_at() - run.started_at()), ")")
          : "";
  std::fprintf(stderr, "r%ld %s%s%s%s%s%s\n", static_cast<long>(run.id()),
               tae::v1::StateName(run.state()), run.reason().empty() ? "" : ": ",
               run.reason().c_str(), took.c_str(), metrics.empty() ? "" : "; last",
               metrics.c_str());
}

int ExitCodeOf(const tae::v1::Run& run) {
  if (run.state() == tae::v1::RUN_STATE_SUCCEEDED) {
    return 0;
  }
  return run.exit_code() > 0 ? run.exit_code() : 1;
}

void Cancel(ControlClient& client, int64_t run_id, const std::string& why) {
  tae::v1::CancelRequest request;
  request.set_target(absl::StrCat("r", run_id));
  request.set_reason(why);
  tae::v1::CancelResponse response;
  client.stub()->Cancel(ControlClient::Context().get(), request, &response);
}

absl::Status ParseLoopArgs(const char* verb, cli::FlagSet& flags, const Args& args,
                           LoopOptions* options) {
  auto dash = std::find(args.begin(), args.end(), "--");
  Args before(args.begin(), dash);
  Args command(dash == args.end() ? dash : dash + 1, args.end());
  Args dirs;
  absl::Status parsed = flags.Parse(before, &dirs);
  if (!parsed.ok() || flags.help_requested()) {
    return parsed;
  }
  if (dirs.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(verb, " takes one directory: taectl ", verb,
                                                   " DIR [flags] -- COMMAND [ARG...]"));
  }
  if (command.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        verb, ": no command; put it after --, e.g. taectl ", verb, " . -- python3 train.py"));
  }
  options->dir = cli::AbsolutePath(dirs[0]);
  options->command = CommandLine(command);
  return absl::OkStatus();
}

}  // namespace

int Run(const CommandEnv& env, const Args& args) {
  LoopOptions options;
  bool detach = false;
  cli::FlagSet flags(
      "usage: taectl run DIR [--name N] [--set key=value]... [--detach] -- COMMAND [ARG...]\n\n"
      "Mounts DIR (like taectl mount) and runs COMMAND on an agent, in a run directory that\n"
      "holds the snapshot, with TAE_RUN_ID, TAE_EXPERIMENT, TAE_VARIANT, TAE_SEED,\n"
      "TAE_METRICS_FD and TAE_RUN_DIR set. Output streams here until the run ends; the exit\n"
      "code is the command's. Metrics: JSON lines on $TAE_METRICS_FD (tae_log.log(step=1,\n"
      "loss=2.3) in Python), or stdout lines like 'Epoch=1 Step=40 Loss=2.31 Rate=812.4'.\n"
      "--set passes keys such as resources.labels or resources.slots.");
  flags.String("name", &options.name, "experiment name (default: DIR's name)");
  flags.Repeated("set", &options.overrides, "override key=value (repeatable)");
  flags.Bool("detach", &detach, "submit and print the run id; do not follow the output");
  absl::Status parsed = ParseLoopArgs("run", flags, args, &options);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  ControlClient client(env.home);
  absl::StatusOr<MountResult> mount = MountTree(client, options.dir, StderrProgress());
  if (!mount.ok()) {
    return Fail(mount.status());
  }
  absl::StatusOr<Started> started = MountAndSubmit(client, options, *mount);
  if (!started.ok()) {
    return Fail(started.status());
  }
  std::fprintf(stderr, "r%ld (e%ld) on snapshot %s: %ld files, uploaded %s\n",
               static_cast<long>(started->run), static_cast<long>(started->experiment),
               mount->id.substr(0, 12).c_str(), static_cast<long>(mount->files),
               FormatBytes(mount->bytes_uploaded).c_str());
  if (detach) {
    std::printf("r%ld\n", static_cast<long>(started->run));
    return 0;
  }
  signal(SIGINT, OnInterrupt);
  int64_t cursor = 0;
  tae::v1::Run run;
  while (true) {
    absl::StatusOr<bool> done = PumpLogs(client, started->run, &cursor, &run);
    if (!done.ok()) {
      return Fail(done.status());
    }
    if (*done) {
      break;
    }
    if (g_interrupted) {
      std::fprintf(stderr, "\ninterrupted: cancelling r%ld\n", static_cast<long>(started->run));
      Cancel(client, started->run, "interrupted from taectl run");
      g_interrupted = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  PrintEnd(run);
  return ExitCodeOf(run);
}

int Sync(const CommandEnv& env, const Args& args) {
  LoopOptions options;
  bool watch = false;
  int quiet_ms = 300;
  int max_runs = 0;
  cli::FlagSet flags(
      "usage: taectl sync DIR --watch [--name N] [--set key=value]... -- COMMAND [ARG...]\n\n"
      "Like taectl run, and with --watch again after every change under DIR (files that\n"
      ".gitignore/.taeignore exclude do not count): the tree is snapshotted anew, the previous\n"
      "run is cancelled if it is still going, and COMMAND runs on the new snapshot. Each run\n"
      "keeps its own snapshot id. Changes are debounced: a burst of saves is one change.\n"
      "Ctrl-C cancels the current run and exits.");
  flags.Bool("watch", &watch, "keep watching DIR and re-run on every change");
  flags.String("name", &options.name, "experiment name (default: DIR's name)");
  flags.Repeated("set", &options.overrides, "override key=value (repeatable)");
  flags.Int("quiet-ms", &quiet_ms, "a change is over when nothing changed for this long");
  flags.Int("max-runs", &max_runs,
            "exit once this many runs have started and the last one ended (0: never)");
  absl::Status parsed = ParseLoopArgs("sync", flags, args, &options);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (parsed.ok() && !watch) {
    return Run(env, args);
  }
  if (parsed.ok() && (quiet_ms < 0 || max_runs < 0)) {
    parsed = absl::InvalidArgumentError("--quiet-ms and --max-runs must be >= 0");
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  absl::StatusOr<std::unique_ptr<TreeWatcher>> watcher = TreeWatcher::Start(options.dir);
  if (!watcher.ok()) {
    return Fail(watcher.status());
  }
  signal(SIGINT, OnInterrupt);
  signal(SIGTERM, OnInterrupt);
  ControlClient client(env.home);
  std::string last_snapshot;
  int64_t current = 0;
  bool current_done = true;
  int64_t cursor = 0;
  int runs = 0;
  int last_code = 0;
  bool remount = true;
  while (!g_interrupted) {
    if (remount) {
      remount = false;
      absl::StatusOr<MountResult> mount = MountTree(client, options.dir, StderrProgress());
      if (!mount.ok()) {
        // A half-saved tree (a file removed between walk and upload): wait for the next change.
        std::fprintf(stderr, "taectl: %s; waiting for the next change\n",
                     std::string(mount.status().message()).c_str());
      } else if (mount->id != last_snapshot) {
        if (!current_done) {
          std::fprintf(stderr, "change: cancelling r%ld\n", static_cast<long>(current));
          Cancel(client, current, "superseded by a newer snapshot (taectl sync)");
          tae::v1::Run ended;
          while (true) {  // let its last lines and end print before the next run's
            absl::StatusOr<bool> done = PumpLogs(client, current, &cursor, &ended);
            if (!done.ok() || *done) {
              if (done.ok()) {
                PrintEnd(ended);
              }
              break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }
        absl::StatusOr<Started> started = MountAndSubmit(client, options, *mount);
        if (!started.ok()) {
          return Fail(started.status());
        }
        last_snapshot = mount->id;
        current = started->run;
        current_done = false;
        cursor = 0;
        runs += 1;
        std::fprintf(stderr, "r%ld on snapshot %s (%ld files, uploaded %d, %s)\n",
                     static_cast<long>(current), mount->id.substr(0, 12).c_str(),
                     static_cast<long>(mount->files), mount->blobs_uploaded,
                     FormatBytes(mount->bytes_uploaded).c_str());
      }
    }
    if (!current_done) {
      tae::v1::Run run;
      absl::StatusOr<bool> done = PumpLogs(client, current, &cursor, &run);
      if (!done.ok()) {
        return Fail(done.status());
      }
      if (*done) {
        current_done = true;
        last_code = ExitCodeOf(run);
        PrintEnd(run);
        std::fprintf(stderr, "watching %s for changes (Ctrl-C to stop)\n", options.dir.c_str());
      }
    }
    if (max_runs > 0 && runs >= max_runs && current_done) {
      return last_code;
    }
    absl::StatusOr<std::vector<std::string>> changes =
        (*watcher)->WaitForChanges(quiet_ms, current_done ? 1000 : 250);
    if (!changes.ok()) {
      return Fail(changes.status());
    }
    if (!changes->empty()) {
      remount = true;
    }
  }
  if (!current_done) {
    std::fprintf(stderr, "\ninterrupted: cancelling r%ld\n", static_cast<long>(current));
    Cancel(client, current, "interrupted from taectl sync");
  }
  return 130;
}

}  // namespace tae::client
