// taectl submit / wait: send an experiment file to taed and follow it to the end.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands/commands.h"
#include "client/commands/mount.h"
#include "client/output/table.h"
#include "client/rpc/control_client.h"
#include "common/api/json.h"
#include "common/cli/flags.h"
#include "common/cli/paths.h"
#include "common/fs/fs.h"
#include "common/spec/notes.h"
#include "common/spec/spec.h"
#include "proto/tae/v1/states.h"

namespace tae::client {
namespace {

std::string ProgressLine(const tae::v1::Experiment& exp, const tae::v1::ListRunsResponse& runs,
                         double elapsed) {
  const tae::v1::RunCounts& c = exp.counts();
  int done = c.succeeded() + c.failed() + c.cancelled() + c.pruned();
  std::string line = absl::StrCat("[", FormatDuration(elapsed), "] e", exp.id(), " ", exp.name(),
                                  ": ", done, "/", c.total(), " done");
  if (c.failed() > 0) {
    absl::StrAppend(&line, " (", c.failed(), " failed)");
  }
  std::vector<std::string> running;
  for (const tae::v1::Run& run : runs.runs()) {
    if (run.state() == tae::v1::RUN_STATE_RUNNING || run.state() == tae::v1::RUN_STATE_ASSIGNED) {
      running.push_back(
          absl::StrCat("r", run.id(), " ", run.variant(), "/s", run.seed(), " @", run.last_step()));
    }
  }
  if (!running.empty()) {
    absl::StrAppend(&line, ", running ", absl::StrJoin(running, ", "));
  }
  if (c.queued() > 0) {
    absl::StrAppend(&line, ", ", c.queued(), " queued");
    for (const tae::v1::Run& run : runs.runs()) {
      if (running.empty() && run.state() == tae::v1::RUN_STATE_QUEUED && !run.reason().empty()) {
        absl::StrAppend(&line, " (", run.reason(), ")");  // e.g. no agent has the labels
        break;
      }
    }
  }
  return line;
}

bool Finished(const tae::v1::Experiment& exp) {
  const tae::v1::RunCounts& c = exp.counts();
  return c.total() > 0 && c.succeeded() + c.failed() + c.cancelled() + c.pruned() == c.total();
}

// Polls until every run of the experiment is final, printing progress on stderr. Returns the
// exit code: 0 when every run succeeded.
int WaitFor(ControlClient& client, const std::string& experiment, double timeout_s) {
  auto start = std::chrono::steady_clock::now();
  bool tty = isatty(STDERR_FILENO);
  std::string last_counts;
  double last_print = 0;
  tae::v1::Experiment exp;
  while (true) {
    tae::v1::GetExperimentRequest request;
    request.set_experiment(experiment);
    exp.Clear();
    absl::Status s =
        client.Check(client.stub()->GetExperiment(ControlClient::Context().get(), request, &exp));
    if (!s.ok()) {
      return Fail(s);
    }
    tae::v1::ListRunsRequest runs_request;
    runs_request.set_experiment(experiment);
    tae::v1::ListRunsResponse runs;
    s = client.Check(client.stub()->ListRuns(ControlClient::Context().get(), runs_request, &runs));
    if (!s.ok()) {
      return Fail(s);
    }
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string line = ProgressLine(exp, runs, elapsed);
    // One refreshed line on a terminal; on a log, a line when a run starts or ends, and a
    // heartbeat line every 15 s.
    std::string counts = absl::StrCat(exp.counts().queued(), "/", exp.counts().running(), "/",
                                      exp.counts().succeeded() + exp.counts().failed() +
                                          exp.counts().cancelled() + exp.counts().pruned());
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    } else if (counts != last_counts || elapsed - last_print >= 15) {
      std::fprintf(stderr, "%s\n", line.c_str());
      last_print = elapsed;
    }
    last_counts = counts;
    if (Finished(exp)) {
      break;
    }
    if (timeout_s > 0 && elapsed > timeout_s) {
      std::fprintf(stderr, "%staectl: still running after %.0fs\n", tty ? "\n" : "", timeout_s);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (tty) {
    std::fprintf(stderr, "\n");
  }
  const tae::v1::RunCounts& c = exp.counts();
  std::fprintf(stderr, "e%ld %s %s: %d succeeded, %d failed, %d cancelled%s\n",
               static_cast<long>(exp.id()), exp.name().c_str(), exp.state().c_str(), c.succeeded(),
               c.failed(), c.cancelled(),
               c.pruned() > 0 ? absl::StrCat(", ", c.pruned(), " pruned by [search]").c_str() : "");
  // Pruned runs ended as the search decided: not a failure.
  return c.succeeded() + c.pruned() == c.total() ? 0 : 1;
}

// What a run changes against the baseline config: its grid point, then its ablation's overrides.
std::string OverridesText(const spec::Spec& spec, const spec::RunPlan& run) {
  std::vector<std::string> parts;
  auto add = [&parts](const std::string& key, const nlohmann::json& value) {
    parts.push_back(
        absl::StrCat(key, "=", value.is_string() ? value.get<std::string>() : value.dump()));
  };
  for (const auto& [key, value] : run.grid.items()) {
    if (key == spec::kRungKey && value.is_number_integer() &&
        value.get<size_t>() < spec.scale.rungs.size()) {  // the rung's overrides, by name
      std::vector<std::string> rung;
      for (const auto& [scale_key, scale_value] : spec.scale.rungs[value.get<size_t>()].items()) {
        rung.push_back(absl::StrCat(scale_key, "=", scale_value.is_string()
                                                        ? scale_value.get<std::string>()
                                                        : scale_value.dump()));
      }
      parts.push_back(absl::StrCat("rung ", value.get<size_t>(), ": ", absl::StrJoin(rung, " ")));
      continue;
    }
    add(key, value);
  }
  for (const spec::Variant& ablation : spec.ablations) {
    if (ablation.name == run.ablation) {
      for (const auto& [key, value] : ablation.overrides.items()) {
        add(key, value);
      }
    }
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

// --dry-run: the runs the spec expands to, without contacting taed.
int PrintDryRun(const spec::Spec& spec, bool json) {
  std::vector<spec::RunPlan> runs = spec::ExpandRuns(spec);
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const spec::RunPlan& run : runs) {
      out.push_back({{"variant", run.variant},
                     {"ablation", run.ablation},
                     {"grid", run.grid},
                     {"seed", run.seed},
                     {"overrides", OverridesText(spec, run)},
                     {"config", run.config}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  Table table({"#", "VARIANT", "SEED", "OVERRIDES (vs the baseline config)"});
  int index = 0;
  for (const spec::RunPlan& run : runs) {
    table.Add(
        {absl::StrCat(++index), run.variant, absl::StrCat(run.seed), OverridesText(spec, run)});
  }
  size_t points = 1;
  for (const spec::GridAxis& axis : spec.grid) {
    points *= axis.values.size();
  }
  std::fputs(table.Render().c_str(), stdout);
  const std::string rungs =
      spec.scale.declared() ? absl::StrCat(spec.scale.rungs.size(), " rungs x ") : "";
  std::printf("%zu runs: %zu variants x %s%zu grid points x %zu seeds (dry run: nothing "
              "submitted)\n",
              runs.size(), 1 + spec.ablations.size(), rungs.c_str(), points, spec.seeds.size());
  if (spec.scale.declared() && spec.scale.params.empty()) {
    std::printf("note: each rung's size N is what its baseline runs report (model/params, or a "
                "command job's 'params' metric); give scale.params to set it\n");
  }
  // A command job that names neither patterns nor event files reports only what it writes for
  // TAE (tae_log, key=value lines): said before anything runs, as the report would say after.
  if (!spec.job_command.empty() && !runs.empty()) {
    const nlohmann::json& config = runs.front().config;
    const bool patterns = config.value("job.metrics.pattern", nlohmann::json::array()).size() > 0;
    const bool events = !config.value("job.tensorboard", std::string()).empty();
    if (!patterns && !events) {
      std::printf(
          "note: this command job sets neither [job.metrics] nor job.tensorboard, so its "
          "metrics are only what it writes for TAE. %s",
          api::WaysToReport().c_str());
    }
  }
  return 0;
}

}  // namespace

int Submit(const CommandEnv& env, const Args& args) {
  std::vector<std::string> overrides;
  bool wait = false;
  bool force_new = false;
  bool json = false;
  bool dry_run = false;
  double timeout_s = 0;
  cli::FlagSet flags(
      "usage: taectl submit FILE [--set key=value]... [--dry-run] [--wait [--timeout S]] [--new]\n"
      "                    [--json]\n\n"
      "Validates the experiment file, then queues its runs: the baseline and each [[ablation]],\n"
      "at every point of the [grid] (if any), once per seed of train.seeds. Submitting an\n"
      "identical spec again returns the existing experiment unless --new is given. --set\n"
      "overrides any key of the baseline, e.g. --set model.layers=4. --dry-run prints the\n"
      "runs it would queue (variant, seed, overrides) and submits nothing.");
  flags.Repeated("set", &overrides, "override key=value (repeatable)");
  flags.Bool("wait", &wait, "follow progress on stderr until every run is final");
  flags.Bool("new", &force_new, "a new experiment even if an identical one exists");
  flags.Bool("dry-run", &dry_run, "print the expanded runs table and submit nothing");
  flags.Bool("json", &json, "print {\"experiment\": ID, ...} on stdout");
  flags.Double("timeout", &timeout_s, "with --wait: give up after this many seconds (0: never)");
  Args files;
  absl::Status parsed = flags.Parse(args, &files);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (parsed.ok() && files.size() != 1) {
    parsed = absl::InvalidArgumentError("submit takes exactly one experiment file");
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  // Absolute from here on: taed records where the study came from, and [job] code is found
  // beside it.
  const std::string spec_path = cli::AbsolutePath(files[0]);
  absl::StatusOr<std::string> text = fs::ReadFile(spec_path);
  if (!text.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("cannot read ", files[0])));
  }
  absl::StatusOr<spec::Spec> spec = spec::ParseSpec(*text, files[0], overrides);
  if (!spec.ok()) {
    return Fail(spec.status());
  }
  // Notes on the design go where a person reads (stderr under --json, whose stdout is data).
  const std::vector<std::string> notes = spec::DesignNotes(*spec);
  for (const std::string& note : notes) {
    std::fprintf(json ? stderr : stdout, "note: %s\n", note.c_str());
  }
  if (dry_run) {
    return PrintDryRun(*spec, json);
  }
  ControlClient client(env.home);
  tae::v1::SubmitRequest request;
  if (!spec->job_code.empty()) {
    // [job] code is relative to the spec file.
    const std::string code =
        spec->job_code[0] == '/'
            ? spec->job_code
            : cli::AbsolutePath(absl::StrCat(spec_path.substr(0, spec_path.find_last_of('/') + 1),
                                             spec->job_code));
    absl::StatusOr<MountResult> mount = MountTree(client, code, StderrProgress());
    if (!mount.ok()) {
      return Fail(absl::Status(mount.status().code(),
                               absl::StrCat(files[0], ": [job] code: ", mount.status().message())));
    }
    std::fprintf(json ? stderr : stdout, "mounted %s as snapshot %s (%ld files, uploaded %s)\n",
                 code.c_str(), mount->id.substr(0, 12).c_str(), static_cast<long>(mount->files),
                 FormatBytes(mount->bytes_uploaded).c_str());
    request.set_snapshot_id(mount->id);
  }
  request.set_spec_text(*text);
  request.set_spec_path(spec_path);
  for (const std::string& o : overrides) {
    request.add_overrides(o);
  }
  request.set_force_new(force_new);
  tae::v1::SubmitResponse response;
  absl::Status s =
      client.Check(client.stub()->Submit(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  const tae::v1::Experiment& exp = response.experiment();
  FILE* human = json ? stderr : stdout;
  if (response.existing()) {
    std::fprintf(human, "identical to e%ld '%s' (%s); use --new to run it again\n",
                 static_cast<long>(exp.id()), exp.name().c_str(), exp.state().c_str());
  } else {
    std::fprintf(human, "submitted e%ld '%s': %d runs (%d variants x %zu seeds)\n",
                 static_cast<long>(exp.id()), exp.name().c_str(), exp.counts().total(),
                 exp.variants_size(), spec->seeds.size());  // grid points are in the variants
  }
  if (!wait) {
    std::fprintf(human, "follow it with: taectl wait e%ld; then: taectl report e%ld\n",
                 static_cast<long>(exp.id()), static_cast<long>(exp.id()));
  }
  int code = 0;
  if (wait) {
    code = WaitFor(client, absl::StrCat(exp.id()), timeout_s);
  }
  if (json) {
    nlohmann::ordered_json out = {
        {"experiment", exp.id()}, {"existing", response.existing()}, {"notes", notes}};
    tae::v1::GetExperimentRequest get;
    get.set_experiment(absl::StrCat(exp.id()));
    tae::v1::Experiment latest;
    if (client.stub()->GetExperiment(ControlClient::Context().get(), get, &latest).ok()) {
      out["state"] = latest.state();
      out["details"] = api::ExperimentJson(latest);
    }
    std::printf("%s\n", out.dump(2).c_str());
  }
  return code;
}

int Wait(const CommandEnv& env, const Args& args) {
  double timeout_s = 0;
  cli::FlagSet flags(
      "usage: taectl wait EXP [--timeout S]\n\n"
      "Follows an experiment until every run is final; exit code 0 only if all succeeded.");
  flags.Double("timeout", &timeout_s, "give up after this many seconds (0: never)");
  Args rest;
  absl::Status parsed = flags.Parse(args, &rest);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (parsed.ok() && rest.size() != 1) {
    parsed = absl::InvalidArgumentError("wait takes one experiment (id, e<ID> or name)");
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  ControlClient client(env.home);
  return WaitFor(client, rest[0], timeout_s);
}

}  // namespace tae::client
