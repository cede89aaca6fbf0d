// taectl ls / show / runs / agents: what taed knows, as tables or --json.

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/commands/common.h"
#include "client/output/table.h"
#include "client/rpc/control_client.h"
#include "common/api/json.h"
#include "common/metrics/names.h"
#include "common/report_text/report_text.h"
#include "common/text/utf8.h"
#include "proto/tae/v1/states.h"

namespace tae::client {

using report_text::NoMetricsText;
using report_text::SavingsText;
namespace {

constexpr int kRunsPage = 100;  // taectl runs: runs per page unless asked

std::string Counts(const tae::v1::RunCounts& c) {
  std::string out = absl::StrCat(c.succeeded(), "/", c.total());
  if (c.running() > 0) {
    absl::StrAppend(&out, " ", c.running(), " running");
  }
  if (c.failed() > 0) {
    absl::StrAppend(&out, " ", c.failed(), " failed");
  }
  if (c.cancelled() > 0) {
    absl::StrAppend(&out, " ", c.cancelled(), " cancelled");
  }
  if (c.pruned() > 0) {
    absl::StrAppend(&out, " ", c.pruned(), " pruned");
  }
  return out;
}

std::string Metric(const tae::v1::Run& run, const std::string& key) {
  for (const tae::v1::Scalar& s : run.final_metrics()) {
    if (s.key() == key) {
      return FormatNumber(s.value());
    }
  }
  return "-";
}

// Two metric columns: the experiment file's [report] metrics, else eval/loss and eval/acc, else
// the runs' own (metrics::DefaultMetrics), so a script's runs show their values, not dashes.
void PrintRuns(const tae::v1::ListRunsResponse& runs, const tae::v1::Experiment& exp) {
  std::vector<std::string> shown(exp.report_metrics().begin(), exp.report_metrics().end());
  if (shown.empty()) {
    shown = RunsDefaultMetrics(runs, 2);
  }
  if (shown.empty()) {
    shown = {tae::metrics::kEvalLoss, tae::metrics::kEvalAcc};
  }
  shown.resize(std::min<size_t>(shown.size(), 2));
  std::vector<std::string> header = {"RUN", "VARIANT", "SEED", "STATE", "ATTEMPT", "AGENT", "STEP"};
  header.insert(header.end(), shown.begin(), shown.end());
  header.push_back("REASON");
  Table table(header);
  for (const tae::v1::Run& run : runs.runs()) {
    std::vector<std::string> row = {
        absl::StrCat("r", run.id()), run.variant(),
        // A confirmation run (search.confirm) says so beside its fresh seed.
        absl::StrCat(run.seed(), run.confirm() ? " confirm" : ""), tae::v1::StateName(run.state()),
        absl::StrCat(run.attempt()), run.agent_id().empty() ? "-" : run.agent_id(),
        absl::StrCat(run.last_step())};
    for (const std::string& key : shown) {
      row.push_back(Metric(run, key));
    }
    row.push_back(run.state() == tae::v1::RUN_STATE_SUCCEEDED ? "" : run.reason());
    table.Add(row);
  }
  std::fputs(table.Render().c_str(), stdout);
}

int ShowRun(ControlClient& client, int64_t run_id, bool json, bool all) {
  tae::v1::GetRunRequest request;
  request.set_run_id(run_id);
  tae::v1::GetRunResponse response;
  absl::Status s =
      client.Check(client.stub()->GetRun(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  const tae::v1::Run& run = response.run();
  if (json) {
    nlohmann::ordered_json out = api::RunJson(run);
    nlohmann::ordered_json transitions = nlohmann::ordered_json::array();
    for (const tae::v1::Transition& t : response.transitions()) {
      transitions.push_back({{"attempt", t.attempt()},
                             {"from", t.from_state()},
                             {"to", t.to_state()},
                             {"reason", t.reason()},
                             {"at", t.at()}});
    }
    out["transitions"] = transitions;
    out["warnings"] =
        std::vector<std::string>(response.warnings().begin(), response.warnings().end());
    int hidden = 0;
    out["config"] = ShownConfig(
        run, {response.command_keys().begin(), response.command_keys().end()}, all, &hidden);
    if (hidden > 0) {
      out["config_hidden"] = hidden;  // keys that never reach the command (--all shows them)
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("run r%ld  experiment e%ld  variant %s  seed %ld%s\n", static_cast<long>(run.id()),
              static_cast<long>(run.experiment_id()), run.variant().c_str(),
              static_cast<long>(run.seed()),
              run.confirm() ? "  (confirms its search: search.confirm)" : "");
  std::printf("state %s  attempt %d  agent %s  pid %ld  last step %ld\n",
              tae::v1::StateName(run.state()), run.attempt(),
              run.agent_id().empty() ? "-" : run.agent_id().c_str(), static_cast<long>(run.pid()),
              static_cast<long>(run.last_step()));
  if (!run.reason().empty()) {
    std::printf("reason: %s\n", run.reason().c_str());
  }
  for (const std::string& warning : response.warnings()) {
    std::printf("warning: %s\n", warning.c_str());
  }
  std::printf("\ntransitions:\n");
  Table transitions({"  AT", "ATTEMPT", "FROM", "TO", "REASON"});
  for (const tae::v1::Transition& t : response.transitions()) {
    transitions.Add({"  " + FormatTime(t.at()), absl::StrCat(t.attempt()),
                     t.from_state().empty() ? "-" : t.from_state(), t.to_state(), t.reason()});
  }
  std::fputs(transitions.Render().c_str(), stdout);
  if (run.final_metrics_size() > 0) {
    std::printf("\nfinal metrics:\n");
    Table metrics({"  METRIC", "VALUE"});
    for (const tae::v1::Scalar& m : run.final_metrics()) {
      metrics.Add({"  " + m.key(), FormatNumber(m.value(), 6)});
    }
    std::fputs(metrics.Render().c_str(), stdout);
  }
  if (!run.meta().empty()) {
    std::printf("\nruntime:\n");
    Table meta({"  KEY", "VALUE"});
    for (const auto& [key, value] :
         std::map<std::string, std::string>(run.meta().begin(), run.meta().end())) {
      meta.Add({"  " + key, value});
    }
    std::fputs(meta.Render().c_str(), stdout);
  }
  int hidden = 0;
  const nlohmann::ordered_json config = ShownConfig(
      run, {response.command_keys().begin(), response.command_keys().end()}, all, &hidden);
  std::printf("\nconfig: %s\n", config.dump().c_str());
  if (hidden > 0) {
    std::printf("(%d more keys, of tae-train, never reach this command job: --all shows them)\n",
                hidden);
  }
  return 0;
}

}  // namespace

int Ls(const CommandEnv& env, const Args& args) {
  bool json = false;
  int limit = 0;
  cli::FlagSet flags("usage: taectl ls [--json] [--limit N]\n\nLists experiments, newest first.");
  flags.Bool("json", &json, "print a JSON array of experiments");
  flags.Int("limit", &limit, "at most N experiments (0: all)");
  Args rest;
  if (int code = ParseOrExit(flags, args, 0, 0, &rest); code >= 0) {
    return code;
  }
  if (limit < 0) {
    return Fail(absl::InvalidArgumentError("--limit: must be >= 0"));
  }
  ControlClient client(env.home);
  tae::v1::ListExperimentsRequest request;
  request.set_limit(limit);
  tae::v1::ListExperimentsResponse response;
  absl::Status s = client.Check(
      client.stub()->ListExperiments(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const tae::v1::Experiment& exp : response.experiments()) {
      out.push_back(api::ExperimentJson(exp));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  Table table({"ID", "NAME", "STATE", "SUCCEEDED", "VARIANTS", "CREATED"});
  for (const tae::v1::Experiment& exp : response.experiments()) {
    table.Add({absl::StrCat("e", exp.id()), exp.name(),
               exp.paused() ? exp.state() + " (paused)" : exp.state(), Counts(exp.counts()),
               absl::StrCat(exp.variants_size()), FormatTime(exp.created_at())});
  }
  std::fputs(table.Render().c_str(), stdout);
  return 0;
}

int Runs(const CommandEnv& env, const Args& args) {
  bool json = false;
  bool all = false;
  int limit = -1;
  std::string after_text;
  cli::FlagSet flags(
      "usage: taectl runs EXP [--limit N] [--after RUN] [--all] [--json]\n\n"
      "Lists the runs of an experiment in id order, a page at a time: the first 100, then\n"
      "--after the last one shown for the next page (the footer says how). --json prints every\n"
      "run unless --limit or --after is given.");
  flags.Bool("json", &json, "print a JSON array of runs");
  flags.Int("limit", &limit, "runs per page (0: all; default 100, with --json all)");
  flags.String("after", &after_text, "start after this run id (r12 or 12)");
  flags.Bool("all", &all, "every run (the same as --limit 0)");
  Args rest;
  if (int code = ParseOrExit(flags, args, 1, 1, &rest); code >= 0) {
    return code;
  }
  int64_t after = 0;
  if (!after_text.empty() &&
      (!absl::SimpleAtoi(absl::StripPrefix(after_text, "r"), &after) || after < 0)) {
    std::fprintf(stderr, "taectl runs: --after: '%s' is not a run id (r12 or 12)\n",
                 after_text.c_str());
    return 2;
  }
  if (limit < -1) {
    std::fprintf(stderr, "taectl runs: --limit: not negative (0: every run)\n");
    return 2;
  }
  if (all) {
    limit = 0;
  } else if (limit < 0) {
    limit = json && after == 0 ? 0 : kRunsPage;
  }
  ControlClient client(env.home);
  tae::v1::ListRunsRequest request;
  request.set_experiment(rest[0]);
  request.set_limit(limit);
  request.set_after_run(after);
  tae::v1::ListRunsResponse response;
  absl::Status s =
      client.Check(client.stub()->ListRuns(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const tae::v1::Run& run : response.runs()) {
      out.push_back(api::RunJson(run));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  tae::v1::GetExperimentRequest get;
  get.set_experiment(rest[0]);
  tae::v1::Experiment exp;
  (void)client.stub()->GetExperiment(ControlClient::Context().get(), get, &exp);  // for [report]
  PrintRuns(response, exp);
  if (response.next_after() > 0) {
    const std::string from = after > 0 ? absl::StrCat(" (after r", after, ")") : "";
    std::printf(
        "\n%d of %ld runs shown%s; next page: taectl runs %s --after %ld (--all: every "
        "run)\n",
        response.runs_size(), static_cast<long>(response.total()), from.c_str(), rest[0].c_str(),
        static_cast<long>(response.next_after()));
  }
  // Every run at step 0 with nothing of its own: ask the report why (and for the output lines).
  const bool nothing =
      std::all_of(response.runs().begin(), response.runs().end(), [](const tae::v1::Run& run) {
        return run.last_step() == 0 &&
               std::all_of(run.final_metrics().begin(), run.final_metrics().end(),
                           [](const tae::v1::Scalar& m) {
                             return tae::metrics::DefaultMetrics({m.key()}, 1).empty();
                           });
      });
  if (nothing && response.runs_size() > 0) {
    tae::v1::ReportRequest why;
    why.set_experiment(rest[0]);
    tae::v1::ReportResponse report;
    if (client.stub()->Report(ControlClient::Context().get(), why, &report).ok()) {
      std::fputs(NoMetricsText(report).c_str(), stderr);
    }
  }
  return 0;
}

int Show(const CommandEnv& env, const Args& args) {
  bool json = false;
  bool all = false;
  cli::FlagSet flags(
      "usage: taectl show ID [--all] [--json]\n\n"
      "Shows a run (r<ID>: state, every transition with its reason, final metrics, config) or\n"
      "an experiment (e<ID>, id or name: its runs). A command job's config lists the keys that\n"
      "reach it: its params, job.*, resources.*, the seed and the keys its command names.");
  flags.Bool("json", &json, "print JSON");
  flags.Bool("all", &all, "a command job's whole config, tae-train's keys too");
  Args rest;
  if (int code = ParseOrExit(flags, args, 1, 1, &rest); code >= 0) {
    return code;
  }
  ControlClient client(env.home);
  int64_t run_id = 0;
  if (rest[0].size() > 1 && (rest[0][0] == 'r' || rest[0][0] == 'R') &&
      absl::SimpleAtoi(rest[0].substr(1), &run_id)) {
    return ShowRun(client, run_id, json, all);
  }
  tae::v1::GetExperimentRequest request;
  request.set_experiment(rest[0]);
  tae::v1::Experiment exp;
  absl::Status s =
      client.Check(client.stub()->GetExperiment(ControlClient::Context().get(), request, &exp));
  if (!s.ok()) {
    return Fail(s);
  }
  tae::v1::ListRunsRequest runs_request;
  runs_request.set_experiment(absl::StrCat(exp.id()));
  tae::v1::ListRunsResponse runs;
  s = client.Check(client.stub()->ListRuns(ControlClient::Context().get(), runs_request, &runs));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    nlohmann::ordered_json out = api::ExperimentJson(exp);
    out["runs"] = nlohmann::ordered_json::array();
    for (const tae::v1::Run& run : runs.runs()) {
      out["runs"].push_back(api::RunJson(run));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("experiment e%ld '%s'  %s  %s\n", static_cast<long>(exp.id()), exp.name().c_str(),
              exp.state().c_str(), Counts(exp.counts()).c_str());
  if (!exp.description().empty()) {
    std::printf("%s\n", exp.description().c_str());
  }
  std::printf("spec %s (hash %s), submitted %s\nvariants: %s\n\n", exp.spec_path().c_str(),
              exp.spec_hash().c_str(), FormatTime(exp.created_at()).c_str(),
              absl::StrJoin(exp.variants(), ", ").c_str());
  PrintRuns(runs, exp);
  if (exp.has_search_savings()) {
    std::printf("\n%s", SavingsText(exp.search_savings()).c_str());
  }
  return 0;
}

int Agents(const CommandEnv& env, const Args& args) {
  bool json = false;
  bool provider = false;
  cli::FlagSet flags(
      "usage: taectl agents [--provider] [--json]\n"
      "       taectl agents drain ID | undrain ID | revoke ID [REASON]\n\n"
      "Lists the agents taed knows. `drain ID` stops placing new runs on an agent (its running\n"
      "runs finish; e.g. before maintenance); `undrain ID` lets it take runs again, and lifts a\n"
      "quarantine (an agent with repeated infrastructure faults takes no runs until then).\n"
      "`revoke ID` locks one agent out for good (docs/security.md): its credential stops\n"
      "working, its runs go back to the queue, and its id cannot enrol again.\n"
      "--provider also shows what taed's providers did, oldest first: each agent started (with\n"
      "the command line, e.g. the ssh one), each exit and restart, each gcloud and kubectl call,\n"
      "and the TPU VMs and GKE slices as last listed. Without it, each GKE slice is one line:\n"
      "its state, and while Kueue holds it, Kueue's reason.");
  flags.Bool("json", &json,
             "print a JSON array of agents ({agents, provider_events, vms} with --provider)");
  flags.Bool("provider", &provider, "also list the providers' recent actions");
  Args rest;
  if (int code = ParseOrExit(flags, args, 0, 3, &rest); code >= 0) {
    return code;
  }
  if (!rest.empty()) {
    if (rest[0] == "revoke" && (rest.size() == 2 || rest.size() == 3)) {
      return RevokeAgent(env, rest[1], rest.size() == 3 ? rest[2] : "", json);
    }
    if ((rest[0] != "drain" && rest[0] != "undrain") || rest.size() != 2) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "agents: '", rest[0], "' is not drain ID, undrain ID or revoke ID [REASON]")));
    }
    return DrainAgent(env, rest[1], rest[0] == "drain");
  }
  ControlClient client(env.home);
  tae::v1::ListAgentsRequest request;
  request.set_provider_events(provider);
  tae::v1::ListAgentsResponse response;
  absl::Status s =
      client.Check(client.stub()->ListAgents(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    nlohmann::ordered_json agents = nlohmann::ordered_json::array();
    for (const tae::v1::AgentInfo& agent : response.agents()) {
      agents.push_back(api::AgentJson(agent));
    }
    if (!provider) {
      std::printf("%s\n", agents.dump(2).c_str());
      return 0;
    }
    nlohmann::ordered_json out = api::FleetJson(response);
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  Table table({"ID", "STATE", "SLOTS", "HOST", "LABELS", "RUNS", "LAST SEEN"});
  std::vector<std::string> quarantined;
  std::vector<std::string> revoked;
  for (const tae::v1::AgentInfo& agent : response.agents()) {
    std::vector<std::string> labels;
    for (const auto& [key, value] : agent.labels()) {
      labels.push_back(absl::StrCat(key, "=", value));
    }
    std::sort(labels.begin(), labels.end());
    std::vector<std::string> runs;
    for (int64_t id : agent.run_ids()) {
      runs.push_back(absl::StrCat("r", id));
    }
    std::string state = tae::v1::StateName(agent.state());
    if (!agent.quarantine().empty()) {
      state = "quarantined";
      quarantined.push_back(text::ForTerminal(absl::StrCat(agent.id(), ": ", agent.quarantine())));
    }
    if (!agent.revoked().empty()) {
      revoked.push_back(text::ForTerminal(absl::StrCat(agent.id(), ": ", agent.revoked())));
    }
    // What an agent (or a cloud) says of itself is printed as text, never as terminal codes.
    table.Add({text::ForTerminal(agent.id()), state,
               absl::StrCat(agent.busy_slots(), "/", agent.slots()),
               text::ForTerminal(agent.host()), text::ForTerminal(absl::StrJoin(labels, ",")),
               runs.empty() ? "-" : absl::StrJoin(runs, ","), FormatTime(agent.last_seen())});
  }
  std::fputs(table.Render().c_str(), stdout);
  for (const std::string& q : quarantined) {
    std::printf("quarantined %s (taectl agents undrain ID lets it take runs again)\n", q.c_str());
  }
  for (const std::string& r : revoked) {
    std::printf("revoked %s\n", r.c_str());
  }
  if (!provider) {
    // GKE slices: where agents are about to come from, or why they do not (Kueue's words).
    for (const tae::v1::CloudVm& vm : response.vms()) {
      if (vm.provider() == "gke") {
        std::printf("%s\n",
                    text::ForTerminal(absl::StrCat("gke slice ", vm.name(), " (pool ", vm.pool(),
                                                   ", namespace ", vm.zone(), "): ", vm.state(),
                                                   vm.detail().empty() ? "" : ": ", vm.detail()))
                        .c_str());
      }
    }
  }
  if (provider) {
    std::printf("\nprovider events (oldest first):\n");
    if (response.provider_events().empty()) {
      std::printf("  none (no agents were started by taed)\n");
    }
    for (const tae::v1::ProviderEvent& event : response.provider_events()) {
      std::printf(
          "  %s  %-5s  %-12s  %-7s  %s\n", FormatTime(event.time()).c_str(),
          text::ForTerminal(event.provider()).c_str(), text::ForTerminal(event.subject()).c_str(),
          text::ForTerminal(event.event()).c_str(), text::ForTerminal(event.detail()).c_str());
    }
    if (!response.vms().empty()) {
      std::printf("\ncloud VMs (as last listed):\n");
      for (const tae::v1::CloudVm& vm : response.vms()) {
        std::printf("  %s\n",
                    text::ForTerminal(absl::StrCat(vm.provider(), "  ", vm.name(), "  ", vm.zone(),
                                                   "  ", vm.state(), "  pool ", vm.pool(),
                                                   vm.detail().empty() ? "" : ": ", vm.detail()))
                        .c_str());
      }
    }
  }
  return 0;
}

}  // namespace tae::client
